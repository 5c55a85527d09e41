/**
 * The sandbox around the command: it cannot signal or trace its supervisor, use
 * io_uring, mount or make namespaces; the launcher refuses to start what it cannot
 * protect (126), kills the command when the broker goes away (125), and leaves no
 * process behind.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ErrorCodes } from '../../src/core/errors.js';
import { checkSandboxSupport, describeSeccompFilter } from '../../src/sandbox/info.js';
import { locateSandboxBinary } from '../../src/sandbox/locate.js';
import {
  buildFixture,
  createFakeBroker,
  removeDir,
  runBash,
  runSandboxed,
  tempDir,
  type FakeBroker,
} from '../fixtures/sandbox/harness.js';

let bin: string;
let ws: string;
let scratch: string;
let broker: FakeBroker;

beforeAll(() => {
  bin = tempDir('bin');
  buildFixture('probe', bin);
});
afterAll(() => removeDir(bin));

beforeEach(() => {
  ws = tempDir('ws');
  scratch = tempDir('scratch');
  broker = createFakeBroker(ws);
});
afterEach(() => {
  removeDir(ws);
  removeDir(scratch);
});

const bash = (script: string, env: NodeJS.ProcessEnv = {}) =>
  runBash(script, { cwd: ws, broker, scratch: [scratch], env: { PROBE: path.join(bin, 'probe'), ...env } });

describe('the command cannot reach its supervisor', () => {
  it('kill -9 of the supervisor fails (Landlock signal scoping); the run completes', async () => {
    // bash's parent is the supervisor (the launcher forked bash and stayed); SUP_PID carries it.
    let supervisor = -1;
    const result = await runSandboxed(
      ['bash', '-c', 'SUP_PID=$PPID; echo "$SUP_PID"; kill -9 $SUP_PID; echo "kill=$?"; kill -0 $SUP_PID; echo "probe=$?"'],
      { cwd: ws, broker, scratch: [scratch], onStart: (proc) => (supervisor = proc.child.pid ?? -1) },
    );
    expect(result.code).toBe(0);
    expect(result.stdout).toBe(`${supervisor}\nkill=1\nprobe=1\n`);
    expect(result.stderr).toMatch(/Operation not permitted/);
  });

  it('kill -9 0 (its whole process group, which holds the supervisor) kills only the command', async () => {
    const result = await bash('kill -9 0; echo survived');
    expect(result.code).toBe(128 + 9);
    expect(result.stdout).toBe('');
  });

  it('PTRACE_ATTACH to the supervisor fails', async () => {
    const result = await runSandboxed(['bash', '-c', `"${path.join(bin, 'probe')}" ptrace $PPID`], {
      cwd: ws,
      broker,
      scratch: [scratch],
    });
    expect(result.stdout).toBe('EPERM\n');
    expect(result.code).toBe(0);
  });
});

describe('refused syscalls', () => {
  it.each([
    ['io_uring', 'EPERM'],
    ['unshare', 'EPERM'],
    ['clone-newns', 'EPERM'],
    ['clone3', 'ENOSYS'],
  ])('%s → %s', async (what, errno) => {
    const result = await bash(`"$PROBE" ${what}`);
    expect(result.stdout).toBe(`${errno}\n`);
    expect(result.code).toBe(0);
  });

  it('TIOCSTI (typing into the controlling terminal) is refused, though it works outside', async () => {
    const probe = path.join(bin, 'probe');
    expect(spawnSync(probe, ['tiocsti'], { encoding: 'utf8' }).stdout).toBe('ok\n');
    // /dev/ptmx as a writable device so the probe can make its own pty inside the sandbox.
    const result = await runSandboxed([probe, 'tiocsti'], { cwd: ws, broker, scratch: [scratch], writeDevs: ['/dev/ptmx'] });
    expect(result.stdout).toBe('EPERM\n');
  });

  it('mount -t tmpfs fails and mounts nothing', async () => {
    fs.mkdirSync(path.join(ws, 'mnt'));
    const result = await bash('mount -t tmpfs none mnt');
    expect(result.code).not.toBe(0);
    const mounts = fs.readFileSync('/proc/self/mountinfo', 'utf8');
    expect(mounts).not.toContain(path.join(ws, 'mnt'));
  });

  it('threads, fork and exec still work (glibc falls back from clone3)', async () => {
    const thread = "import threading; t = threading.Thread(target=print, args=('thread',)); t.start(); t.join()";
    const result = await bash(`python3 -c "${thread}"; (echo sub) | cat`);
    expect(result.stdout).toBe('thread\nsub\n');
  });
});

describe('the launcher refuses to run what it cannot protect (126)', () => {
  it('a --scratch directory that does not exist', async () => {
    const missing = path.join(scratch, 'missing');
    const result = await runSandboxed(['bash', '-c', `echo ran > "${path.join(ws, 'ran')}"`], {
      cwd: ws,
      broker,
      scratch: [missing],
    });
    expect(result.code).toBe(126);
    expect(result.stderr).toMatch(/^brokered-sandbox: .*missing.* not an existing directory/m);
    expect(fs.existsSync(path.join(ws, 'ran'))).toBe(false);
    expect(broker.requests).toEqual([]);
  });

  it.each(['/etc', '/dev', '/dev/../etc'])('a --write-dev that is not a device below /dev (%s)', async (dev) => {
    const result = await runSandboxed(['true'], { cwd: ws, broker, scratch: [scratch], writeDevs: [dev] });
    expect(result.code).toBe(126);
    expect(result.stderr).toMatch(/^brokered-sandbox: --write-dev .* must be a character device/m);
  });

  it('the kernel probe passes here and says so', () => {
    expect(checkSandboxSupport()).toEqual({ ok: true, message: 'ok' });
  });

  it('names what it tried when the launcher is not built', () => {
    const tried = path.join(scratch, 'build/Release/brokered-sandbox');
    expect(() => locateSandboxBinary(scratch)).toThrow(
      expect.objectContaining({
        code: ErrorCodes.NATIVE_UNAVAILABLE,
        message: expect.stringContaining(tried) as string,
      }),
    );
  });
});

describe('writable devices', () => {
  it('a device is writable without a request only when given as --write-dev', async () => {
    const script = 'echo x > /dev/urandom && echo ok';
    const refused = await runSandboxed(['bash', '-c', script], { cwd: ws, broker, scratch: [scratch] });
    expect(refused.code).not.toBe(0);
    expect(broker.requests.map((r) => r.path)).toEqual(['/dev/urandom']);
    broker.requests.length = 0;
    const allowed = await runSandboxed(['bash', '-c', script], {
      cwd: ws,
      broker,
      scratch: [scratch],
      writeDevs: ['/dev/urandom'],
    });
    expect(allowed.stdout).toBe('ok\n');
    expect(broker.requests).toEqual([]);
  });
});

describe('end of a run', () => {
  it('losing the broker mid-command kills the command: exit 125, nothing more changes', async () => {
    let current: { channel: { close(): void } } | undefined;
    broker.intercept = async (request) => {
      if (!request.path.endsWith('/trigger')) return undefined;
      current?.channel.close();
      return new Promise(() => undefined); // never answers
    };
    const result = await runSandboxed(
      ['bash', '-c', 'echo 1 > a; echo 2 > trigger; echo 3 > c; echo after >> a'],
      { cwd: ws, broker, scratch: [scratch], onStart: (proc) => (current = proc) },
    );
    expect(result.code).toBe(125);
    expect(result.stderr).toMatch(/brokered-sandbox: broker channel lost/);
    expect(fs.readFileSync(path.join(ws, 'a'), 'utf8')).toBe('1\n');
    expect(fs.existsSync(path.join(ws, 'trigger'))).toBe(false);
    expect(fs.existsSync(path.join(ws, 'c'))).toBe(false);
  });

  it('background processes left by the command are killed', async () => {
    // One plain background job, one in a new session that reports its own pid once it runs.
    const result = await bash(
      [
        'sleep 1000 & echo $!',
        `setsid sh -c 'echo $$; exec sleep 1000' > "$TMPDIR/pid" &`,
        'until [ -s "$TMPDIR/pid" ]; do sleep 0.01; done; cat "$TMPDIR/pid"',
      ].join('\n'),
    );
    expect(result.code).toBe(0);
    const pids = result.stdout.trim().split('\n').map(Number);
    expect(pids).toHaveLength(2);
    for (const pid of pids) {
      const alive = fs.existsSync(`/proc/${pid}`) && fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').startsWith('sleep');
      expect(alive).toBe(false);
    }
  });

  it('the exit status is the command’s, 128+N for a signal', async () => {
    expect((await bash('exit 7')).code).toBe(7);
    expect((await bash('kill -TERM $$')).code).toBe(128 + 15);
  });
});

describe('the seccomp tables', () => {
  it('name what is notified, refused and filtered by flags', () => {
    const tables = describeSeccompFilter();
    const names = (list: { name: string }[]) => list.map((entry) => entry.name);
    expect(names(tables.notifyIfWriting)).toContain('openat');
    expect(names(tables.notify)).toEqual(
      expect.arrayContaining(['openat2', 'renameat2', 'unlinkat', 'fchmodat2', 'setxattrat', 'fchown']),
    );
    expect(names(tables.deny)).toEqual(
      expect.arrayContaining(['io_uring_setup', 'open_by_handle_at', 'ptrace', 'mount', 'bpf']),
    );
    expect(names(tables.enosys)).toEqual(['clone3']);
    expect(names(tables.denyIoctl)).toEqual(['TIOCSTI', 'TIOCLINUX']);
    // ioctls: an allow-list of file-system requests that change nothing, the types that never reach a file system.
    expect(names(tables.allowFileIoctl)).toEqual(expect.arrayContaining(['FS_IOC_GETFLAGS', 'FS_IOC_GETVERSION', 'FS_IOC_FIEMAP', 'FS_IOC_FSGETXATTR', 'FIGETBSZ', 'FICLONE']));
    expect(names(tables.allowFileIoctl)).not.toEqual(expect.arrayContaining(['FS_IOC_SETFLAGS']));
    expect(names(tables.allowFileIoctl).filter((name) => /SET|DEDUPE|ENABLE/.test(name))).toEqual([]);
    expect(tables.passIoctlTypes.map((entry) => entry.type)).toEqual([0x54, 0x89]);
    expect(names(tables.notifyIfOtherProcess)).toEqual(expect.arrayContaining(['kill', 'pidfd_send_signal']));
    if (tables.arch === 'x86_64') expect(names(tables.notify)).toEqual(expect.arrayContaining(['rename', 'creat', 'utime']));
  });
});
