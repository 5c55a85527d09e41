import { readdir } from 'node:fs/promises';
import {
  BrokerError,
  ErrorCodes,
  PolicyStage,
  type Access,
  type Broker,
  type BrokerPlugin,
  type Operation,
  type PathKind,
  type ResolvedRequest,
  type ResolvedTarget,
} from '../core/index.js';
import { takenTree } from '../requests/taken-tree.js';
import type { PromptBlock } from './approval/index.js';
import { getLeaseHooks } from './lease/hooks.js';

/** One (path, access, operation) a person approved in this session. */
export interface SessionGrant {
  /** The resolved (symlink-followed) path, as the prompt block named it. */
  path: string;
  access: Access;
  /** The operation the person was asked about; absent: a caller granted the access for every operation. */
  operation?: Operation;
  /** For a rename, copy or hard link: the kind of source the person was asked about. */
  sourceKind?: PathKind;
  grantedAt: string;
  /** The tool calls whose prompt blocks led to the grant. */
  toolCallIds: string[];
}

/** What `grant` needs of a prompt block (its operation, when given, bounds the grant). */
export type GrantableBlock = Pick<PromptBlock, 'normalisedPath' | 'access'> & Partial<Pick<PromptBlock, 'sessionId' | 'toolCallIds' | 'operation' | 'sourceKind'>>;

/** A grant without an operation is stored under ANY_OPERATION. */
const ANY_OPERATION = '*';
const keyOf = (path: string, access: Access, operation: string, sourceKind = '') => `${access}\0${operation}\0${sourceKind}\0${path}`;

/**
 * Approvals a person gave during this session, remembered so the same question is not
 * asked twice. After a `prompt` the owner asks a person; on yes it calls `grant(blocks)`,
 * and from then on this plugin answers `grant-token` for exactly those (resolved path,
 * access, operation) triples, at `PolicyStage.SESSION_GRANTS`: after the denials nothing lifts
 * (`PROTECTED`), before the prompts a person may lift (mandatory protections, rules,
 * `outsideRoots: prompt`). A grant never reaches another path, another access or
 * another session: one instance serves one broker, and blocks of another session are
 * ignored.
 *
 * The operation counts, and for a rename, copy or hard link what its source is: a yes to
 * `mkdir .git` is not a yes to a symlink, a file or a directory moved in at `.git`, and a
 * yes to moving an empty directory there is not a yes to moving a link or a file there.
 * A directory removed, moved or copied as a whole is judged by what is inside it, which
 * can change after the approval; such a request that takes a non-empty directory along
 * (from the path, or to it) is not lifted by a grant of the path: the policy decides it
 * as usual.
 */
export class SessionGrantsPlugin implements BrokerPlugin {
  static readonly PLUGIN_NAME = 'session-grants';
  readonly name = SessionGrantsPlugin.PLUGIN_NAME;
  readonly #grants = new Map<string, SessionGrant>();
  #broker: Broker | undefined;

  apply(broker: Broker): void {
    // Grants only lift prompts, and a prompted path is never leased: nothing to add.
    getLeaseHooks(broker).contribute.tap(this.name, () => undefined);
    if (this.#broker && this.#broker !== broker) {
      throw new BrokerError(ErrorCodes.INVALID_OPTIONS, 'a session-grants plugin serves one broker; make one per session');
    }
    this.#broker = broker;
    broker.hooks.evaluatePolicy.tapPromise({ name: this.name, stage: PolicyStage.SESSION_GRANTS }, async (target, resolved, context) => {
      const { operation } = resolved.request;
      const sourceKind = resolved.targets.find((t) => t.role === 'from')?.kind;
      const grant =
        this.#grants.get(keyOf(target.resolved, target.access, operation, sourceKind)) ?? this.#grants.get(keyOf(target.resolved, target.access, ANY_OPERATION));
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
      const key = block.operation === undefined ? keyOf(block.normalisedPath, block.access, ANY_OPERATION) : keyOf(block.normalisedPath, block.access, block.operation, block.sourceKind);
      const existing = this.#grants.get(key);
      const toolCallIds = block.toolCallIds ?? [];
      if (existing) {
        for (const id of toolCallIds) if (!existing.toolCallIds.includes(id)) existing.toolCallIds.push(id);
        continue;
      }
      const grant: SessionGrant = {
        path: block.normalisedPath,
        access: block.access,
        ...(block.operation === undefined ? {} : { operation: block.operation }),
        ...(block.sourceKind === undefined ? {} : { sourceKind: block.sourceKind }),
        grantedAt: new Date().toISOString(),
        toolCallIds: [...toolCallIds],
      };
      this.#grants.set(key, grant);
      added.push({ ...grant, toolCallIds: [...grant.toolCallIds] });
      this.#broker?.log.info({ phase: 'approval', plugin: this.name, path: grant.path, access: grant.access, operation: grant.operation }, 'granted for this session');
    }
    return added;
  }

  /** Whether `path` (resolved, absolute) has a grant for `access`: one that covers `operation`, or (without it) any grant at all. */
  has(path: string, access: Access, operation?: Operation): boolean {
    if (operation !== undefined) return [...this.#grants.values()].some((grant) => grant.path === path && grant.access === access && (grant.operation === undefined || grant.operation === operation));
    return [...this.#grants.values()].some((grant) => grant.path === path && grant.access === access);
  }

  /** Every grant so far, oldest first. */
  list(): SessionGrant[] {
    return [...this.#grants.values()].map((grant) => ({ ...grant, toolCallIds: [...grant.toolCallIds] }));
  }
}

/** Whether the request takes a non-empty directory along (see takenTree, which file-safety's tree check asks too). */
async function reachesNonEmptyTree(target: ResolvedTarget, resolved: ResolvedRequest): Promise<boolean> {
  const taken = takenTree(target, resolved);
  return taken !== undefined && notEmpty(taken.dir);
}

async function notEmpty(dir: string): Promise<boolean> {
  try {
    return (await readdir(dir)).length > 0;
  } catch {
    // What cannot be inspected is not lifted.
    return true;
  }
}
