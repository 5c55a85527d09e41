import { readdir } from 'node:fs/promises';
import {
  BrokerError,
  ErrorCodes,
  PolicyStage,
  type Access,
  type Broker,
  type BrokerPlugin,
  type ResolvedRequest,
  type ResolvedTarget,
} from '../core/index.js';
import type { PromptBlock } from './approval.js';

/** One (path, access) pair a person approved in this session. */
export interface SessionGrant {
  /** The resolved (symlink-followed) path, as the prompt block named it. */
  path: string;
  access: Access;
  grantedAt: string;
  /** The tool calls whose prompt blocks led to the grant. */
  toolCallIds: string[];
}

/** What `grant` needs of a prompt block. */
export type GrantableBlock = Pick<PromptBlock, 'normalisedPath' | 'access'> & Partial<Pick<PromptBlock, 'sessionId' | 'toolCallIds'>>;

const keyOf = (path: string, access: Access) => `${access}\0${path}`;

/**
 * Approvals a person gave during this session, remembered so the same question is not
 * asked twice. After a `prompt` the owner asks a person; on yes it calls `grant(blocks)`,
 * and from then on this plugin answers `grant-token` for exactly those (resolved path,
 * access) pairs, at `PolicyStage.SESSION_GRANTS`: after the denials nothing lifts
 * (`PROTECTED`), before the prompts a person may lift (mandatory protections, rules,
 * `outsideRoots: prompt`). A grant never reaches another path, another access or
 * another session: one instance serves one broker, and blocks of another session are
 * ignored.
 *
 * A directory removed, moved or copied over as a whole is judged by what is inside it,
 * which can change after the approval; such a request on a directory that is not empty
 * is not lifted by a grant of the directory: the policy decides it as usual.
 */
export class SessionGrantsPlugin implements BrokerPlugin {
  static readonly PLUGIN_NAME = 'session-grants';
  readonly name = SessionGrantsPlugin.PLUGIN_NAME;
  readonly #grants = new Map<string, SessionGrant>();
  #broker: Broker | undefined;

  apply(broker: Broker): void {
    if (this.#broker && this.#broker !== broker) {
      throw new BrokerError(ErrorCodes.INVALID_OPTIONS, 'a session-grants plugin serves one broker; make one per session');
    }
    this.#broker = broker;
    broker.hooks.evaluatePolicy.tapPromise({ name: this.name, stage: PolicyStage.SESSION_GRANTS }, async (target, resolved, context) => {
      const grant = this.#grants.get(keyOf(target.resolved, target.access));
      if (!grant) return undefined;
      if (await reachesNonEmptyTree(target, resolved)) return undefined;
      context.log.debug(
        { phase: 'policy', plugin: this.name, path: target.path, normalisedPath: target.resolved, access: target.access },
        'approved earlier in this session',
      );
      return { verdict: 'grant-token', reason: 'approved earlier in this session', source: this.name };
    });
  }

  /** Remember approvals for these blocks; returns the grants that are new. */
  grant(blocks: readonly GrantableBlock[]): SessionGrant[] {
    const added: SessionGrant[] = [];
    const sessionId = this.#broker?.sessionId;
    for (const block of blocks) {
      if (sessionId !== undefined && block.sessionId !== undefined && block.sessionId !== sessionId) continue;
      if (!block.normalisedPath.startsWith('/')) continue;
      const key = keyOf(block.normalisedPath, block.access);
      const existing = this.#grants.get(key);
      const toolCallIds = block.toolCallIds ?? [];
      if (existing) {
        for (const id of toolCallIds) if (!existing.toolCallIds.includes(id)) existing.toolCallIds.push(id);
        continue;
      }
      const grant: SessionGrant = { path: block.normalisedPath, access: block.access, grantedAt: new Date().toISOString(), toolCallIds: [...toolCallIds] };
      this.#grants.set(key, grant);
      added.push({ ...grant, toolCallIds: [...grant.toolCallIds] });
      this.#broker?.log.info({ phase: 'approval', plugin: this.name, path: grant.path, access: grant.access }, 'granted for this session');
    }
    return added;
  }

  /** Whether `path` (resolved, absolute) has a grant for `access`. */
  has(path: string, access: Access): boolean {
    return this.#grants.has(keyOf(path, access));
  }

  /** Every grant so far, oldest first. */
  list(): SessionGrant[] {
    return [...this.#grants.values()].map((grant) => ({ ...grant, toolCallIds: [...grant.toolCallIds] }));
  }
}

/** Whether the request takes a directory's contents with it (see file-safety's tree check). */
async function reachesNonEmptyTree(target: ResolvedTarget, resolved: ResolvedRequest): Promise<boolean> {
  if (target.kind !== 'directory') return false;
  const { operation, options } = resolved.request;
  if (operation === 'delete' || (operation === 'rename' && target.role === 'from')) return notEmpty(target.resolved);
  if (operation === 'copy' && target.role === 'to' && options.recursive === true) {
    // A tree copy writes the source's entries under the destination.
    const from = resolved.targets.find((t) => t.role === 'from');
    return from?.kind === 'directory' ? notEmpty(from.resolved) : false;
  }
  return false;
}

async function notEmpty(dir: string): Promise<boolean> {
  try {
    return (await readdir(dir)).length > 0;
  } catch {
    // What cannot be inspected is not lifted.
    return true;
  }
}
