import { spawnSync } from 'node:child_process';
import { z } from 'zod';
import { locateSandboxBinary } from './locate.js';

export interface SandboxSupport {
  ok: boolean;
  /** "ok", or the launcher's reason for refusing (e.g. which Landlock feature is missing). */
  message: string;
}

/** Asks the launcher to probe this kernel (`--check`); never runs a command. */
export function checkSandboxSupport(binary: string = locateSandboxBinary()): SandboxSupport {
  const result = spawnSync(binary, ['--check'], { encoding: 'utf8' });
  if (result.error) return { ok: false, message: result.error.message };
  const message = (result.status === 0 ? result.stdout : result.stderr).trim();
  return { ok: result.status === 0, message };
}

const syscallSchema = z.strictObject({ name: z.string(), nr: z.number().int() });
export const filterTablesSchema = z.strictObject({
  arch: z.enum(['x86_64', 'aarch64']),
  instructions: z.number().int().positive(),
  openWriteMask: z.number().int(),
  cloneDenyMask: z.number().int(),
  notify: z.array(syscallSchema),
  notifyIfWriting: z.array(syscallSchema),
  /** Changes through an fd (ftruncate, fallocate, shared writable mmap): continued on a writable fd, refused and reported on a read-only one. */
  notifyFdWrite: z.array(syscallSchema.extend({ when: z.string() })),
  /** Signals and scheduling calls, notified only when aimed at another process (`when`). */
  notifyIfOtherProcess: z.array(syscallSchema.extend({ when: z.string() })),
  /** Network calls notified only in some forms (`when`): sendto with an address, unusual sockets, source routes. */
  notifyNet: z.array(syscallSchema.extend({ when: z.string() })),
  deny: z.array(syscallSchema),
  denyIfNamespace: z.array(syscallSchema),
  /** ioctl requests refused whatever the fd (tty input injection). */
  denyIoctl: z.array(z.strictObject({ name: z.string(), cmd: z.number().int() })),
  /** ioctl request types that never reach a file system (terminals, sockets): allowed in BPF. */
  passIoctlTypes: z.array(z.strictObject({ name: z.string(), type: z.number().int() })),
  /**
   * File-system ioctl requests known to change nothing (or to write only through a
   * writable fd), allowed in BPF. Every other ioctl is refused on a file or directory.
   */
  allowFileIoctl: z.array(z.strictObject({ name: z.string(), cmd: z.number().int() })),
  enosys: z.array(syscallSchema),
});
export type FilterTables = z.infer<typeof filterTablesSchema>;

/** The seccomp filter's syscall tables, as compiled into the launcher (`--print-filter`). */
export function describeSeccompFilter(binary: string = locateSandboxBinary()): FilterTables {
  const result = spawnSync(binary, ['--print-filter'], { encoding: 'utf8' });
  if (result.error) throw result.error;
  if (result.status !== 0) throw new Error(`${binary} --print-filter exited ${String(result.status)}`);
  return filterTablesSchema.parse(JSON.parse(result.stdout));
}
