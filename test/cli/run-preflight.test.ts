import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { REPO_ROOT, tempDir } from './helpers.js';

// `run` checks what the command would otherwise fail on halfway before it starts anything:
// the launcher, the addon, the store and the configuration. Each failure is one line on
// stderr, exit 126, and the workspace file is left as it was. A copy of the package (dist/,
// bin/, package.json; findPackageRoot walks up from dist/native/ to it) has a build/ each
// test fills as it needs.

const RELEASE = ['build', 'Release'];
const ORIGINAL = 'original bytes\n';

let pkg: string;
let ws: string;
let home: string;
const built = (file: string) => path.join(REPO_ROOT, ...RELEASE, file);
const release = () => path.join(pkg, ...RELEASE);

beforeAll(async () => {
  // Not tempDir(): that one is removed after each test, this copy is shared by them all.
  pkg = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'bsh-preflight-pkg-')));
  for (const part of ['bin', 'package.json']) await fs.cp(path.join(REPO_ROOT, part), path.join(pkg, part), { recursive: true });
  await fs.cp(path.join(REPO_ROOT, 'dist'), path.join(pkg, 'dist'), { recursive: true, filter: (source) => !source.endsWith('.map') && !source.endsWith('.cache') });
  await fs.symlink(path.join(REPO_ROOT, 'node_modules'), path.join(pkg, 'node_modules'));
});
afterAll(async () => {
  await fs.rm(pkg, { recursive: true, force: true });
});

beforeEach(async () => {
  await fs.rm(path.join(pkg, 'build'), { recursive: true, force: true });
  await fs.mkdir(release(), { recursive: true });
  ws = await tempDir('bsh-preflight-ws-');
  home = path.join(await tempDir('bsh-preflight-home-'), 'store');
  await fs.writeFile(path.join(ws, 'file.txt'), ORIGINAL);
});

/** The launcher and preload library of the real build, so only what a test leaves out is missing. */
async function copyBuild(...files: string[]): Promise<void> {
  for (const file of files) await fs.copyFile(built(file), path.join(release(), file));
}

function runIn(options: { bin?: string; home?: string; env?: NodeJS.ProcessEnv } = {}) {
  const env = { ...process.env, BROKERED_SHELL_HOME: options.home ?? home, BROKERED_SHELL_LOG_LEVEL: 'warn', ...options.env };
  const bin = options.bin ?? path.join(pkg, 'bin', 'brokered-shell.js');
  const result = spawnSync(process.execPath, [bin, 'run', '--workspace', ws, '--', 'echo changed > file.txt; touch ran'], { cwd: ws, env, encoding: 'utf8', timeout: 30_000 });
  return { status: result.status, stderr: result.stderr };
}

async function expectNothingRan(result: { status: number | null; stderr: string }, line: RegExp): Promise<void> {
  expect(result.status, result.stderr).toBe(126);
  expect(result.stderr.split('\n').filter(Boolean)).toHaveLength(1);
  expect(result.stderr).toMatch(line);
  expect(await fs.readFile(path.join(ws, 'file.txt'), 'utf8')).toBe(ORIGINAL);
  await expect(fs.stat(path.join(ws, 'ran'))).rejects.toThrow(/ENOENT/);
}

describe('run: a missing or stale native part → 126 before the command starts', () => {
  it('no build at all: the launcher is named with every path tried', async () => {
    await expectNothingRan(runIn(), /^brokered-shell run: the sandbox cannot start, nothing was run: the brokered-sandbox launcher was not found \(tried .*build\/Release\/brokered-sandbox: not found; .*build\/Debug\/brokered-sandbox: not found; .*prebuilds\/linux-x64\/brokered-sandbox: not found\); rebuild it: /);
  });

  it('the launcher but no addon: refused at start, not at the first backup', async () => {
    await copyBuild('brokered-sandbox', 'brokered-preload.so');
    await expectNothingRan(runIn(), /^brokered-shell run: the sandbox cannot start, nothing was run: the brokered-shell native addon could not be loaded \(tried .*brokered_shell_native\.node: not found; .*\); rebuild it: .*\[BSH_NATIVE_UNAVAILABLE\]$/m);
  });

  it("an addon of another build (a Node-API module without this version's functions)", async () => {
    await copyBuild('brokered-sandbox', 'brokered-preload.so');
    // Any other Node-API addon loads and lacks every function ours has: what a stale build looks like.
    const other = createRequire(import.meta.url).resolve('lightningcss-linux-x64-gnu/lightningcss.linux-x64-gnu.node');
    await fs.symlink(other, path.join(release(), 'brokered_shell_native.node'));
    await expectNothingRan(runIn(), /the brokered-shell native addon could not be loaded \(tried .*brokered_shell_native\.node: stale build, missing functions: /);
  });

  it('a launcher that does not answer --check as its contract says', async () => {
    await copyBuild('brokered_shell_native.node', 'brokered-preload.so');
    const launcher = path.join(release(), 'brokered-sandbox');
    // What a launcher built before --check existed says to it.
    await fs.writeFile(launcher, '#!/bin/sh\necho "usage: brokered-sandbox --broker-fd N -- PROGRAM" >&2\necho "brokered-sandbox: unknown or incomplete option $1" >&2\nexit 126\n', { mode: 0o755 });
    await expectNothingRan(runIn(), /^brokered-shell run: the sandbox cannot start, nothing was run: the launcher .*brokered-sandbox does not answer --check as this version's does \(exit 126: usage: .*\): a stale build/);
    await fs.writeFile(launcher, '#!/bin/sh\nkill -SEGV $$\n', { mode: 0o755 });
    await expectNothingRan(runIn(), /does not answer --check as this version's does \(killed by SIGSEGV\)/);
  });
});

describe('run: an unusable store → 126 before the command starts', () => {
  const cli = path.join(REPO_ROOT, 'bin', 'brokered-shell.js');

  it('under /proc (mkdir there never returns), directly or through a link', async () => {
    await expectNothingRan(runIn({ bin: cli, home: '/proc/no-such-dir/store' }), /^brokered-shell run: the backup store cannot be used, nothing was run: \/proc\/no-such-dir\/store cannot hold the backup store: it is under \/proc \[BSH_STORE_UNAVAILABLE\]$/m);
    const link = path.join(path.dirname(home), 'proc-link');
    await fs.symlink('/proc/self', link);
    await expectNothingRan(runIn({ bin: cli, home: path.join(link, 'store') }), /cannot hold the backup store: .*proc-link is on procfs/);
  });

  it('not creatable: below a regular file', async () => {
    const file = path.join(path.dirname(home), 'a-file');
    await fs.writeFile(file, '');
    await expectNothingRan(runIn({ bin: cli, home: path.join(file, 'store') }), /a-file\/store cannot hold the backup store: .*ENOTDIR/);
  });

  it('not writable, even for root: a read-only mount, as the home and as its parent', async () => {
    const mount = path.join(path.dirname(home), 'read-only');
    await fs.mkdir(mount);
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'ro,size=1m', 'tmpfs', mount]);
    try {
      await expectNothingRan(runIn({ bin: cli, home: mount }), /read-only cannot hold the backup store: it is not writable: EROFS/);
      await expectNothingRan(runIn({ bin: cli, home: path.join(mount, 'store') }), /cannot hold the backup store: cannot create .*read-only\/store: EROFS/);
    } finally {
      execFileSync('umount', [mount]);
    }
  });

  it('a store that can be made is made, and the command runs', async () => {
    const result = runIn({ bin: cli });
    expect(result.status, result.stderr).toBe(0);
    expect(await fs.readFile(path.join(ws, 'file.txt'), 'utf8')).toBe('changed\n');
    expect((await fs.stat(home)).mode & 0o777).toBe(0o700);
    expect((await fs.readdir(home)).filter((name) => name.startsWith('.write-probe'))).toEqual([]);
  });
});

describe('run: an invalid configuration → 126 before the command starts', () => {
  it('names the file and the key', async () => {
    await fs.mkdir(home, { recursive: true });
    await fs.writeFile(path.join(home, 'config.json'), JSON.stringify({ sandbox: { enabled: 'yes' } }));
    const result = runIn({ bin: path.join(REPO_ROOT, 'bin', 'brokered-shell.js') });
    expect(result.status, result.stderr).toBe(126);
    expect(result.stderr.split('\n')[0]).toBe('brokered-shell run: the configuration is invalid, nothing was run: invalid brokered-shell configuration:');
    expect(result.stderr).toContain(`${path.join(home, 'config.json')}:\n    - sandbox.enabled:`);
    expect(await fs.readFile(path.join(ws, 'file.txt'), 'utf8')).toBe(ORIGINAL);
  });
});

describe('doctor and --version', () => {
  it('doctor without a build: one line per check, no escaped line break, exit 1', () => {
    const result = spawnSync(process.execPath, [path.join(pkg, 'bin', 'brokered-shell.js'), 'doctor'], { env: { ...process.env, BROKERED_SHELL_HOME: home }, encoding: 'utf8' });
    expect(result.status, result.stderr).toBe(1);
    expect(result.stdout).not.toContain('\\n');
    const addon = result.stdout.split('\n').find((line) => line.includes('native addon'));
    expect(addon).toMatch(/^MISSING\s+native addon\s+the brokered-shell native addon could not be loaded \(tried .*build\/Release\/brokered_shell_native\.node: not found; .*\); rebuild it: /);
    expect(result.stdout).toMatch(/^warn\s+preload library\s+the brokered-preload\.so library was not found \(tried /m);
    expect(result.stdout).toMatch(/^MISSING\s+sandbox launcher\s+the brokered-sandbox launcher was not found \(tried /m);
    expect(result.stdout.trimEnd().split('\n').at(-1)).toBe('runtime: none — `run` will refuse to start');
  });

  it('doctor with a launcher that does not answer as its contract says: MISSING, runtime none', async () => {
    await copyBuild('brokered_shell_native.node', 'brokered-preload.so');
    await fs.writeFile(path.join(release(), 'brokered-sandbox'), '#!/bin/sh\nexit 3\n', { mode: 0o755 });
    const result = spawnSync(process.execPath, [path.join(pkg, 'bin', 'brokered-shell.js'), 'doctor'], { env: { ...process.env, BROKERED_SHELL_HOME: home }, encoding: 'utf8' });
    expect(result.status, result.stderr).toBe(1);
    expect(result.stdout).toMatch(/^MISSING\s+sandbox launcher\s+the launcher .*brokered-sandbox does not answer --check as this version's does \(exit 3\)/m);
    expect(result.stdout).toMatch(/^runtime: none — `run` will refuse to start$/m);
  });

  it('--version and -V print the version in package.json', () => {
    const { version } = JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string };
    for (const flag of ['--version', '-V']) {
      const result = spawnSync(process.execPath, [path.join(REPO_ROOT, 'bin', 'brokered-shell.js'), flag], { encoding: 'utf8' });
      expect(result).toMatchObject({ status: 0, stdout: `${version}\n`, stderr: '' });
    }
  });
});
