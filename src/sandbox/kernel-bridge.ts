import { constants } from 'node:fs';
import path from 'node:path';
import {
  ErrorCodes,
  type Broker,
  type BrokerRequestInput,
  type Operation,
  type Outcome,
  type RequestOptions,
  type RequestTarget,
} from '../core/index.js';
import { auditRefusal, type RefusalReport } from '../plugins/audit.js';
import { openTargets, operationTargets } from '../requests/targets.js';
import { errnoName } from './errno.js';
import type { KernelAnswer, KernelOp, KernelRefusal, KernelRequest } from './protocol.js';

/** __O_TMPFILE, which Node does not export; the same value on x86_64 and aarch64. */
const O_TMPFILE_BIT = 0o20000000;
/** Flags that make an open modify something (the supervisor's BPF mask). */
const WRITE_OPEN = constants.O_WRONLY | constants.O_RDWR | constants.O_CREAT | constants.O_TRUNC | constants.O_APPEND | O_TMPFILE_BIT;

const EACCES = 13;
const AT_EMPTY_PATH = 0x1000;
/** What the kernel appends to the path of an fd whose file has no name any more. */
const DELETED = ' (deleted)';
const ERRNO: Record<string, number> = { ENOENT: 2, ENOTDIR: 20, ELOOP: 40, ENAMETOOLONG: 36, EISDIR: 21 };

/** How each notified syscall reads as a broker operation. */
const OPERATION: Record<KernelOp, Operation> = {
  open: 'open',
  truncate: 'truncate',
  unlink: 'delete',
  rmdir: 'delete',
  rename: 'rename',
  link: 'link',
  symlink: 'link',
  mkdir: 'mkdir',
  mknod: 'mknod',
  chmod: 'chmod',
  chown: 'chown',
  utimes: 'touch',
  setxattr: 'xattr',
  removexattr: 'xattr',
  fileSetattr: 'xattr',
};

export interface KernelBridgeOptions {
  toolCallId?: string;
  traceId?: string;
}

/** The broker request for one notified syscall. */
export function kernelToBrokerRequest(broker: Broker, request: KernelRequest, meta: KernelBridgeOptions = {}): BrokerRequestInput {
  const operation = OPERATION[request.op];
  let targets: RequestTarget[];
  const options: RequestOptions = { followSymlinks: request.follow };
  switch (request.op) {
    case 'open':
      targets = openTargets(request.path, (request.flags & WRITE_OPEN) !== 0);
      options.openFlags = request.flags;
      break;
    case 'symlink':
      // The new link is at `path`; its content is not a path anyone opens now.
      targets = operationTargets('link', { to: request.path, symbolic: true });
      options.symbolic = true;
      options.linkTarget = request.linkTarget ?? '';
      break;
    case 'link':
      if ((request.flags & AT_EMPTY_PATH) !== 0 && request.path.endsWith(DELETED)) {
        // Publishing an unnamed file (O_TMPFILE, or one already unlinked) by its fd: it has
        // no other name to protect, so what matters is that it was made where writes are
        // allowed (its old directory) and where the new name goes.
        targets = [
          { role: 'from', path: path.posix.dirname(request.path.slice(0, -DELETED.length)), access: 'write' },
          { role: 'to', path: request.to ?? '', access: 'write' },
        ];
        break;
      }
      targets = operationTargets(operation, { from: request.path, to: request.to ?? '' });
      break;
    case 'rename':
      targets = operationTargets(operation, { from: request.path, to: request.to ?? '' });
      break;
    default:
      targets = operationTargets(operation, { path: request.path });
  }
  // The supervisor moves the file an unlink removes or a rename replaces to where the broker says.
  if (request.op === 'unlink' || request.op === 'rename') options.movesAside = true;
  // The mode the call gives: mkdir, mknod and chmod always, an open only when it may create.
  const creates = request.op === 'open' && (request.flags & (constants.O_CREAT | O_TMPFILE_BIT)) !== 0;
  if (request.op === 'mkdir' || request.op === 'mknod' || request.op === 'chmod' || creates) options.mode = request.mode & 0o7777;
  return {
    origin: 'kernel',
    action: 'check',
    operation,
    targets,
    sessionId: broker.sessionId,
    options,
    ...(meta.toolCallId ? { toolCallId: meta.toolCallId } : {}),
    ...(meta.traceId ? { traceId: meta.traceId } : {}),
  };
}

/**
 * The errno a failed request returns when its path could not be resolved the way the
 * kernel itself would fail it (a missing directory, a loop, a name too long): then the
 * program gets the kernel's own answer, and it is no refusal. Undefined otherwise.
 */
export function pathProblemErrno(error: { code: string; errno?: string | undefined } | undefined): number | undefined {
  if (!error || (error.code !== ErrorCodes.PATH_NOT_FOUND && error.code !== ErrorCodes.PATH_UNRESOLVED)) return undefined;
  return error.errno === undefined ? undefined : ERRNO[error.errno];
}

/** The supervisor's answer: the resolved paths to act on, or the errno the syscall returns. */
export function outcomeToKernelAnswer(request: KernelRequest, outcome: Outcome): KernelAnswer {
  // A missing path reads as the kernel would say it; every refusal is EACCES.
  if (!outcome.ok) return { errno: pathProblemErrno(outcome.error) ?? EACCES };
  const byRole = new Map(outcome.targets.map((t) => [t.role, t.resolved]));
  if (request.op === 'symlink') {
    const at = byRole.get('to');
    return at ? { errno: 0, path: at } : { errno: EACCES };
  }
  const path = byRole.get('path') ?? byRole.get('from');
  if (!path) return { errno: EACCES };
  const aside = outcome.handover?.aside?.into;
  if (request.op === 'rename' || request.op === 'link') {
    const to = byRole.get('to');
    if (!to) return { errno: EACCES };
    return aside === undefined ? { errno: 0, path, to } : { errno: 0, path, to, aside };
  }
  return aside === undefined ? { errno: 0, path } : { errno: 0, path, aside };
}

/**
 * A request handler for `spawnSandboxed` that runs every syscall through the broker, and
 * keeps the broker's other changes (its socket clients' too) waiting until the
 * supervisor has carried out what it allowed.
 */
export function kernelBridge(broker: Broker, meta: KernelBridgeOptions = {}): (request: KernelRequest, over?: Promise<void>) => Promise<KernelAnswer> {
  return async (request, over) =>
    outcomeToKernelAnswer(request, await broker.handle(kernelToBrokerRequest(broker, request, meta), over ? { holdUntil: over } : {}));
}

/**
 * A refusal handler for `spawnSandboxed`: each syscall the supervisor refused without
 * asking (it had no policy question: io_uring, mount, a device node, a signal to a process
 * outside the sandbox, …) becomes an audit record of the broker's, attributed like the
 * command's requests. Not a broker request: nothing is decided, only recorded.
 */
export function kernelRefusalAudit(broker: Broker, meta: KernelBridgeOptions = {}): (refusal: KernelRefusal) => void {
  return (refusal) => {
    const report: RefusalReport = {
      origin: 'kernel',
      decidedBy: 'sandbox:supervisor',
      reason: refusal.reason,
      errno: errnoName(refusal.errno),
      syscall: { name: refusal.syscall, nr: refusal.nr, pid: refusal.tgid, tid: refusal.pid },
    };
    if (refusal.path !== undefined) report.path = refusal.path;
    if (meta.toolCallId) report.toolCallId = meta.toolCallId;
    if (meta.traceId) report.traceId = meta.traceId;
    auditRefusal(broker, report);
  };
}
