import { z } from 'zod';

/** Who is on the other end of a connected Unix socket, as the kernel recorded at connect time. */
export const peerCredentialsSchema = z.strictObject({
  pid: z.number().int(),
  uid: z.number().int().nonnegative(),
  gid: z.number().int().nonnegative(),
});
export type PeerCredentials = z.infer<typeof peerCredentialsSchema>;

/**
 * What the running kernel offers. Every field is the answer of a real call, never a
 * guess from `release`; `notes` says why each missing feature is missing (errno names).
 */
export const kernelProbeSchema = z.strictObject({
  release: z.string(),
  machine: z.string(),
  /** Landlock ABI version; 0 when Landlock is absent or disabled. */
  landlockAbi: z.number().int().nonnegative(),
  seccompUserNotif: z.boolean(),
  /** A notification answered with ADDFD + ADDFD_FLAG_SEND delivered the fd as the return value. */
  seccompAddfdSend: z.boolean(),
  /** A filter with WAIT_KILLABLE_RECV installed and completed a notification round trip. */
  seccompWaitKillableRecv: z.boolean(),
  /** A round trip completed with SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP set on the listener (the supervisor sets it where it can). */
  seccompSyncWakeUp: z.boolean(),
  openat2: z.boolean(),
  pidfdGetfd: z.boolean(),
  fchmodat2: z.boolean(),
  notes: z.array(z.string()),
});
export type KernelProbe = z.infer<typeof kernelProbeSchema>;

/** A point in time for utimesAt: whole seconds since the epoch plus nanoseconds in [0, 1e9). */
export interface TimeSpec {
  sec: number;
  nsec: number;
}

/**
 * One timestamp argument of utimesAt: a TimeSpec sets it, `null` sets it to the current
 * time (UTIME_NOW), `'omit'` leaves it unchanged (UTIME_OMIT).
 */
export type UtimeValue = TimeSpec | null | 'omit';

export interface UnlinkAtOptions {
  /** Remove an empty directory (AT_REMOVEDIR) instead of a non-directory. */
  directory?: boolean;
}

export interface RenameAtOptions {
  /** Fail with EEXIST instead of replacing an existing destination (RENAME_NOREPLACE). */
  noReplace?: boolean;
  /** Atomically swap source and destination; both must exist (RENAME_EXCHANGE). */
  exchange?: boolean;
}

/**
 * The error every native function throws on failure, shaped like Node's fs errors:
 * `code` is the errno name, `errno` the negative errno number (as in Node),
 * `syscall` the call that failed; `path`/`dest` are the paths involved, when any.
 * Name validation failures are `EINVAL` from the operation's own syscall name; a
 * directory argument that could not be opened (`ELOOP` for a symlink in it) fails
 * with `syscall: 'openat2'` and `path` set to that directory.
 */
export interface NativeErrnoError extends Error {
  code: string;
  errno: number;
  syscall: string;
  path?: string;
  dest?: string;
}

export function isNativeErrnoError(value: unknown): value is NativeErrnoError {
  return (
    value instanceof Error &&
    'code' in value &&
    typeof value.code === 'string' &&
    'errno' in value &&
    typeof value.errno === 'number' &&
    'syscall' in value &&
    typeof value.syscall === 'string'
  );
}

const NS_PER_SEC = 1_000_000_000n;

/** A TimeSpec from nanoseconds since the epoch, e.g. `fs.statSync(p, { bigint: true }).mtimeNs`. */
export function timeSpecFromNs(ns: bigint): TimeSpec {
  let sec = ns / NS_PER_SEC;
  let nsec = ns % NS_PER_SEC;
  if (nsec < 0n) {
    // BigInt division truncates toward zero; timespec wants nsec >= 0 before 1970 too.
    sec -= 1n;
    nsec += NS_PER_SEC;
  }
  return { sec: Number(sec), nsec: Number(nsec) };
}
