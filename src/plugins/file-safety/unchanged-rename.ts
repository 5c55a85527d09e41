import { randomBytes } from 'node:crypto';
import { closeSync, constants, fstatSync, openSync, readSync, type Stats } from 'node:fs';
import { open, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { BrokerError, ErrorCodes, type RequestContext, type ResolvedRequest, type ResolvedTarget } from '../../core/index.js';

/**
 * git rewrites `.git/config` through `config.lock` and a rename over it even when nothing
 * changes (`git branch -D` or `-m` of a branch with no settings), and the protection asked
 * a person about each such rename. One that leaves the protected file's bytes and mode as
 * they are changes nothing a person could judge: the protection lets it through (the
 * rules still apply). The source could still change between this look and the rename (a
 * writer holding it open), so before the answer the broker puts its own copy of what the
 * destination holds in the source's place (`putCopyInPlace`): what lands is the same
 * bytes, in a file nobody else has open.
 */

/** Larger files are asked about as before: config files are small, and this reads both. */
const MAX_BYTES = 256 * 1024;
const READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
const UNCHANGED = Symbol('unchanged-rename');

interface Unchanged {
  readonly from: string;
  readonly to: string;
  readonly bytes: Buffer;
  readonly mode: number;
  readonly dev: number;
  readonly ino: number;
}

/** A regular file's bytes and identity, or undefined when it is anything else or too large. */
function readRegular(file: string): { bytes: Buffer; stats: Stats } | undefined {
  let fd: number;
  try {
    fd = openSync(file, READ_FLAGS);
  } catch {
    return undefined;
  }
  try {
    const stats = fstatSync(fd);
    if (!stats.isFile() || stats.size > MAX_BYTES) return undefined;
    // One byte more than the size: a file that grew since the fstat reads as different.
    const bytes = Buffer.alloc(stats.size + 1);
    let filled = 0;
    for (let got = -1; got !== 0 && filled < bytes.length; filled += got) got = readSync(fd, bytes, filled, bytes.length - filled, filled);
    return filled === stats.size ? { bytes: bytes.subarray(0, filled), stats } : undefined;
  } finally {
    closeSync(fd);
  }
}

/**
 * Whether this target is the destination of a rename that would leave its file's bytes
 * and mode as they are. If so, remembers what to put in the source's place.
 */
export function renameLeavesUnchanged(target: ResolvedTarget, resolved: ResolvedRequest, context: RequestContext): boolean {
  if (resolved.request.operation !== 'rename' || target.role !== 'to' || target.kind !== 'file') return false;
  const source = resolved.targets.find((t) => t.role === 'from');
  if (source?.kind !== 'file' || source.resolved === target.resolved) return false;
  const now = readRegular(target.resolved);
  const moved = now && readRegular(source.resolved);
  if (!now || !moved || (now.stats.mode & 0o7777) !== (moved.stats.mode & 0o7777) || !now.bytes.equals(moved.bytes)) return false;
  const unchanged: Unchanged = { from: source.resolved, to: target.resolved, bytes: now.bytes, mode: now.stats.mode & 0o7777, dev: now.stats.dev, ino: now.stats.ino };
  context.state.set(UNCHANGED, unchanged);
  return true;
}

/**
 * Before an allowed rename the protection let through: the destination must still be the
 * file that was compared, with the same bytes, and a fresh copy of them (its mode, synced)
 * replaces the source. Anything else refuses the rename.
 */
export async function putCopyInPlace(context: RequestContext): Promise<void> {
  const unchanged = context.state.get(UNCHANGED) as Unchanged | undefined;
  if (!unchanged) return;
  const now = readRegular(unchanged.to);
  if (!now || now.stats.dev !== unchanged.dev || now.stats.ino !== unchanged.ino || !now.bytes.equals(unchanged.bytes)) {
    throw new BrokerError(ErrorCodes.POLICY_DENIED, `${unchanged.to} changed while its rename was checked; refused`);
  }
  const copy = path.join(path.dirname(unchanged.from), `.${path.basename(unchanged.from)}.bsh-${randomBytes(6).toString('hex')}`);
  const handle = await open(copy, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  try {
    try {
      await handle.writeFile(unchanged.bytes);
      await handle.chmod(unchanged.mode);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(copy, unchanged.from);
  } catch (error) {
    await rm(copy, { force: true });
    throw error;
  }
}
