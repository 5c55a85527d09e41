/**
 * The runtime choice: `auto` is seccomp on these machines; `preload` runs the command
 * with the brokered-preload library, through the same session: policy, backups,
 * approvals with a rerun under the grant, and a timeout that kills the tree.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { selectRuntime } from '../../src/agent/runtime.js';
import { SandboxUnavailableError } from '../../src/agent/errors.js';
import { makeWorld, openSession, read, recordingApprover } from './helpers.js';

describe('runtime', () => {
  it('auto is seccomp where the kernel supports it', async () => {
    const world = await makeWorld('auto');
    const { session } = await openSession(world);
    expect(session.runtime).toBe('seccomp');
    expect(session.runtimeNotice).toBeUndefined();
    expect((await session.execute('echo hi')).runtime).toBe('seccomp');
  });

  it('preload under a network policy it cannot enforce does not start: SandboxUnavailableError naming the setting', async () => {
    const world = await makeWorld('preload-network');
    await expect(openSession(world, { config: { sandbox: { runtime: 'preload' } } })).rejects.toThrow(/the preload runtime cannot enforce network.mode "allowlist".*"open"/);
    await expect(openSession(world, { config: { sandbox: { runtime: 'preload' }, network: { mode: 'off' } } })).rejects.toThrow(/cannot enforce network.mode "off"/);
  });

  it('a runtime that cannot run is a SandboxUnavailableError naming why', () => {
    const probes = {
      seccomp: () => ({ ok: false, message: 'no user notification here' }),
      preload: () => {
        throw new Error('library not built');
      },
    };
    expect(() => selectRuntime('seccomp', probes)).toThrow(SandboxUnavailableError);
    expect(() => selectRuntime('preload', probes)).toThrow(/library not built/);
    expect(() => selectRuntime('auto', probes)).toThrow(/no user notification here; and the preload runtime is unavailable too: library not built/);
    expect(selectRuntime('auto', { ...probes, preload: () => '/lib.so' })).toMatchObject({ runtime: 'preload', fallback: expect.stringContaining('no user notification here') });
  });

  it('preload: the policy holds, changes are backed up, a prompt is asked while the write waits', async () => {
    const world = await makeWorld('preload');
    const f = path.join(world.ws, 'f.txt');
    const ask = path.join(world.ws, 'ask.txt');
    await fs.writeFile(f, 'before\n');
    await fs.writeFile(ask, 'ask before\n');
    const approver = recordingApprover(true);
    const { session } = await openSession(world, {
      config: { sandbox: { runtime: 'preload' }, network: { mode: 'open' }, fileSafety: { rules: [{ pattern: 'ask.txt', decision: 'prompt' }] } },
      approver,
    });
    expect(session.runtime).toBe('preload');
    await session.beginTurn({ userMessage: 'preload' });
    const result = await session.execute('echo after > f.txt; echo x > "$OUT/o"; echo "outside $?"; echo y > ask.txt; echo "ask $?"', { toolCallId: 'pre-1' });
    expect(result).toMatchObject({ exitCode: 0, runtime: 'preload', sandboxed: true, approval: { asked: true, approved: true, rerun: false }, promptBlocks: [] });
    expect(result.stdout).toBe('outside 1\nask 0\n');
    expect(await read(f)).toBe('after\n');
    expect(await read(ask)).toBe('y\n');
    expect(result.backups.map((b) => b.path).sort()).toEqual([ask, f]);
    await expect(fs.stat(path.join(world.outside, 'o'))).rejects.toThrow(/ENOENT/);
    expect(approver.requests).toHaveLength(1);
  });

  it('preload: a timeout kills the tree', async () => {
    const world = await makeWorld('preload-timeout');
    const { session } = await openSession(world, { config: { sandbox: { runtime: 'preload' }, network: { mode: 'open' } } });
    const result = await session.execute('sleep 605 & echo "bg $!"; sleep 606', { timeoutMs: 500 });
    expect(result).toMatchObject({ timedOut: true, signal: 'SIGKILL', exitCode: 128 + 9 });
    const pid = Number(/^bg (\d+)$/m.exec(result.stdout)?.[1]);
    expect(pid).toBeGreaterThan(0);
    const cmdline = await fs.readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    const status = await fs.readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
    expect(cmdline === 'sleep\u0000605\u0000' && !/^State:\s+Z/m.test(status)).toBe(false);
  });
});
