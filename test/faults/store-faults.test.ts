/**
 * Faults of the backup store under a real `brokered-shell run` (real kernel sandbox,
 * real broker, real store): the store fills up (a small tmpfs as $BROKERED_SHELL_HOME),
 * its file system turns read-only mid-turn (the tmpfs remounted), a store directory is
 * replaced by a file mid-turn (root ignores modes, so a file is what makes it
 * unwritable), and the session's whole store is removed mid-turn. In each, every
 * modification that needs a backup it cannot get is refused: the command sees EACCES,
 * `run` names the denial, and no file changed without its backup. The tmpfs cases run
 * under both durabilities (backup/settings.ts): 'turn' writes without syncing, and must
 * fail just as closed.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { deniedLines, describeRun, makeWorld, removeWorld, run, type CliRun, type World } from '../e2e/run-helpers.js';
import type { Durability } from '../../src/backup/settings.js';
import {
  WRITER_ENV,
  checkBacking,
  contentFor,
  durabilityPolicy,
  installScripts,
  mountTmpfs,
  remount,
  sessionStoreDir,
  snapshot,
  stepOutcomes,
  unmount,
  writerCommand,
  type StepOutcome,
} from './fault-helpers.js';

const KIB = 1024;

let world: World | undefined;
let mounted: string | undefined;

afterEach(async () => {
  if (mounted) unmount(mounted);
  mounted = undefined;
  await removeWorld(world);
  world = undefined;
});

/** The modifications of one phase: every kind that needs a backup, each on its own fresh target. */
function opsOn(prefix: string): { steps: string[]; targets: string[] } {
  const t = (name: string) => `${prefix}-${name}`;
  return {
    steps: [
      `write ${t('w')}`,
      `append ${t('a')}`,
      `truncate ${t('t')}`,
      `rdwr ${t('r')}`,
      `unlink ${t('u')}`,
      `rename ${t('m1')} ${t('m2')}`,
      `chmod ${t('c')}`,
      `fchmod ${t('f')}`,
    ],
    targets: ['w', 'a', 't', 'r', 'u', 'm1', 'm2', 'c', 'f'].map(t),
  };
}

async function writeTargets(world: World, names: readonly string[], size: number): Promise<void> {
  for (const name of names) {
    const file = path.join(world.ws, name);
    await fs.writeFile(file, contentFor(name, size));
    await fs.chmod(file, 0o644);
  }
}

/** Outcomes of the plan's steps that name `target` first. */
const outcomesFor = (outcomes: readonly StepOutcome[], targets: readonly string[]) => outcomes.filter((o) => targets.includes(o.args[0] ?? ''));

/** Runs `command` with a hook that injects the fault for each `@@sync NAME` the writer prints, then lets it go on. */
async function runWithSyncs(
  world: World,
  session: string,
  command: string,
  onSync: Record<string, () => Promise<void>>,
  policy?: string,
): Promise<CliRun> {
  const handled = new Set<string>();
  let chain = Promise.resolve();
  return run(world, command, { session, ...(policy ? { policy } : {}) }, {
    env: WRITER_ENV,
    onStdout: (text) => {
      for (const match of text.matchAll(/^@@sync (\S+)$/gm)) {
        const name = match[1] ?? '';
        if (handled.has(name)) continue;
        handled.add(name);
        const inject = onSync[name];
        chain = chain.then(async () => {
          if (inject) await inject();
          await fs.writeFile(path.join(world.outside, name), '');
        });
      }
    },
  });
}

/** `run` lists the refused requests (at most 20, the first ones): each refused target is named, in order. */
const DENIALS_LISTED = 20;
function expectDenialsNamed(result: CliRun, world: World, targets: readonly string[]): void {
  const listed = deniedLines(result.stderr).map((line) => line.slice(line.indexOf(' ') + 1));
  const expected = targets.map((target) => path.join(world.ws, target)).slice(0, DENIALS_LISTED);
  expect(listed, describeRun(result)).toEqual(expected);
}

describe('backup store faults under brokered-shell run', () => {
  it.each<Durability>(['each', 'turn'])('store full (durability %s): modifications whose backup does not fit are refused with EACCES and change nothing', { timeout: 60_000 }, async (durability) => {
    world = await makeWorld('fault-full');
    await installScripts(world);
    mountTmpfs(world.home, '2m');
    mounted = world.home;
    // Leave ~350 KiB: room for the store's directories, the journal and two or three backups.
    await fs.writeFile(path.join(world.home, 'filler'), Buffer.alloc(1700 * KIB, 1));
    const SIZE = 120 * KIB;
    const fit = ['fit-1', 'fit-2', 'fit-3', 'fit-4', 'fit-5'];
    const ops = opsOn('full');
    await writeTargets(world, [...fit, ...ops.targets], SIZE);
    const all = [...fit, ...ops.targets].map((name) => path.join(world!.ws, name));
    const before = await snapshot(all);

    const command = await writerCommand(world, 'full', [...fit.map((f) => `write ${f}`), ...ops.steps]);
    const result = await run(world, command, { session: 'fault-full', policy: await durabilityPolicy(world, durability) }, { env: WRITER_ENV });
    expect(result.status, describeRun(result)).toBe(0);
    const outcomes = stepOutcomes(result.out);
    expect(outcomes.at(-1), describeRun(result)).toBeDefined();

    // The store filled up during the turn: the first files fit, then one did not.
    const fitResults = outcomesFor(outcomes, fit).map((o) => o.result);
    expect(fitResults[0]).toBe('OK');
    expect(fitResults).toContain('EACCES');
    expect(fitResults.slice(fitResults.indexOf('EACCES')).every((r) => r === 'EACCES')).toBe(true);
    // Once full, every kind of modification of an existing file is refused with EACCES.
    const opResults = outcomesFor(outcomes, ops.targets);
    expect(opResults).toHaveLength(ops.steps.length);
    for (const outcome of opResults) expect(outcome, describeRun(result)).toMatchObject({ result: 'EACCES' });
    expect(result.stderr).toMatch(/ENOSPC/);
    const refusedFits = outcomesFor(outcomes, fit).filter((o) => o.result === 'EACCES').map((o) => o.args[0] ?? '');
    expectDenialsNamed(result, world, [...refusedFits, ...ops.targets.filter((t) => t !== 'full-m2')]);

    const report = await checkBacking(world.home, 'fault-full', before);
    expect(report.unbacked).toEqual([]);
    expect(report.backed.length).toBe(fitResults.filter((r) => r === 'OK').length);
    for (const target of ops.targets) expect(report.changed).not.toContain(path.join(world.ws, target));
  });

  it.each<Durability>(['each', 'turn'])('the store\'s file system read-only mid-turn (durability %s): refused while it is so, backed up again once writable', { timeout: 60_000 }, async (durability) => {
    world = await makeWorld('fault-readonly');
    await installScripts(world);
    const session = 'fault-readonly';
    mountTmpfs(world.home, '16m');
    mounted = world.home;
    const ops = opsOn('ro');
    const names = ['first', ...ops.targets, 'recover'];
    await writeTargets(world, names, 4 * KIB);
    const before = await snapshot(names.map((name) => path.join(world!.ws, name)));
    const home = world.home;
    const steps = ['write first', 'sync freeze', ...ops.steps, 'sync thaw', 'write recover'];
    const result = await runWithSyncs(
      world,
      session,
      await writerCommand(world, 'readonly', steps),
      {
        freeze: () => remount(home, 'ro'),
        thaw: () => remount(home, 'rw'),
      },
      await durabilityPolicy(world, durability),
    );
    expect(result.status, describeRun(result)).toBe(0);
    const outcomes = stepOutcomes(result.out);
    expect(outcomesFor(outcomes, ['first'])[0]?.result).toBe('OK');
    const refused = outcomesFor(outcomes, ops.targets);
    expect(refused).toHaveLength(ops.steps.length);
    for (const outcome of refused) expect(outcome, describeRun(result)).toMatchObject({ result: 'EACCES' });
    expect(outcomesFor(outcomes, ['recover'])[0]?.result, describeRun(result)).toBe('OK');
    expect(result.stderr).toMatch(/EROFS/);
    expectDenialsNamed(result, world, ops.targets.filter((t) => t !== 'ro-m2'));
    expect(result.stderr, describeRun(result)).toMatch(/turn \S+ backed up 2 files/);

    const report = await checkBacking(world.home, session, before);
    expect(report.unbacked).toEqual([]);
    expect(report.changed.map((f) => path.basename(f)).sort()).toEqual(['first', 'recover']);
    expect(report.backed).toHaveLength(2);
  });

  it('a store directory replaced by a file mid-turn: refused while it is so, backed up again once it is back', { timeout: 60_000 }, async () => {
    world = await makeWorld('fault-unwritable');
    await installScripts(world);
    const session = 'fault-unwritable';
    const store = sessionStoreDir(world.home, session);
    const dirs = ['tmp', 'blobs', 'turns'] as const;
    const phases = dirs.map((dir) => ({ dir, ops: opsOn(`x-${dir}`), recover: `r-${dir}` }));
    const names = ['first', ...phases.flatMap((p) => [...p.ops.targets, p.recover])];
    await writeTargets(world, names, 4 * KIB);
    const before = await snapshot(names.map((name) => path.join(world!.ws, name)));

    const steps = ['write first'];
    const onSync: Record<string, () => Promise<void>> = {};
    for (const { dir, ops, recover } of phases) {
      steps.push(`sync break-${dir}`, ...ops.steps, `sync mend-${dir}`, `write ${recover}`);
      onSync[`break-${dir}`] = async () => {
        await fs.rename(path.join(store, dir), path.join(store, `${dir}.aside`));
        await fs.writeFile(path.join(store, dir), 'not a directory\n');
      };
      onSync[`mend-${dir}`] = async () => {
        await fs.rm(path.join(store, dir));
        await fs.rename(path.join(store, `${dir}.aside`), path.join(store, dir));
      };
    }
    const result = await runWithSyncs(world, session, await writerCommand(world, 'unwritable', steps), onSync);
    expect(result.status, describeRun(result)).toBe(0);
    const outcomes = stepOutcomes(result.out);
    expect(outcomesFor(outcomes, ['first'])[0]?.result).toBe('OK');
    for (const { ops, recover } of phases) {
      const refused = outcomesFor(outcomes, ops.targets);
      expect(refused).toHaveLength(ops.steps.length);
      for (const outcome of refused) expect(outcome, describeRun(result)).toMatchObject({ result: 'EACCES' });
      expect(outcomesFor(outcomes, [recover])[0]?.result, describeRun(result)).toBe('OK');
    }
    expectDenialsNamed(result, world, phases.flatMap((p) => p.ops.targets.filter((t) => !t.endsWith('-m2'))));
    expect(result.stderr).toMatch(/ENOTDIR|EEXIST/);
    expect(result.stderr, describeRun(result)).toMatch(/turn \S+ backed up 4 files/);

    const report = await checkBacking(world.home, session, before);
    expect(report.unbacked).toEqual([]);
    expect(report.changed.map((f) => path.basename(f)).sort()).toEqual(['first', ...phases.map((p) => p.recover)].sort());
    expect(report.backed).toHaveLength(4);
  });

  it('the session store removed mid-turn: later modifications are refused and change nothing', { timeout: 60_000 }, async () => {
    world = await makeWorld('fault-removed');
    await installScripts(world);
    const session = 'fault-removed';
    const store = sessionStoreDir(world.home, session);
    // What the store held when it was removed, to check the backups taken before.
    const copyHome = path.join(world.base, 'copy-home');
    const ops = opsOn('gone');
    const names = ['early', ...ops.targets];
    await writeTargets(world, names, 4 * KIB);
    const before = await snapshot(names.map((name) => path.join(world!.ws, name)));

    const command = await writerCommand(world, 'removed', ['write early', 'sync remove', ...ops.steps]);
    const result = await runWithSyncs(world, session, command, {
      remove: async () => {
        await fs.cp(store, sessionStoreDir(copyHome, session), { recursive: true });
        await fs.rm(store, { recursive: true, force: true });
      },
    });
    expect(result.status, describeRun(result)).toBe(0);
    const outcomes = stepOutcomes(result.out);
    expect(outcomesFor(outcomes, ['early'])[0]?.result).toBe('OK');
    const refused = outcomesFor(outcomes, ops.targets);
    expect(refused).toHaveLength(ops.steps.length);
    for (const outcome of refused) expect(outcome, describeRun(result)).toMatchObject({ result: 'EACCES' });
    expectDenialsNamed(result, world, ops.targets.filter((t) => t !== 'gone-m2'));
    // The turn's journal went with the store: `run` says the turn could not be committed.
    expect(result.stderr).toMatch(/the turn could not be committed/);
    // Nothing brought a half store back behind the fault's back.
    await expect(fs.lstat(store)).rejects.toMatchObject({ code: 'ENOENT' });

    const report = await checkBacking(copyHome, session, before);
    expect(report.unbacked).toEqual([]);
    expect(report.changed).toEqual([path.join(world.ws, 'early')]);
    expect(report.backed).toEqual([path.join(world.ws, 'early')]);
  });
});
