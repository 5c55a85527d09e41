import { ErrorCodes, type Broker } from '../core/index.js';
import { printable } from '../core/printable.js';
import { blockKey, type AskedQuestion, type PromptBlock } from '../plugins/approval/index.js';
import { getAuditHooks, type AuditRecord } from '../plugins/audit.js';
import { pathProblemErrno } from '../sandbox/kernel-bridge.js';
import { withConfigFile } from './turn-summary.js';

/** Denials listed by name before the rest are only counted. */
export const LISTED_DENIALS = 20;

/** Something a command (or a guarded tool) was not let do, and why. */
export interface Refusal {
  /**
   * `denied`: the policy refused it (or what it needed failed: a backup over the size cap,
   * a store that cannot be written); `not-approved`: it needed a person's approval and the
   * answer was no, or none came in time; `needs-approval`: it needed one and nobody could
   * be asked (no approver). Nothing was changed for any of them.
   */
  kind: 'denied' | 'not-approved' | 'needs-approval';
  /** `write`, `delete`, `read`, … */
  access: string;
  /** The path as the broker judged it (symlinks resolved). */
  path: string;
  /** The operation that asked (`open`, `rename`, `unlink`, …), when known. */
  operation?: string;
  /** Why, in words for a person; a remedy is named where the policy has one. */
  reason: string;
}

/**
 * Denials, each path once per access; past LISTED_DENIALS only the first refusal of a
 * kind of access not listed yet (a delete after many refused writes), so no kind of
 * refusal goes unmentioned; the rest are counted.
 */
export class DenialList {
  readonly #listed = new Map<string, Refusal>();
  readonly #kinds = new Set<string>();
  #unlisted = 0;

  add(refusal: Refusal): void {
    const key = `${refusal.access} ${refusal.path}`;
    if (this.#listed.has(key)) return;
    if (this.#listed.size < LISTED_DENIALS || !this.#kinds.has(refusal.access)) {
      this.#listed.set(key, refusal);
      this.#kinds.add(refusal.access);
    } else {
      this.#unlisted++;
    }
  }

  get listed(): Refusal[] {
    return [...this.#listed.values()].map((refusal) => ({ ...refusal }));
  }

  /** Denials past the limit, counted only (each is in the audit log). */
  get unlisted(): number {
    return this.#unlisted;
  }
}

/**
 * The denial an audit record stands for, or undefined: allowed; a prompt (reported with
 * its answer instead); a path the kernel itself would fail (missing, a loop), which fails
 * as it would without the sandbox; a move across file systems or out of the temp dir,
 * which the program answers by copying (mv does).
 */
export function denialOf(record: AuditRecord, homeConfigFile: string): Refusal | undefined {
  if (record.ok || record.verdict === 'prompt') return undefined;
  if (pathProblemErrno(record.error) !== undefined) return undefined;
  if (record.error?.code === ErrorCodes.HOST_OP_FAILED && record.error.errno === 'EXDEV') return undefined;
  const target = record.paths.find((p) => p.access !== 'read') ?? record.paths[0];
  if (!target) return undefined;
  // What the policy let through and then failed (a backup over the size cap) is still refused: its error says why.
  const why = record.verdict === 'deny' ? (record.reason ?? record.error?.message) : (record.error?.message ?? record.reason);
  return {
    kind: 'denied',
    access: target.access,
    path: target.normalisedPath ?? target.path,
    operation: record.operation,
    reason: why === undefined ? 'denied' : withConfigFile(why, homeConfigFile),
  };
}

/**
 * The denials of each tool call while it runs, from the audit plugin's published record
 * hook. A record that names no tool call (a socket line refused before it became a
 * request) happened while every watched call ran, so each of them gets it.
 */
export class DenialCollector {
  readonly #active = new Map<string, Set<DenialList>>();

  constructor(broker: Broker, homeConfigFile: string) {
    getAuditHooks(broker).record.tap('sandbox-session-refusals', (record) => {
      if (this.#active.size === 0) return;
      const denial = denialOf(record, homeConfigFile);
      if (!denial) return;
      const lists = record.toolCallId === undefined ? [...this.#active.values()] : [this.#active.get(record.toolCallId)].filter((set) => set !== undefined);
      for (const set of lists) for (const list of set) list.add(denial);
    });
  }

  /** Start collecting for a tool call; the returned function stops and gives what was collected. */
  watch(toolCallId: string): () => DenialList {
    const list = new DenialList();
    let lists = this.#active.get(toolCallId);
    if (!lists) {
      lists = new Set();
      this.#active.set(toolCallId, lists);
    }
    lists.add(list);
    return () => {
      const current = this.#active.get(toolCallId);
      current?.delete(list);
      if (current?.size === 0) this.#active.delete(toolCallId);
      return list;
    };
  }
}

/**
 * What the approval side refused: each prompt block still refused, as `not-approved` when
 * a question about it got no (or no answer), `needs-approval` when nobody was asked.
 */
export function promptRefusals(blocks: readonly PromptBlock[], questions: readonly AskedQuestion[] = []): Refusal[] {
  const refusedBy = new Map<string, string>();
  for (const question of questions) {
    if (question.choice === undefined && question.byScope === undefined && question.refusal !== undefined && question.refusal !== 'nobody could be asked') {
      refusedBy.set(blockKey(question.block), question.refusal);
    }
  }
  return blocks.map((block) => {
    const refusal = refusedBy.get(blockKey(block));
    const why = block.reason ?? 'it needs approval';
    return {
      kind: refusal === undefined ? 'needs-approval' : 'not-approved',
      access: block.access,
      path: block.normalisedPath,
      operation: block.operation,
      reason: refusal === undefined || refusal === 'not approved' ? why : `${why} (${refusal})`,
    };
  });
}

/** A denial as `run` prints it on stderr: one line, no escape sequence of the path's or reason's sent raw. */
export function denialLine(refusal: Refusal): string {
  return `brokered-shell: denied ${printable(`${refusal.access} ${refusal.path}`)}: ${printable(refusal.reason)}`;
}

/** The line after the listed denials, when some were only counted. */
export function unlistedLine(unlisted: number): string | undefined {
  return unlisted > 0 ? `brokered-shell: … and ${unlisted} more refused request${unlisted === 1 ? '' : 's'} (each is in the audit log)` : undefined;
}
