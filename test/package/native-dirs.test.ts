import { spawnSync } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ErrorCodes } from '../../src/core/errors.js';
import { loadNative, nativeDirs } from '../../src/native/loader.js';
import { locatePreloadLibrary } from '../../src/sandbox/preload.js';
import { locateRequestClient, locateSandboxBinary } from '../../src/sandbox/locate.js';
import { REPO_ROOT } from '../helpers/serve-process.js';
// @ts-expect-error -- plain JavaScript for the install scripts, no declarations
import * as scripts from '../../toolchain/native-dirs.mjs';

const toolchain = scripts as { NATIVE_FILES: string[]; nativeDirs: (platform?: string, arch?: string) => string[] };
const PREBUILD = `prebuilds/${process.platform}-${process.arch}`;

let root: string;

/** The real build's parts copied into `dir` under the temp package root. */
async function fill(dir: string, files: readonly string[] = toolchain.NATIVE_FILES): Promise<void> {
  await fs.mkdir(path.join(root, dir), { recursive: true });
  for (const file of files) await fs.copyFile(path.join(REPO_ROOT, 'build', 'Release', file), path.join(root, dir, file));
}

beforeEach(async () => {
  root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'bsh-native-dirs-')));
  await fs.writeFile(path.join(root, 'package.json'), JSON.stringify({ name: 'brokered-shell' }));
});
afterEach(() => fs.rm(root, { recursive: true, force: true }));

describe('where the native parts are looked for', () => {
  it('the loader and the install scripts look in the same folders, in the same order', () => {
    expect(toolchain.nativeDirs()).toEqual(nativeDirs());
    expect(toolchain.nativeDirs('linux', 'arm64')).toEqual(nativeDirs('linux', 'arm64'));
    expect(nativeDirs()).toEqual(['build/Release', 'build/Debug', PREBUILD]);
  });

  it('without a build, every part comes from the prebuild', async () => {
    await fill(PREBUILD);
    expect(typeof loadNative(root).probeKernel).toBe('function');
    expect(locateSandboxBinary(root)).toBe(path.join(root, PREBUILD, 'brokered-sandbox'));
    expect(locatePreloadLibrary(root)).toBe(path.join(root, PREBUILD, 'brokered-preload.so'));
    expect(locateRequestClient(root)).toBe(path.join(root, PREBUILD, 'brokered-request'));
  });

  it('a build made here comes first; a broken one falls through to the prebuild, saying why', async () => {
    await fill(PREBUILD);
    await fill('build/Release', ['brokered-sandbox']);
    expect(locateSandboxBinary(root)).toBe(path.join(root, 'build', 'Release', 'brokered-sandbox'));
    await fs.mkdir(path.join(root, 'build', 'Release'), { recursive: true });
    await fs.writeFile(path.join(root, 'build', 'Release', 'brokered_shell_native.node'), 'not an ELF file');
    expect(typeof loadNative(root).probeKernel).toBe('function');
  });

  it('nothing anywhere: NATIVE_UNAVAILABLE names every folder tried', async () => {
    expect(() => locateRequestClient(root)).toThrow(
      expect.objectContaining({
        code: ErrorCodes.NATIVE_UNAVAILABLE,
        message: expect.stringContaining(`${path.join(root, PREBUILD, 'brokered-request')}: not found`) as string,
      }),
    );
  });
});

describe('the install script (toolchain/install-native.mjs) in a package root with a prebuild', () => {
  /** A package root as the tarball unpacks it: the install scripts, the native sources, what of dist/ the check reads. */
  async function packageRoot(): Promise<void> {
    for (const part of ['toolchain', 'native', 'binding.gyp']) await fs.cp(path.join(REPO_ROOT, part), path.join(root, part), { recursive: true });
    await fs.mkdir(path.join(root, 'dist', 'native'), { recursive: true });
    await fs.copyFile(path.join(REPO_ROOT, 'dist', 'native', 'bindings.js'), path.join(root, 'dist', 'native', 'bindings.js'));
  }

  /** A PATH holding node alone: no make, compiler or python. */
  async function nodeOnly(): Promise<string> {
    const bin = path.join(root, 'node-only');
    await fs.mkdir(bin);
    await fs.symlink(process.execPath, path.join(bin, 'node'));
    return bin;
  }

  function install(env: NodeJS.ProcessEnv = {}) {
    return spawnSync(process.execPath, [path.join(root, 'toolchain', 'install-native.mjs')], { cwd: root, env: { ...process.env, ...env }, encoding: 'utf8' });
  }

  it('a prebuild that works here is used and nothing is built, with no compiler on PATH', async () => {
    await packageRoot();
    await fill(PREBUILD);
    const result = install({ PATH: await nodeOnly() });
    expect(result.status, result.stderr).toBe(0);
    expect(result.stderr).toBe(`brokered-shell: using the prebuilt native parts in ${PREBUILD}\n`);
    await expect(fs.stat(path.join(root, 'build'))).rejects.toThrow(/ENOENT/);
  });

  it.each([
    ['a preload library the dynamic loader refuses', 'brokered-preload.so', /brokered-preload\.so cannot be loaded: .*ld\.so: object .* cannot be preloaded/],
    ['an addon that is not one', 'brokered_shell_native.node', /brokered_shell_native\.node does not load: exit 1: Error: .*(invalid ELF header|file too short)/],
    ['a launcher that does not run', 'brokered-sandbox', /brokered-sandbox --check does not run: /],
  ])('%s: says why, then builds from source, and without a compiler says what to install', async (_what, broken, why) => {
    await packageRoot();
    await fill(PREBUILD);
    await fs.writeFile(path.join(root, PREBUILD, broken), 'not a binary', { mode: 0o755 });
    const result = install({ PATH: await nodeOnly() });
    expect(result.status).toBe(1);
    const [first, ...rest] = result.stderr.trimEnd().split('\n');
    expect(first).toMatch(new RegExp(`^brokered-shell: the prebuilt native parts in ${PREBUILD} do not work here \\(`));
    expect(first).toMatch(why);
    expect(first).toMatch(/; building them from source$/);
    expect(rest).toEqual([
      'brokered-shell: cannot build the native parts: make, cc, c++, python3 not found on PATH',
      'brokered-shell: install a C/C++ toolchain and python3 (Debian: `apt-get install build-essential python3`, which `bash toolchain/install-debian-packages.sh` does), then run `npm rebuild brokered-shell` (in a checkout: `npm ci`)',
    ]);
  });
});
