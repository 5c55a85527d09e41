import { readFileSync, statSync, type Stats } from 'node:fs';
import path from 'node:path';
import { PolicyStage, type Broker, type BrokerPlugin, type Decision, type Peer, type RequestContext, type ResolvedRequest, type ResolvedTarget } from '../core/index.js';
import { ProcStatusReader } from './proc-status.js';
import { getLeaseHooks } from './lease/hooks.js';

/** Who asked, as the kernel would judge their access: ids and whether DAC binds them. */
export interface Requester {
  uid: number;
  gids: readonly number[];
  /** CAP_DAC_OVERRIDE or CAP_DAC_READ_SEARCH: reads every file anyway. */
  readsAll: boolean;
  /** CAP_DAC_OVERRIDE and CAP_FOWNER: writes, renames and chmods anything anyway. */
  writesAll?: boolean;
}

export interface RequesterAccessOptions {
  /** Who a socket peer is (default: its /proc/PID/status, through a kept descriptor); undefined when it cannot be told. */
  peerRequester?: (peer: Peer) => Requester | undefined;
  /** Who a kernel request comes from (default: this process's ids, with no capabilities: the sandbox drops them all). */
  sandboxRequester?: () => Requester;
  /** stat (following links) of a resolved path; undefined when it is gone. */
  stat?: (file: string) => StatLike | undefined;
}

const CAP_DAC_OVERRIDE = 1n;
const CAP_DAC_READ_SEARCH = 2n;
const CAP_FOWNER = 3n;
const READ = 4;
const WRITE = 2;
const SEARCH = 1;
const STICKY = 0o1000;
/** Operations that change an existing file itself (its bytes or metadata) rather than a name in its directory. */
const IN_PLACE = new Set(['open', 'truncate', 'copy', 'touch', 'chmod', 'chown', 'xattr']);
/** Of those, the ones only the owner may do. */
const OWNER_ONLY = new Set(['chmod', 'chown']);
export type StatLike = Pick<Stats, 'uid' | 'gid' | 'mode' | 'isFile'>;
/** What the targets of one request share: who asked (null: gone) and, per directory, whether the path to it is searchable. */
interface RequestMemo {
  who?: Requester | null;
  searchable: Map<string, boolean>;
}
/** Where the memo lives in the request's context state. */
const MEMO = Symbol('requester-access: request memo');

/** A peer's ids and capabilities from /proc/PID/status (opened for this one call). */
export function procRequester(peer: Peer): Requester | undefined {
  let status: string;
  try {
    status = readFileSync(`/proc/${peer.pid}/status`, 'utf8');
  } catch {
    return undefined;
  }
  return requesterFromStatus(status, peer);
}

// One line each, and never past its end: `Groups:` of a process without supplementary
// groups is empty, and a pattern that let its blank run into the next line read the
// process's own pid (`NStgid:`) as a group. Anything unexpected counts as nothing granted.
const CAP_EFF_LINE = /^CapEff:[ \t]*([0-9a-f]{1,16})[ \t]*$/m;
const GROUPS_LINE = /^Groups:([ \t0-9]*)$/m;

/** The ids and DAC capabilities a /proc/PID/status text gives the peer. */
export function requesterFromStatus(status: string, peer: Peer): Requester {
  const effective = BigInt(`0x${CAP_EFF_LINE.exec(status)?.[1] ?? '0'}`);
  const groups = (GROUPS_LINE.exec(status)?.[1] ?? '').split(/[ \t]+/).filter(Boolean).map(Number);
  const has = (cap: bigint) => ((effective >> cap) & 1n) === 1n;
  return { uid: peer.uid, gids: [peer.gid, ...groups], readsAll: has(CAP_DAC_OVERRIDE) || has(CAP_DAC_READ_SEARCH), writesAll: has(CAP_DAC_OVERRIDE) && has(CAP_FOWNER) };
}

function ownRequester(): Requester {
  return { uid: process.getuid?.() ?? -1, gids: [process.getgid?.() ?? -1, ...(process.getgroups?.() ?? [])], readsAll: false };
}

function statOrUndefined(file: string) {
  try {
    return statSync(file);
  } catch {
    return undefined;
  }
}

/** The permission bits DAC gives the requester on a file. */
function bitsFor(who: Requester, info: Pick<Stats, 'uid' | 'gid' | 'mode'>): number {
  if (info.uid === who.uid) return (info.mode >> 6) & 7;
  return who.gids.includes(info.gid) ? (info.mode >> 3) & 7 : info.mode & 7;
}

/** Read access as far as the broker copying it is concerned: the owner counts (it may chmod the file to itself). */
function mayRead(who: Requester, info: Pick<Stats, 'uid' | 'gid' | 'mode'>): boolean {
  return who.readsAll || info.uid === who.uid || (bitsFor(who, info) & READ) !== 0;
}

/**
 * The broker acts with its own rights, which may exceed the sandboxed command's (a broker
 * running as root keeps the capabilities the command lost). It reads a copy's source and
 * every existing file it backs up (into a store the command can read), and it performs
 * host operations and opens fd grants itself. A command could therefore have it read a
 * file the command may not read (copy it into the workspace; or ask to overwrite it and
 * read the backup), or chmod, overwrite, move or delete another user's files.
 *
 * For requests from the sandbox (kernel and socket origins, and those a socket client's
 * command made; not the owner's in-process calls) this denies, before anything a person
 * could approve: a file the broker would read that the requester could not read by the
 * mode bits (its owner counts as able: it may chmod it) and its directories' search bits;
 * and a change the broker would make that DAC would refuse the requester (write bit for an
 * in-place change, owner for chmod/chown, write and search on the directory for a name
 * change, the sticky bit, protected hard links). The kernel supervisor performs its
 * operations with the command's own rights, so only the read check applies to it. ACLs
 * are not consulted (mode bits only), and a recursive delete is judged by its top entry.
 * A socket peer that cannot be told (gone) is refused.
 */
export class RequesterAccessPlugin implements BrokerPlugin {
  static readonly PLUGIN_NAME = 'requester-access';
  readonly name = RequesterAccessPlugin.PLUGIN_NAME;
  readonly #peerRequester: (peer: Peer) => Requester | undefined;
  readonly #sandboxRequester: () => Requester;
  readonly #stat: (file: string) => StatLike | undefined;
  readonly #statusFiles = new ProcStatusReader();

  constructor(options: RequesterAccessOptions = {}) {
    this.#peerRequester = options.peerRequester ?? ((peer) => this.#fromStatusFile(peer));
    // This process's ids do not change while it runs: asked once, not per request.
    let own: Requester | undefined;
    this.#sandboxRequester = options.sandboxRequester ?? (() => (own ??= ownRequester()));
    this.#stat = options.stat ?? statOrUndefined;
  }

  apply(broker: Broker): void {
    // The supervisor acts with the command's own rights, reads included: nothing the kernel would not refuse.
    getLeaseHooks(broker).contribute.tap(this.name, () => undefined);
    broker.hooks.evaluatePolicy.tap({ name: this.name, stage: PolicyStage.PROTECTED }, (target, resolved, context) => this.#decide(target, resolved, context));
    broker.hooks.close.tap(this.name, () => this.#statusFiles.close());
  }

  #fromStatusFile(peer: Peer): Requester | undefined {
    const status = this.#statusFiles.read(peer.pid);
    return status === undefined ? undefined : requesterFromStatus(status, peer);
  }

  #decide(target: ResolvedTarget, resolved: ResolvedRequest, context: RequestContext): Decision | undefined {
    const { request } = resolved;
    // In-process calls are the owner's own, unless a socket client's announcement made them (it has a peer).
    if (request.origin === 'api' && !request.peer) return undefined;
    const copySource = request.action === 'host-op' && request.operation === 'copy';
    // A read the broker neither performs nor links: nothing to check, no stat to pay for.
    if (target.access === 'read' && !copySource && request.operation !== 'link') return undefined;
    const info = target.kind === 'absent' ? undefined : this.#stat(target.resolved);
    // The broker reads: a copy's source, and every existing file it backs up before a change.
    const brokerReads = target.access === 'read' ? copySource : info?.isFile() === true;
    // The broker itself changes it (host operations, fd grants); the kernel supervisor acts with the command's own rights.
    const brokerWrites = target.access !== 'read' && (request.action === 'host-op' || request.action === 'token');
    if (!brokerReads && !brokerWrites && request.operation !== 'link') return undefined;
    // The targets of one request (a rename's two names, say) share who asked and the directories above them.
    const memo = memoOf(context);
    if (memo.who === undefined) memo.who = (request.peer ? this.#peerRequester(request.peer) : this.#sandboxRequester()) ?? null;
    const who = memo.who;
    if (!who) return this.#deny('the requesting process is gone: its rights cannot be told');
    if (brokerReads && info && !who.readsAll && !(mayRead(who, info) && this.#searchable(who, target.resolved, memo))) {
      return this.#deny(`${target.resolved} is not readable by the requesting process; the broker does not read it on its behalf`);
    }
    // protected_hardlinks: a hard link only to a file one owns, or may both read and write.
    const hardLinkSource = request.action === 'host-op' && request.operation === 'link' && target.role === 'from' && request.options.symbolic !== true;
    if (hardLinkSource && info && !who.writesAll && info.uid !== who.uid && (bitsFor(who, info) & (READ | WRITE)) !== (READ | WRITE)) {
      return this.#deny(`${target.resolved} is neither owned nor both readable and writable by the requesting process; the broker does not link it on its behalf`);
    }
    if (brokerWrites && !who.writesAll) {
      const why = this.#writeProblem(who, target, request.operation, info, memo);
      if (why) return this.#deny(`${target.resolved}: ${why}; the broker does not do it on the requesting process's behalf`);
    }
    return undefined;
  }

  /** Why DAC would refuse the requester this change, or undefined when it would allow it. */
  #writeProblem(who: Requester, target: ResolvedTarget, operation: string, info: StatLike | undefined, memo: RequestMemo): string | undefined {
    if (!this.#searchable(who, target.resolved, memo)) return 'a directory above it is not searchable by the requesting process';
    if (info && IN_PLACE.has(operation) && target.role !== 'from') {
      if (OWNER_ONLY.has(operation)) return info.uid === who.uid ? undefined : 'only its owner may change its mode or owner';
      if (operation === 'touch' && info.uid === who.uid) return undefined;
      // A copy replaces the destination's name as well; a touch or open of an existing file changes only it.
      if ((bitsFor(who, info) & WRITE) === 0) return 'the requesting process may not write it';
      if (operation !== 'copy') return undefined;
    }
    const parent = this.#stat(path.dirname(target.resolved));
    if (!parent || (bitsFor(who, parent) & (WRITE | SEARCH)) !== (WRITE | SEARCH)) return 'the requesting process may not change names in its directory';
    if (info && (parent.mode & STICKY) !== 0 && info.uid !== who.uid && parent.uid !== who.uid) return 'its directory is sticky and the requesting process owns neither';
    return undefined;
  }

  /** Whether every directory above `file` lets the requester through (asked once per directory and request). */
  #searchable(who: Requester, file: string, memo: RequestMemo): boolean {
    const first = path.dirname(file);
    let answer = memo.searchable.get(first);
    if (answer === undefined) {
      answer = this.#walkSearchable(who, first);
      memo.searchable.set(first, answer);
    }
    return answer;
  }

  #walkSearchable(who: Requester, first: string): boolean {
    for (let dir = first; ; dir = path.dirname(dir)) {
      const info = this.#stat(dir);
      if (!info || !(who.readsAll || (bitsFor(who, info) & SEARCH) !== 0)) return false;
      if (dir === '/') return true;
    }
  }

  #deny(reason: string): Decision {
    return { verdict: 'deny', reason, source: this.name };
  }
}

function memoOf(context: RequestContext): RequestMemo {
  let memo = context.state.get(MEMO) as RequestMemo | undefined;
  if (!memo) {
    memo = { searchable: new Map() };
    context.state.set(MEMO, memo);
  }
  return memo;
}
