import { spawnSync } from 'node:child_process';
import { statSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/cli/main.js';
import { REPO_ROOT, tempDir } from './helpers.js';
// @ts-expect-error -- plain JavaScript for the build scripts, no declarations
import * as stamps from '../../toolchain/bundle-stamps.mjs';

const { packedRecord } = stamps as { packedRecord: (root: string) => Record<string, [number, string]> };

// bin/brokered-shell.js runs dist/bundle/cli.cjs (toolchain/bundle-cli.mjs) only while the
// stamps its manifest recorded still match, else dist/cli/main.js. A copy of the package
// with a stand-in bundle that says who answered tells the two apart.
const STAND_IN = `'use strict';\nexports.main = async (argv) => { process.stdout.write('bundle:' + argv.slice(2).join(' ') + '\\n'); return 0; };\n`;
const STAMP_FILES = ['dist/cli/main.js', 'node_modules/.package-lock.json'];
/** A stand-in whose broker "answered requests" when the command line says `--requests`. */
const ANSWERING_STAND_IN = `${STAND_IN}exports.brokerAnsweredRequests = () => process.argv.includes('--requests');\n`;

let pkg: string;
const bundleDir = () => path.join(pkg, 'dist', 'bundle');

function stamp(file: string): [number, number] | undefined {
  const info = statSync(path.join(pkg, file), { throwIfNoEntry: false });
  return info && [info.mtimeMs, info.size];
}

async function writeBundle(source = STAND_IN): Promise<void> {
  await fs.mkdir(bundleDir(), { recursive: true });
  await fs.writeFile(path.join(bundleDir(), 'cli.cjs'), source);
  const stamps = Object.fromEntries(STAMP_FILES.map((file) => [file, stamp(file)]));
  const manifest = { id: 'standin0standin0', size: Buffer.byteLength(source), ascii: true, stamps };
  await fs.writeFile(path.join(bundleDir(), 'cli.json'), JSON.stringify(manifest));
}

function launch(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const env = { ...process.env };
  delete env.BROKERED_SHELL_NO_BUNDLE;
  const result = spawnSync(process.execPath, [path.join(pkg, 'bin', 'brokered-shell.js'), ...args], { env, encoding: 'utf8' });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

async function cacheFiles(): Promise<string[]> {
  return (await fs.readdir(bundleDir())).filter((name) => name.endsWith('.cache'));
}

beforeEach(async () => {
  pkg = await tempDir('bs-launcher-');
  await fs.cp(path.join(REPO_ROOT, 'bin'), path.join(pkg, 'bin'), { recursive: true });
  await fs.cp(path.join(REPO_ROOT, 'package.json'), path.join(pkg, 'package.json'));
  await fs.cp(path.join(REPO_ROOT, 'dist'), path.join(pkg, 'dist'), {
    recursive: true,
    filter: (source) => path.basename(source) !== 'bundle' && !source.endsWith('.map') && !source.endsWith('.d.ts'),
  });
  await fs.symlink(path.join(REPO_ROOT, 'node_modules'), path.join(pkg, 'node_modules'));
});

describe('launcher: a current bundle', () => {
  it('runs the bundle, writes its code cache after the first run and reuses it', async () => {
    await writeBundle();
    expect(launch('a', 'b')).toMatchObject({ status: 0, stdout: 'bundle:a b\n' });
    const caches = await cacheFiles();
    expect(caches).toHaveLength(1);
    const [cache] = caches;
    // Named by the bundle's id, Node's version and platform (and a hash of any Node flags).
    expect(cache?.startsWith(`cli.standin0standin0.${process.version}-${process.arch}`)).toBe(true);
    const first = await fs.stat(path.join(bundleDir(), cache!));
    expect(first.size).toBeGreaterThan(0);
    expect(launch('c')).toMatchObject({ status: 0, stdout: 'bundle:c\n' });
    // Accepted by V8, so not written again.
    expect((await fs.stat(path.join(bundleDir(), cache!))).mtimeMs).toBe(first.mtimeMs);
  });

  it('replaces a cache V8 rejects', async () => {
    await writeBundle();
    expect(launch('x')).toMatchObject({ status: 0, stdout: 'bundle:x\n' });
    const [name] = await cacheFiles();
    const cache = path.join(bundleDir(), name!);
    await fs.writeFile(cache, 'not a code cache');
    expect(launch('x')).toMatchObject({ status: 0, stdout: 'bundle:x\n' });
    expect((await fs.readFile(cache)).toString('latin1')).not.toBe('not a code cache');
    expect((await fs.stat(cache)).size).toBeGreaterThan(100);
  });
});

describe('launcher: one code cache per command, deeper once the broker answered', () => {
  const mtime = async (name: string) => (await fs.stat(path.join(bundleDir(), name))).mtimeMs;

  it('gives each command its own cache, so `run` never reads one a `--help` made', async () => {
    await writeBundle();
    expect(launch('--help')).toMatchObject({ status: 0, stdout: 'bundle:--help\n' });
    expect(launch('backups', 'list')).toMatchObject({ status: 0 });
    expect(launch('run', 'true')).toMatchObject({ status: 0 });
    const suffixes = (await cacheFiles()).map((name) => name.split('.').slice(-2).join('.')).sort();
    expect(suffixes).toEqual(['backups.cache', 'other.cache', 'run.cache']);
  });

  it('writes a deeper cache after the first run that made requests, then reads it and writes nothing', async () => {
    await writeBundle(ANSWERING_STAND_IN);
    expect(launch('run', 'true')).toMatchObject({ status: 0 });
    const [shallow] = await cacheFiles();
    expect(shallow).toMatch(/\.run\.cache$/);
    expect(launch('run', 'true')).toMatchObject({ status: 0 });
    expect(await cacheFiles()).toEqual([shallow]);

    expect(launch('run', '--requests')).toMatchObject({ status: 0, stdout: 'bundle:run --requests\n' });
    const [deep] = await cacheFiles();
    expect(await cacheFiles()).toHaveLength(1);
    expect(deep).toMatch(/\.run\.requests\.cache$/);
    const written = await mtime(deep!);
    expect(launch('run', 'true')).toMatchObject({ status: 0 });
    expect(launch('run', '--requests')).toMatchObject({ status: 0 });
    expect(await cacheFiles()).toEqual([deep]);
    expect(await mtime(deep!)).toBe(written);
  });

  it('replaces a deeper cache V8 rejects, and removes it when the new one is shallower', async () => {
    await writeBundle(ANSWERING_STAND_IN);
    expect(launch('run', '--requests')).toMatchObject({ status: 0 });
    const [deep] = await cacheFiles();
    await fs.writeFile(path.join(bundleDir(), deep!), 'not a code cache');
    expect(launch('run', 'true')).toMatchObject({ status: 0 });
    const [shallow, ...others] = await cacheFiles();
    expect(others).toEqual([]);
    expect(shallow).toMatch(/\.run\.cache$/);
    expect((await fs.stat(path.join(bundleDir(), shallow!))).size).toBeGreaterThan(100);
  });

  it("knows the CLI's commands", async () => {
    const bin = await fs.readFile(path.join(REPO_ROOT, 'bin', 'brokered-shell.js'), 'utf8');
    const listed = /const COMMANDS = (\[[^\]]*\]);/.exec(bin)?.[1];
    const commands = buildProgram({ out: () => undefined, err: () => undefined }, () => undefined).commands.map((command) => command.name());
    expect(JSON.parse(listed!.replaceAll("'", '"'))).toEqual(commands);
  });
});

describe('launcher: falls back to dist/cli/main.js', () => {
  const realCli = (result: ReturnType<typeof launch>) => {
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout).toContain('Usage: brokered-shell');
    expect(result.stdout).not.toContain('bundle:');
  };

  it('without a bundle', () => {
    realCli(launch('--help'));
  });

  it('when dist/ was rebuilt after the bundle (the stamp moved)', async () => {
    await writeBundle();
    const main = path.join(pkg, 'dist', 'cli', 'main.js');
    await fs.writeFile(main, await fs.readFile(main));
    realCli(launch('--help'));
    expect(await cacheFiles()).toEqual([]);
  });

  it('when the manifest is missing (a bundle build in progress or failed)', async () => {
    await writeBundle();
    await fs.rm(path.join(bundleDir(), 'cli.json'));
    realCli(launch('--help'));
  });

  it('when the bundle on disk is not the one the manifest describes', async () => {
    await writeBundle();
    await fs.appendFile(path.join(bundleDir(), 'cli.cjs'), '// another build\n');
    realCli(launch('--help'));
  });

  it('when BROKERED_SHELL_NO_BUNDLE=1', async () => {
    await writeBundle();
    const result = spawnSync(process.execPath, [path.join(pkg, 'bin', 'brokered-shell.js'), '--help'], {
      env: { ...process.env, BROKERED_SHELL_NO_BUNDLE: '1' },
      encoding: 'utf8',
    });
    realCli({ status: result.status, stdout: result.stdout, stderr: result.stderr });
  });
});

describe('launcher: an installed package (files written at install, dependencies in the project above)', () => {
  /** A stand-in bundle as the pack step leaves it: stamps of the packing machine, and the packed record. */
  async function writePackedBundle(): Promise<void> {
    await writeBundle();
    const manifestFile = path.join(bundleDir(), 'cli.json');
    const manifest = JSON.parse(await fs.readFile(manifestFile, 'utf8')) as Record<string, unknown>;
    const elsewhere = { 'dist/cli/main.js': [499162500000, 1], 'node_modules/.package-lock.json': [499162500000, 2] };
    await fs.writeFile(manifestFile, JSON.stringify({ ...manifest, stamps: elsewhere, packed: packedRecord(pkg) }));
  }

  beforeEach(async () => {
    // project/node_modules/brokered-shell beside its dependencies, with no lockfile of its own.
    const project = await tempDir('bs-installed-');
    const modules = path.join(project, 'node_modules');
    await fs.mkdir(modules);
    for (const name of await fs.readdir(path.join(REPO_ROOT, 'node_modules'))) {
      if (!name.startsWith('.')) await fs.symlink(path.join(REPO_ROOT, 'node_modules', name), path.join(modules, name));
    }
    const installed = path.join(modules, 'brokered-shell');
    await fs.mkdir(installed);
    for (const part of ['bin', 'dist', 'package.json']) await fs.cp(path.join(pkg, part), path.join(installed, part), { recursive: true });
    pkg = installed;
  });

  it('runs the bundle while dist/cli/main.js is the one it was packed with', async () => {
    await writePackedBundle();
    expect(launch('a')).toMatchObject({ status: 0, stdout: 'bundle:a\n' });
    expect(await cacheFiles()).toHaveLength(1);
  });

  it('falls back to dist/ when dist/cli/main.js changed since packing', async () => {
    await writePackedBundle();
    await fs.appendFile(path.join(pkg, 'dist', 'cli', 'main.js'), '// patched after install\n');
    const result = launch('--help');
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout).toContain('Usage: brokered-shell');
  });

  it('a checkout (its own node_modules/.package-lock.json) goes by its stamps alone, not a packed record', async () => {
    await fs.mkdir(path.join(pkg, 'node_modules'));
    await fs.symlink(path.join(REPO_ROOT, 'node_modules', '.package-lock.json'), path.join(pkg, 'node_modules', '.package-lock.json'));
    await writePackedBundle();
    const result = launch('--help');
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout).toContain('Usage: brokered-shell');
  });
});
