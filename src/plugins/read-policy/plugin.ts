import { constants } from 'node:fs';
import { PolicyStage, type Access, type Broker, type BrokerPlugin, type BrokerRequest, type Decision, type ResolvedRequest, type ResolvedTarget } from '../../core/index.js';
import { formsOf } from '../file-safety/patterns.js';
import { getLeaseHooks } from '../lease/hooks.js';
import { readPolicyLease } from './lease.js';
import { FileSafetyPlugin, PLUGIN_NAME as FILE_SAFETY } from '../file-safety/plugin.js';
import { heldDenial } from './held-inside.js';
import { npmUserConfigCopy } from './npm-userconfig.js';
import type { ReadPolicyOptions } from './options.js';
import { compileReadPolicy, type ReadDenial, type ReadPolicy, type ReadRule } from './policy.js';
import { unreadableNow, type UnreadablePath } from './unreadable.js';

export const PLUGIN_NAME = 'read-policy';

/**
 * What a session's commands may not read: the secret list (credentials where this
 * machine keeps them, the broker's own store) and the file-safety rules that deny `read`.
 *
 * The command's own reads never reach the broker: when it starts, `unreadableNow()` gives
 * the launcher the real paths to keep from it, and Landlock refuses them in the kernel
 * (native/sandbox/read-allow.c), whatever the program and however it names them. This
 * plugin refuses the rest, every request through which the broker would read, hand over
 * or move such a path for a requester:
 * - a read (the text-token `.read` class, a host `copy`'s source, a hard link's source,
 *   which would give the file a name in a readable folder);
 * - an open the broker performs or grants that could read (a kernel open not write-only,
 *   the text-token `.read-write` class);
 * - a rename of it, or of a folder holding it, and a delete to the trash (both move it to
 *   a readable place), and a recursive copy of a folder holding it.
 * At the protected stage: no rule, grant or approval lifts it. Where the rule that denies
 * reading denies the request's own access too (a `deny` rule with no `access`), that rule
 * refuses it, in file-safety's rules stage, with its own reason.
 */
export class ReadPolicyPlugin implements BrokerPlugin {
  static readonly PLUGIN_NAME = PLUGIN_NAME;
  readonly name = PLUGIN_NAME;
  readonly policy: ReadPolicy;

  constructor(options: ReadPolicyOptions) {
    this.policy = compileReadPolicy(options);
  }

  apply(broker: Broker): void {
    // Asked at each decision, not here: which plugins a broker has does not depend on the order they were added in.
    const ruleDenies: RuleDenies = (rule, access) =>
      broker.plugin<FileSafetyPlugin>(FILE_SAFETY)?.policy.rules.some((other) => other.pattern === rule.pattern && other.decision === 'deny' && other.access.has(access)) === true;
    broker.hooks.evaluatePolicy.tapPromise({ name: PLUGIN_NAME, stage: PolicyStage.PROTECTED }, (target, resolved) => this.decide(target, resolved, ruleDenies));
    getLeaseHooks(broker).contribute.tap(PLUGIN_NAME, (lease) => readPolicyLease(this.policy, this.lastUnreadable, lease));
  }

  /** What the last command started (prepareLaunch) may not read. */
  lastUnreadable: readonly UnreadablePath[] = [];

  /** What a command starting now may not read (real paths, with why). Looks at the disk. */
  unreadableNow(): Promise<UnreadablePath[]> {
    return unreadableNow(this.policy);
  }

  /**
   * For a command about to start with its own temp dir `scratch`: the paths the launcher
   * keeps from it, and the variables to run it with (a credential-free npm user config).
   * Throws when the policy cannot be applied (a read rule's walk over its limit).
   */
  async prepareLaunch(scratch: string): Promise<ReadLaunch> {
    const unreadable = await this.unreadableNow();
    this.lastUnreadable = unreadable;
    return { readDenied: unreadable.map((entry) => entry.path), env: await npmUserConfigCopy(this.policy, scratch) };
  }

  /**
   * The plugin's opinion of one target: deny where the request would read, hand over or
   * move what may not be read. `ruleDenies`: whether file-safety holds the same rule and it
   * denies this access too; then that rule is left to refuse it, with its own reason.
   */
  async decide(target: ResolvedTarget, resolved: Pick<ResolvedRequest, 'request'>, ruleDenies: RuleDenies = () => false): Promise<Decision | undefined> {
    const { request } = resolved;
    if (!readsOrMoves(target, request)) return undefined;
    const found = this.policy.denialWithRule(formsOf(target, this.policy.homes).all);
    // A rule that denies this very access too says so itself, with its own reason (file-safety's rules stage).
    if (found?.rule && ruleDenies(found.rule, judgedAccess(target, request))) return undefined;
    if (found) return refusal(target.resolved, found.denial, request);
    if (target.kind !== 'directory' || !takesWhole(target, request)) return undefined;
    const held = await heldDenial(target.resolved, this.policy);
    return held && refusal(target.resolved, held.denial, request, held.path);
  }
}

/** Does file-safety on this broker hold `rule` and deny `access` by it? */
export type RuleDenies = (rule: ReadRule, access: Access) => boolean;

export interface ReadLaunch {
  /** For the launcher's `--deny-read`. */
  readonly readDenied: readonly string[];
  /** Variables to set for the command (undefined: remove it). */
  readonly env: Readonly<Record<string, string | undefined>>;
}

const O_ACCMODE = 3;

/** Whether the request, granted, would let its requester (or a readable place) have the target's content. */
function readsOrMoves(target: ResolvedTarget, request: BrokerRequest): boolean {
  if (target.access === 'read') return true;
  if (request.operation === 'rename') return target.role === 'from';
  if (request.operation === 'delete') return request.action === 'host-op' && request.options.deleteMode !== 'unlink';
  if (request.operation !== 'open') return false;
  // A `.read-write` token answers for reading too; the supervisor opens with the command's own flags.
  if (request.origin === 'text-token') return true;
  return request.origin === 'kernel' && ((request.options.openFlags ?? constants.O_RDWR) & O_ACCMODE) !== constants.O_WRONLY;
}

/** The access file-safety judges a target by: a hard link's source is a write where it lives. */
function judgedAccess(target: ResolvedTarget, request: BrokerRequest): Access {
  return request.operation === 'link' && target.role === 'from' && request.options.symbolic !== true ? 'write' : target.access;
}

/** A folder the request takes along with everything in it. */
function takesWhole(target: ResolvedTarget, request: BrokerRequest): boolean {
  if (request.operation === 'copy') return target.role === 'from' && request.options.recursive === true;
  return request.operation === 'rename' || request.operation === 'delete';
}

function refusal(resolved: string, denial: ReadDenial, request: BrokerRequest, inside?: string): Decision {
  const what = inside === undefined ? resolved : `${resolved} holds ${inside}, which`;
  const how = request.operation === 'open' || request.operation === 'copy' || request.operation === 'link' ? '' : ` (a ${request.operation} would take it to where it can be read)`;
  return { verdict: 'deny', reason: `${what} may not be read${how}: ${denial.by}; ${denial.remedy}`, source: denial.source };
}
