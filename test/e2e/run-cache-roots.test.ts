/**
 * Tools' caches through `brokered-shell run` (seccomp runtime) with no configuration: a
 * real `npm install` from the registry writes npm's cache without a question and without
 * a backup. The cache is a folder this test owns (`npm_config_cache`, the variable npm
 * itself reads), so nothing depends on the machine's ~/.npm. The turn records only the
 * workspace, says how many cache paths it changed, and a restore of it empties
 * node_modules while the cache stays as npm left it.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BackupHome, type TurnManifest } from '../../src/backup/index.js';
import { openNetworkPolicy } from './preload-helpers.js';
import { brokeredShell, deniedLines, describeRun, makeWorld, onlyTurn, removeWorld, restoreTurn, run, treeState, type CliRun, type World } from './run-helpers.js';

const PACKAGE_JSON = '{"name":"w","version":"1.0.0"}\n';
/** Enough for a registry round trip on a slow day; the install itself takes a second or two. */
const INSTALL_TIMEOUT_MS = 180_000;

let world: World;
let cache: string;
let installed: CliRun;
let turn: TurnManifest;

const npmEnv = () => ({ npm_config_cache: cache, npm_config_update_notifier: 'false', npm_config_fund: 'false', npm_config_audit: 'false' });
const recordedPaths = (manifest: TurnManifest) => [...manifest.files.map((f) => f.path), ...(manifest.structure ?? []).map((e) => e.path)];

beforeAll(async () => {
  world = await makeWorld('cache-roots');
  cache = path.join(world.base, 'npm-cache');
  // Present at session start, as a default cache root must be.
  await fs.mkdir(cache);
  await fs.writeFile(path.join(world.ws, 'package.json'), PACKAGE_JSON);
  installed = await run(world, 'npm install is-number@7.0.0 --no-audit --no-fund', { session: 'npm-install' }, { env: npmEnv() });
  turn = await onlyTurn(world, 'npm-install');
}, INSTALL_TIMEOUT_MS);

afterAll(() => removeWorld(world));

describe('run: npm install with no configuration', () => {
  it('exits 0 with no denial, and the package is installed', async () => {
    expect(installed.status, describeRun(installed)).toBe(0);
    expect(deniedLines(installed.stderr)).toEqual([]);
    expect(installed.stderr).not.toMatch(/denied|EACCES|chown/);
    const manifest = JSON.parse(await fs.readFile(path.join(world.ws, 'node_modules/is-number/package.json'), 'utf8')) as { name: string; version: string };
    expect(manifest).toMatchObject({ name: 'is-number', version: '7.0.0' });
    // npm wrote its cache: the tarball's content and its index.
    expect(Object.keys(await treeState(path.join(cache, '_cacache'))).some((p) => p.startsWith('content-v2/'))).toBe(true);
  });

  it("records the workspace only: no cache file among the turn's backups or created paths", () => {
    const recorded = recordedPaths(turn);
    expect(recorded.filter((p) => p === cache || p.startsWith(`${cache}/`))).toEqual([]);
    expect(recorded.every((p) => p === world.ws || p.startsWith(`${world.ws}/`))).toBe(true);
    expect(turn.files.map((f) => f.path)).toEqual([path.join(world.ws, 'package.json')]);
    expect(recorded).toEqual(expect.arrayContaining([path.join(world.ws, 'node_modules/is-number/index.js'), path.join(world.ws, 'package-lock.json')]));
  });

  it('says how many cache paths it changed, as a count in the summary line', () => {
    const summary = installed.stderr.split('\n').find((line) => line.startsWith(`brokered-shell: turn ${turn.id} `));
    expect(summary, installed.stderr).toMatch(
      new RegExp(`^brokered-shell: turn ${turn.id} backed up 1 file \\(brokered-shell backups show ${turn.id}\\); (\\d+) paths in cache roots changed without a backup \\(a restore leaves them as they are\\)$`),
    );
    expect(Number(/; (\d+) paths in cache roots/.exec(summary ?? '')?.[1])).toBeGreaterThan(0);
    // One line for the cache, never a line per file.
    expect(installed.stderr).not.toContain(cache);
  });

  it('a restore of the turn removes what it added to the workspace and leaves the cache as npm left it', async () => {
    const cacheBefore = await treeState(cache);
    const restored = await restoreTurn(world, turn.id);
    expect(restored.status, describeRun(restored)).toBe(0);
    expect(await fs.readdir(world.ws)).toEqual(['package.json']);
    expect(await fs.readFile(path.join(world.ws, 'package.json'), 'utf8')).toBe(PACKAGE_JSON);
    expect(await treeState(cache)).toEqual(cacheBefore);
    // What the restore replaced is kept in its rescue turn: nothing of the cache there either.
    const rescue = (await new BackupHome({ home: world.home }).listTurns({ sessionId: 'npm-install' })).find((t) => t.id !== turn.id);
    expect(rescue && recordedPaths(rescue).filter((p) => p.startsWith(`${cache}/`))).toEqual([]);
  });
});

describe('run --runtime preload: npm install with the network open (the preload runtime governs no connection)', () => {
  it("works too: Landlock lets the command write the cache roots, and the turn records only the workspace", async () => {
    const ws = path.join(world.base, 'preload-ws');
    await fs.mkdir(ws);
    await fs.writeFile(path.join(ws, 'package.json'), PACKAGE_JSON);
    const args = ['run', '--runtime', 'preload', '--workspace', ws, '--session', 'preload', '--policy', openNetworkPolicy(world), '--', 'npm install is-number@7.0.0 --no-audit --no-fund'];
    const result = await brokeredShell(world, args, {
      cwd: ws,
      env: npmEnv(),
    });
    expect(result.status, describeRun(result)).toBe(0);
    expect(deniedLines(result.stderr)).toEqual([]);
    expect(await fs.readdir(path.join(ws, 'node_modules'))).toContain('is-number');
    expect(result.stderr).toMatch(/; \d+ paths in cache roots changed without a backup/);
    expect(recordedPaths(await onlyTurn(world, 'preload')).filter((p) => !p.startsWith(ws))).toEqual([]);
  }, INSTALL_TIMEOUT_MS);
});

describe('run: a write outside every root', () => {
  it('is denied with a line that names the settings and the home config file that would allow it', async () => {
    const target = path.join(world.outside, 'x');
    const result = await run(world, `echo x > ${target}`, { session: 'outside' });
    expect(result.status).toBe(1);
    expect(deniedLines(result.stderr)).toEqual([`write ${target}`]);
    expect(result.stderr).toContain(
      `brokered-shell: denied write ${target}: ${target} is outside the writable roots; writableRoots, or cacheRoots.add for a tool's cache, in ${path.join(world.home, 'config.json')} would allow it\n`,
    );
  });

  it('is allowed, unrecorded, once the home config adds it as a cache root', async () => {
    await fs.writeFile(path.join(world.home, 'config.json'), JSON.stringify({ cacheRoots: { add: [world.outside] } }));
    try {
      const target = path.join(world.outside, 'y');
      const result = await run(world, `echo y > ${target}`, { session: 'added' });
      expect(result.status, describeRun(result)).toBe(0);
      expect(await fs.readFile(target, 'utf8')).toBe('y\n');
      expect(result.stderr).toMatch(/^brokered-shell: turn \S+: 1 path in cache roots changed without a backup/m);
      const shown = await brokeredShell(world, ['backups', 'list', '--session', 'added', '--json']);
      const turns = (JSON.parse(shown.out) as { turns: Array<{ files: unknown[] }> }).turns;
      expect(turns.flatMap((t) => t.files)).toEqual([]);
    } finally {
      await fs.rm(path.join(world.home, 'config.json'));
    }
  });
});
