/**
 * `brokered-shell run` end to end: writes outside the roots fail by every route we
 * know (direct, a symlink or a hard link in the workspace, /proc magic links, openat2)
 * and leave their targets untouched; `run` still exits with the command's status and
 * says what it denied. A thread racing the supervisor (racer.c swaps the path buffer
 * during the syscall) never reaches the denied file and never changes a file that was
 * not backed up first.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TurnManifest } from '../../src/backup/index.js';
import {
  ST,
  blobOf,
  buildTools,
  caseStatuses,
  deniedLines,
  describeRun,
  entryFor,
  makeWorld,
  onlyTurn,
  removeWorld,
  restoreTurn,
  run,
  sha256,
  treeState,
  writeOld,
  type CliRun,
  type NodeState,
  type World,
} from './run-helpers.js';

const SESSION = 'escapes';
const ITERATIONS = 1000;

let world: World;
let outsideBefore: Record<string, NodeState>;
let result: CliRun;
let statuses: Map<string, number>;
let manifest: TurnManifest;
/** Files the racers may write (the allowed side) and must never write (the denied side). */
let raceOut: { allowed: string; denied: string };
let racePolicy: { allowed: string; denied: string };

const out = (name: string) => path.join(world.outside, name);

/** The outside routes: each aims at its own outside file, so each denial is visible on stderr. */
const ROUTES = [
  { name: 'direct', script: 'echo x > "$OUT/direct"', denied: () => `write ${out('direct')}` },
  { name: 'symlink', script: 'echo x > link-out', denied: () => `write ${out('symlink')}` },
  { name: 'hardlink', script: 'echo x > hard', denied: () => `write ${path.join(world.ws, 'hard')}` },
  { name: 'symlinked-dir', script: 'echo x > out-dir/symlinked-dir', denied: () => `write ${out('symlinked-dir')}` },
  { name: 'hardlink-made-inside', script: 'ln "$OUT/hardlink-made-inside" made && echo x > made', denied: () => `write ${path.join(world.ws, 'made')}` },
  { name: 'rename-out', script: 'mv "$OUT/rename-out" ./stolen', denied: () => `delete ${out('rename-out')}` },
  { name: 'proc-root', script: 'echo x > "/proc/self/root$OUT/proc-root"', denied: () => `write ${out('proc-root')}` },
  { name: 'proc-fd', script: '(exec 3<"$OUT/proc-fd"; echo x > /proc/self/fd/3)', denied: () => `write ${out('proc-fd')}` },
  { name: 'openat2', script: '"$TOOLS/openat2" "$OUT/openat2"', denied: () => `write ${out('openat2')}` },
] as const;

beforeAll(async () => {
  world = await makeWorld('escapes');
  buildTools(world, ['openat2', 'racer']);
  for (const route of ROUTES) await writeOld(out(route.name), `${route.name} outside\n`, 0o644);
  // Made here, outside the sandbox, before the run: the workspace holds ways out.
  await fs.symlink(out('symlink'), path.join(world.ws, 'link-out'));
  await fs.link(out('hardlink'), path.join(world.ws, 'hard'));
  await fs.symlink(world.outside, path.join(world.ws, 'out-dir'));
  // Racer 1: a workspace file against an outside one; racer 2: against a file the policy denies.
  const deniedOut = out('raced');
  await writeOld(deniedOut, 'raced outside\n', 0o644);
  raceOut = { allowed: path.join(world.ws, 'x'.repeat(deniedOut.length - world.ws.length - 1)), denied: deniedOut };
  racePolicy = { allowed: path.join(world.ws, 'permit.txt'), denied: path.join(world.ws, 'denied.txt') };
  for (const file of [raceOut.allowed, racePolicy.allowed]) await writeOld(file, 'allowed\n', 0o640);
  await writeOld(racePolicy.denied, 'denied by policy\n', 0o640);
  const policy = path.join(world.base, 'policy.json');
  await fs.writeFile(policy, JSON.stringify({ rules: [{ pattern: 'denied.txt', decision: 'deny' }] }));
  outsideBefore = await treeState(world.outside);

  const script = [
    ST,
    ...ROUTES.map((route) => `${route.script}; st ${route.name}`),
    `"$TOOLS/racer" '${raceOut.allowed}' '${raceOut.denied}' ${ITERATIONS}; st race-outside`,
    `"$TOOLS/racer" '${racePolicy.allowed}' '${racePolicy.denied}' ${ITERATIONS}; st race-policy`,
    'exit 3',
  ].join('\n');
  result = await run(world, script, { session: SESSION, policy });
  statuses = caseStatuses(result.out);
  manifest = await onlyTurn(world, SESSION);
});

afterAll(() => removeWorld(world));

describe('run: writes outside the roots', () => {
  it('exits with the command status', () => {
    expect(result.status, describeRun(result)).toBe(3);
  });

  it.each(ROUTES)('via $name: fails, says so on stderr, and the target is untouched', async (route) => {
    expect(statuses.get(route.name), describeRun(result)).toBe(1);
    expect(deniedLines(result.stderr)).toContain(route.denied());
    expect(await fs.readFile(out(route.name), 'utf8')).toBe(`${route.name} outside\n`);
  });

  it('openat2 reports EACCES', () => {
    expect(result.out).toMatch(/^EACCES$/m);
  });

  it('leaves everything outside exactly as it was (bytes, modes, mtimes, no new files)', async () => {
    expect(await treeState(world.outside)).toEqual(outsideBefore);
  });

  it('leaves the ways out in place: the symlink, and the hard link with both names', async () => {
    expect(await fs.readlink(path.join(world.ws, 'link-out'))).toBe(out('symlink'));
    const hard = await fs.stat(path.join(world.ws, 'hard'));
    expect(hard.nlink).toBe(2);
    expect(hard.ino).toBe((await fs.stat(out('hardlink'))).ino);
  });
});

describe('run: a thread swapping the path during the syscall', () => {
  const counts = (label: string) => {
    const lines = result.out.split('\n').filter((line) => line.startsWith('opened '));
    const index = label === 'race-outside' ? 0 : 1;
    const match = /^opened (\d+) refused (\d+)$/.exec(lines[index] ?? '');
    return { opened: Number(match?.[1] ?? -1), refused: Number(match?.[2] ?? -1) };
  };

  it.each([
    ['race-outside', () => raceOut],
    ['race-policy', () => racePolicy],
  ] as const)('%s: both sides were tried; the denied file is never written', async (label, pair) => {
    expect(statuses.get(label), describeRun(result)).toBe(0);
    const { opened, refused } = counts(label);
    expect(opened).toBeGreaterThan(0);
    expect(refused).toBeGreaterThan(0);
    expect(opened + refused).toBe(ITERATIONS);
    expect(await fs.readFile(pair().allowed, 'utf8')).toBe('R');
    const deniedText = label === 'race-outside' ? 'raced outside\n' : 'denied by policy\n';
    expect(await fs.readFile(pair().denied, 'utf8')).toBe(deniedText);
  });

  it('never changed a file without its backup: the first version of each allowed file is in the manifest', async () => {
    for (const file of [raceOut.allowed, racePolicy.allowed]) {
      const entry = entryFor(manifest, file);
      expect(entry, `${file} not backed up`).toBeDefined();
      if (!entry) continue;
      expect(entry.sha256).toBe(sha256('allowed\n'));
      expect(entry.mode).toBe(0o640);
      expect((await blobOf(world, manifest, entry)).toString('utf8')).toBe('allowed\n');
    }
    // Nothing denied, and nothing that only a mix of the two paths would name, was backed up.
    expect(manifest.files.map((f) => f.path).sort()).toEqual([raceOut.allowed, racePolicy.allowed].sort());
  });

  it('left no file in the workspace that a mixed path would name', async () => {
    expect(Object.keys(await treeState(world.ws)).sort()).toEqual(
      ['denied.txt', 'hard', 'link-out', 'out-dir', 'permit.txt', path.basename(raceOut.allowed)].sort(),
    );
  });

  it('restore brings the first versions back', async () => {
    const restored = await restoreTurn(world, manifest.id);
    expect(restored.status, describeRun(restored)).toBe(0);
    expect(await fs.readFile(raceOut.allowed, 'utf8')).toBe('allowed\n');
    expect(await fs.readFile(racePolicy.allowed, 'utf8')).toBe('allowed\n');
    expect(await treeState(world.outside)).toEqual(outsideBefore);
  });
});

describe('run: a command whose last write is denied', () => {
  it('exits 1 like bash does, with the denial on stderr', async () => {
    const single = await run(world, 'echo x > "$OUT/direct"', { session: 'escapes-single' });
    expect(single.status, describeRun(single)).toBe(1);
    expect(single.stderr).toContain(`brokered-shell: denied write ${out('direct')}: `);
    expect(single.stderr).toMatch(/Permission denied/);
    expect(await fs.readFile(out('direct'), 'utf8')).toBe('direct outside\n');
  });
});
