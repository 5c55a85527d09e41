/**
 * The supervisor asks the kernel for synchronous wake-ups on its listener (Linux 6.6+),
 * so a notified call hands its CPU to the supervisor rather than waking it on another
 * one. Seen from outside: strace on the supervisor alone (not its sandboxed child) shows
 * the SET_FLAGS ioctl succeed before the first notification, and the command's writes go
 * through as usual. `doctor`'s probe reports the same flag.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { diagnose } from '../../src/cli/doctor.js';
import { locateSandboxBinary } from '../../src/sandbox/locate.js';
import { spawnSandboxed } from '../../src/sandbox/spawn.js';
import { createFakeBroker, removeDir, tempDir } from '../fixtures/sandbox/harness.js';

/** _IOW('!', 4, __u64): SECCOMP_IOCTL_NOTIF_SET_FLAGS, which strace may print undecoded. */
const SET_FLAGS = /ioctl\(\d+, (SECCOMP_IOCTL_NOTIF_SET_FLAGS|_IOC\(_IOC_WRITE, 0x21, 0x4, 0x8\)), (SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP|0x1)\) = 0/;
const RECV = /SECCOMP_IOCTL_NOTIF_RECV|_IOC\(_IOC_READ\|_IOC_WRITE, 0x21, 0/;

let base: string;
beforeEach(() => {
  base = tempDir('wake');
});
afterEach(() => removeDir(base));

describe('synchronous wake-up', () => {
  it('the supervisor sets it on its listener before serving the first notification, and the command runs as usual', async () => {
    const ws = path.join(base, 'ws');
    const scratch = path.join(base, 'tmp');
    fs.mkdirSync(ws);
    fs.mkdirSync(scratch);
    const trace = path.join(base, 'trace');
    // strace without -f follows the launcher (the supervisor) only; fd 3 passes through to it.
    const wrapper = path.join(base, 'traced-sandbox');
    fs.writeFileSync(wrapper, `#!/bin/sh\nexec strace -qq -o ${JSON.stringify(trace)} -e trace=ioctl ${JSON.stringify(locateSandboxBinary())} "$@"\n`, { mode: 0o755 });
    const broker = createFakeBroker(ws);
    const proc = spawnSandboxed({
      argv: ['bash', '-c', 'echo written > out.txt'],
      cwd: ws,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C.UTF-8' },
      scratchDirs: [scratch],
      onRequest: broker.onRequest,
      stdio: ['ignore', 'ignore', 'pipe'],
      binaryPath: wrapper,
    });
    let stderr = '';
    proc.child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    expect(await proc.exit, stderr).toEqual({ code: 0, signal: null });
    expect(fs.readFileSync(path.join(ws, 'out.txt'), 'utf8')).toBe('written\n');
    const lines = fs.readFileSync(trace, 'utf8').split('\n');
    const set = lines.findIndex((line) => SET_FLAGS.test(line));
    const firstRecv = lines.findIndex((line) => RECV.test(line));
    expect(set, lines.join('\n')).toBeGreaterThanOrEqual(0);
    expect(firstRecv).toBeGreaterThan(set);
    expect(broker.requests.map((r) => r.op)).toContain('open');
  });

  it('doctor reports whether the kernel has it, as a check the runtime does not require', async () => {
    const report = await diagnose();
    const check = report.checks.find((c) => c.name === 'seccomp synchronous wake-up');
    expect(check).toMatchObject({ ok: true, required: false });
    expect(report.kernel?.seccompSyncWakeUp).toBe(true);
  });
});
