/**
 * Which runtime `run` and `doctor` pick, and the preload launcher on its own: its
 * Landlock floor, the one line it prints when it runs without Landlock (then the
 * library's checks are advisory), and its refusals to start.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultRuntime, type Check } from '../../src/cli/doctor.js';
import type { KernelProbe } from '../../src/native/index.js';
import { NoRuntime, chooseRuntime, locatePreloadLibrary, locateSandboxBinary, preloadArgs, type RuntimeProbes } from '../../src/sandbox/index.js';
import { PRELOAD_MARK, SHOW_RUNTIME, openNetworkPolicy } from './preload-helpers.js';
import { brokeredShell, describeRun, makeWorld, removeWorld, run, writeOld, type World } from './run-helpers.js';

const probes = (seccomp: boolean, preload: boolean): RuntimeProbes => ({
  seccomp: () => ({ ok: seccomp, message: seccomp ? 'ok' : 'seccomp user notification is not available: EINVAL' }),
  preload: () => {
    if (!preload) throw new Error('the brokered-preload.so library was not found');
    return '/pkg/build/Release/brokered-preload.so';
  },
});

describe('chooseRuntime', () => {
  it('seccomp by default where the kernel supports it', () => {
    expect(chooseRuntime(undefined, probes(true, true))).toEqual({ runtime: 'seccomp' });
  });

  it('falls back to preload, and says why', () => {
    expect(chooseRuntime(undefined, probes(false, true))).toEqual({
      runtime: 'preload',
      fallback: 'seccomp user notification is unavailable (seccomp user notification is not available: EINVAL); using the preload runtime',
    });
  });

  it('what is asked for, or a refusal', () => {
    expect(chooseRuntime('preload', probes(true, true))).toEqual({ runtime: 'preload' });
    expect(() => chooseRuntime('seccomp', probes(false, true))).toThrow(new NoRuntime('seccomp user notification is not available: EINVAL'));
    expect(() => chooseRuntime('preload', probes(true, false))).toThrow(NoRuntime);
    expect(() => chooseRuntime(undefined, probes(false, false))).toThrow(/preload runtime is unavailable too/);
  });
});

describe('doctor: the default runtime and why', () => {
  const kernel = (landlockAbi: number): KernelProbe => ({
    release: '6.1.0',
    machine: 'x86_64',
    landlockAbi,
    seccompUserNotif: false,
    seccompAddfdSend: false,
    seccompWaitKillableRecv: false,
    seccompSyncWakeUp: false,
    openat2: true,
    pidfdGetfd: true,
    fchmodat2: false,
    notes: [],
  });
  const missing: Check[] = [{ name: 'seccomp user notification', ok: false, detail: 'EINVAL', required: true }];

  it.each([
    ['seccomp', true, true, 7, 'seccomp', /^Landlock \+ seccomp user notification$/],
    ['preload over Landlock', false, true, 3, 'preload', /lacks seccomp user notification; .* over Landlock ABI 3$/],
    // The store (and the secrets) is kept from commands' reads, which nothing but Landlock can do.
    ['none without Landlock: nothing would keep the read policy', false, true, 0, 'none', /without Landlock nothing keeps the read policy's paths/],
    ['none when the library is not built', false, false, 7, 'none', /not built$/],
  ] as const)('%s', (_label, seccomp, built, abi, runtime, reason) => {
    const chosen = defaultRuntime(seccomp, seccomp ? [] : missing, built, kernel(abi));
    expect(chosen.runtime).toBe(runtime);
    expect(chosen.runtimeReason).toMatch(reason);
  });
});

describe('on this machine', () => {
  let world: World;
  beforeAll(async () => {
    world = await makeWorld('preload-runtime');
  });
  afterAll(() => removeWorld(world));

  it('doctor reports the preload library as built, and seccomp as the default', async () => {
    const result = await brokeredShell(world, ['doctor', '--json']);
    const report = JSON.parse(result.out) as { runtime: string; runtimeReason: string; checks: Check[] };
    expect(report.runtime).toBe('seccomp');
    expect(report.runtimeReason).toBe('Landlock + seccomp user notification');
    expect(report.checks.find((c) => c.name === 'preload library')).toEqual({
      name: 'preload library',
      ok: true,
      detail: locatePreloadLibrary(),
      required: false,
    });
  });

  it('run without --runtime uses seccomp here; --runtime preload the library', async () => {
    const seccomp = await run(world, SHOW_RUNTIME);
    expect(seccomp.status, describeRun(seccomp)).toBe(0);
    expect(seccomp.out).toBe('@@runtime  \n');
    const preload = await brokeredShell(world, ['run', '--runtime', 'preload', '--policy', openNetworkPolicy(world), '--', SHOW_RUNTIME]);
    expect(preload.out).toBe(`${PRELOAD_MARK}\n`);
    expect(preload.stderr).toBe('');
  });

  it('--runtime preload under the default network policy refuses to start (126): it governs no connection', async () => {
    const refused = await brokeredShell(world, ['run', '--runtime', 'preload', '--', 'echo ran']);
    expect(refused.status, describeRun(refused)).toBe(126);
    expect(refused.out).toBe('');
    expect(refused.stderr).toContain('the preload runtime cannot enforce network.mode "allowlist"');
  });

  it('an unknown runtime is a usage error', async () => {
    const result = await brokeredShell(world, ['run', '--runtime', 'ptrace', '--', 'true']);
    expect(result.status).toBe(2);
    expect(result.stderr).toMatch(/Allowed choices are seccomp, preload/);
  });
});

describe('the launcher in --mode preload', () => {
  let world: World;
  beforeAll(async () => {
    world = await makeWorld('preload-launcher');
    await writeOld(path.join(world.outside, 'f'), 'old\n');
  });
  afterAll(() => removeWorld(world));

  /** The launcher alone (no broker): only what Landlock does matters here. */
  function launch(args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
    return new Promise((resolve, reject) => {
      const child = spawn(locateSandboxBinary(), args, { cwd: world.ws, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      child.once('error', reject);
      child.once('close', (status) => resolve({ status, stdout, stderr }));
    });
  }
  const staticWrite = () => ['busybox', 'sh', '-c', `echo changed > ${path.join(world.outside, 'f')} && echo wrote`];

  it('with Landlock: the writable dirs only, even for a static program the library never sees', async () => {
    const args = preloadArgs({ argv: staticWrite(), writableDirs: [world.ws], library: locatePreloadLibrary() });
    const result = await launch(args);
    expect(result.status).not.toBe(0);
    expect(result.stderr).toMatch(/Permission denied/);
    expect(await fs.readFile(path.join(world.outside, 'f'), 'utf8')).toBe('old\n');
  });

  it('without Landlock: one line on stderr says the checks are advisory, and the static write goes through', async () => {
    const args = preloadArgs({ argv: staticWrite(), writableDirs: [world.ws], library: locatePreloadLibrary(), landlock: false });
    const result = await launch(args);
    expect(result.status).toBe(0);
    expect(result.stdout).toBe('wrote\n');
    const lines = result.stderr.trimEnd().split('\n');
    expect(lines).toEqual([
      'brokered-sandbox: Landlock is not available here (turned off with --no-landlock); the preload runtime runs without it, so its checks are advisory: a program the library does not reach can write wherever this user can',
    ]);
    expect(await fs.readFile(path.join(world.outside, 'f'), 'utf8')).toBe('changed\n');
  });

  it('a read policy without Landlock: 126, nothing ran, and it says why', async () => {
    await fs.writeFile(path.join(world.outside, 'secret'), 'secret\n');
    const args = preloadArgs({ argv: ['cat', path.join(world.outside, 'secret')], writableDirs: [world.ws], readDenied: [path.join(world.outside, 'secret')], library: locatePreloadLibrary(), landlock: false });
    const result = await launch(args);
    expect(result.status).toBe(126);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(/a read policy is in force \(1 paths\) and Landlock is not available \(turned off with --no-landlock\): nothing else keeps them unreadable, so nothing was run/);
  });

  it.each([
    ['no library', ['--mode', 'preload', '--', 'true'], /--preload \(missing\) must name the preload library/],
    ['a relative library', ['--mode', 'preload', '--preload', 'brokered-preload.so', '--', 'true'], /must name the preload library by an absolute path/],
    ['a missing writable dir', ['--mode', 'preload', '--preload', '@LIB', '--writable', '/nonexistent-dir', '--', 'true'], /--writable \/nonexistent-dir must be an existing directory/],
    ['no program', ['--mode', 'preload', '--preload', '@LIB'], /no PROGRAM given/],
  ])('refuses to start with %s: 126, nothing ran', async (_label, args, message) => {
    const result = await launch(args.map((arg) => (arg === '@LIB' ? locatePreloadLibrary() : arg)));
    expect(result.status).toBe(126);
    expect(result.stderr).toMatch(message);
  });

  it('a program that does not exist: 127', async () => {
    const result = await launch(preloadArgs({ argv: ['no-such-program-here'], writableDirs: [world.ws], library: locatePreloadLibrary() }));
    expect(result.status).toBe(127);
  });
});
