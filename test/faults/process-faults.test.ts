/**
 * Processes killed at the worst moment, with the real kernel sandbox and the real broker:
 *
 * - the broker (the `run` Node process) SIGKILLed while its command writes in a loop:
 *   the supervisor sees the channel close, kills the command's tree and exits 125; every
 *   file that changed has its previous bytes in the open turn's journal, the rest are
 *   unchanged, whether the store synced each backup or left them to a commit that never
 *   came (durability 'turn': the page cache outlives the broker);
 * - the supervisor (`brokered-sandbox`) SIGKILLed: the writer, orphaned, goes on trying,
 *   and every modifying call it makes fails (ENOSYS: no listener is left to answer), so
 *   nothing changes after the kill;
 * - the target killed (by the shell, or by itself) while its request waits at the broker:
 *   the request is still answered, the supervisor drops it without acting and keeps no
 *   fd of it, and the next requests are answered as usual.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createSandboxSession, type SandboxSession } from '../../src/agent/index.js';
import { BackupHome } from '../../src/backup/index.js';
import type { Durability } from '../../src/backup/settings.js';
import { Stage, type BrokerPlugin } from '../../src/core/index.js';
import { describeRun, makeWorld, removeWorld, run, worldEnv, type World } from '../e2e/run-helpers.js';
import {
  WRITER_ENV,
  checkBacking,
  contentFor,
  durabilityPolicy,
  dead,
  descendantsOf,
  fdCount,
  findByArgument,
  findDescendant,
  installScripts,
  snapshot,
  stepOutcomes,
  waitFor,
  writerCommand,
} from './fault-helpers.js';

const KIB = 1024;

let world: World | undefined;
let session: SandboxSession | undefined;

afterEach(async () => {
  await session?.close().catch(() => undefined);
  session = undefined;
  await removeWorld(world);
  world = undefined;
});

interface Reaped {
  pid: number;
  comm: string;
  how: 'exit' | 'signal';
  status: number;
}

async function reapedIn(file: string): Promise<Reaped[]> {
  const text = await fs.readFile(file, 'utf8').catch(() => '');
  return text
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [pid, comm, how, status] = line.split(' ');
      return { pid: Number(pid), comm: comm ?? '', how: how === 'exit' ? 'exit' : 'signal', status: Number(status) };
    });
}

/** `count` existing files `loop-1…` of `size` bytes; their paths. */
async function loopFiles(world: World, count: number, size: number): Promise<string[]> {
  const files: string[] = [];
  for (let i = 1; i <= count; i++) {
    const file = path.join(world.ws, `loop-${i}`);
    await fs.writeFile(file, contentFor(`loop-${i}`, size));
    files.push(file);
  }
  return files;
}

const okCount = (stdout: string) => stepOutcomes(stdout).filter((o) => o.result === 'OK').length;

describe('processes killed mid-command', () => {
  it.each<Durability>(['each', 'turn'])('the broker killed while the command writes (durability %s): the supervisor fails closed, no change without its backup', { timeout: 60_000 }, async (durability) => {
    world = await makeWorld('fault-broker');
    const { subreaper } = await installScripts(world);
    const session = 'fault-broker';
    const report = path.join(world.base, 'reaped.txt');
    // Large enough that a backup takes a while: the kill lands while a request is at the broker.
    const files = await loopFiles(world, 80, 64 * KIB);
    const before = await snapshot(files);
    const command = await writerCommand(world, 'loop', files.map((f) => `write ${path.basename(f)}`));

    let wrapperPid = 0;
    const killed: { run?: number; supervisor?: number; tree: number[] } = { tree: [] };
    let killing: Promise<void> | undefined;
    // The killed `run` cannot remove its scratch and socket dirs: they go in the world's, removed with it.
    const tmp = path.join(world.base, 'tmp');
    await fs.mkdir(tmp);
    const result = await run(world, command, { session, policy: await durabilityPolicy(world, durability) }, {
      wrapper: ['python3', subreaper],
      env: { ...WRITER_ENV, REAP_REPORT: report, TMPDIR: tmp },
      onSpawn: (pid) => (wrapperPid = pid),
      onStdout: (text) => {
        if (killing || okCount(text) < 20) return;
        killing = (async () => {
          const runPid = await findDescendant(wrapperPid, 'node');
          const supervisor = runPid === undefined ? undefined : await findDescendant(runPid, 'brokered-sandbox');
          if (runPid === undefined || supervisor === undefined) throw new Error('the run or supervisor process was not found');
          killed.tree = await descendantsOf(supervisor);
          killed.run = runPid;
          killed.supervisor = supervisor;
          process.kill(runPid, 'SIGKILL');
        })();
      },
    });
    await killing;
    expect(killed.supervisor, describeRun(result)).toBeDefined();
    // The wrapper saw `run` die of SIGKILL and the orphaned supervisor exit 125 (broker lost).
    const reaped = await reapedIn(report);
    expect(reaped).toContainEqual({ pid: killed.run, comm: 'node', how: 'signal', status: 9 });
    expect(reaped).toContainEqual({ pid: killed.supervisor, comm: 'brokered-sandbo', how: 'exit', status: 125 });
    // A killed peer shows as end of stream or as a reset, depending on what was in flight.
    expect(result.stderr).toMatch(/brokered-sandbox: broker channel lost \((end of stream|read error)\): stopping the command/);
    // The command was killed: it never reached its end, and nothing of its tree is left.
    expect(result.out).not.toContain('@@end');
    expect(killed.tree.length).toBeGreaterThan(0);
    for (const pid of killed.tree) expect(await dead(pid)).toBe(true);

    // The turn is still open (nobody committed it): its journal is what holds the backups.
    const turns = await new BackupHome({ home: world.home }).listTurns({ sessionId: session });
    expect(turns).toHaveLength(1);
    expect(turns[0]?.committedAt).toBeNull();
    const backing = await checkBacking(world.home, session, before);
    expect(backing.unbacked).toEqual([]);
    const acknowledged = okCount(result.out);
    expect(acknowledged).toBeGreaterThanOrEqual(20);
    // Changed: every write the command saw succeed, and at most the one it was killed in.
    expect(backing.changed.length).toBeGreaterThanOrEqual(acknowledged);
    expect(backing.changed.length).toBeLessThanOrEqual(acknowledged + 1);
    expect(backing.backed).toHaveLength(backing.changed.length);
  });

  it('the supervisor killed: the orphaned writer goes on, and none of its later changes happens', { timeout: 60_000 }, async () => {
    world = await makeWorld('fault-supervisor');
    const { subreaper } = await installScripts(world);
    const session = 'fault-supervisor';
    const report = path.join(world.base, 'reaped.txt');
    const files = await loopFiles(world, 120, 4 * KIB);
    const before = await snapshot(files);
    // Two passes: after the kill, the writer also tries again the files it already changed.
    const steps = [...files, ...files].map((f, i) => (i % 2 === 0 ? `write ${path.basename(f)}` : `append ${path.basename(f)}`));
    const command = await writerCommand(world, 'loop', steps);

    let wrapperPid = 0;
    let supervisor: number | undefined;
    let killedAfter = 0;
    let killing: Promise<void> | undefined;
    const result = await run(world, command, { session }, {
      wrapper: ['python3', subreaper],
      env: { ...WRITER_ENV, REAP_REPORT: report },
      onSpawn: (pid) => (wrapperPid = pid),
      onStdout: (text) => {
        if (killing || okCount(text) < 20) return;
        killing = (async () => {
          supervisor = await findDescendant(wrapperPid, 'brokered-sandbox');
          if (supervisor === undefined) throw new Error('the supervisor was not found');
          killedAfter = stepOutcomes(text).length;
          process.kill(supervisor, 'SIGKILL');
        })();
      },
    });
    await killing;
    expect(supervisor, describeRun(result)).toBeDefined();
    // `run` reports the launcher's death as the command's status; the writer, orphaned, ran to its end.
    expect(result.status, describeRun(result)).toBe(137);
    expect(result.out).toContain('@@end');
    const reaped = await reapedIn(report);
    expect(reaped).toContainEqual(expect.objectContaining({ comm: 'python3', how: 'exit', status: 0 }));

    const outcomes = stepOutcomes(result.out);
    expect(outcomes).toHaveLength(steps.length);
    const firstFailure = outcomes.findIndex((o) => o.result !== 'OK');
    expect(firstFailure).toBeGreaterThanOrEqual(killedAfter);
    expect(outcomes.length - firstFailure).toBeGreaterThan(files.length);
    /*
     * The step in flight at the kill may end either way. Normally ENOSYS. But when the
     * supervisor dies inside its ADDFD_FLAG_SEND ioctl before the writer took the fd, the
     * kernel has already marked the call answered, drops the fd, and the writer's open
     * returns 0: the writer then writes to its stdin and gets EBADF. Every later step:
     * no listener is left, so the kernel answers ENOSYS.
     */
    expect(['ENOSYS', 'EBADF'], describeRun(result)).toContain(outcomes[firstFailure]?.result);
    for (const outcome of outcomes.slice(firstFailure + 1)) expect(outcome.result, describeRun(result)).toBe('ENOSYS');

    // Nothing changed without its backup; the in-flight step's open may have truncated its file first.
    const backing = await checkBacking(world.home, session, before);
    expect(backing.unbacked).toEqual([]);
    expect([firstFailure, firstFailure + 1]).toContain(backing.changed.length);
    expect(backing.changed).toEqual(files.slice(0, backing.changed.length));
  });

  it('a target killed while its request waits at the broker: dropped, no fd kept, later requests answered', { timeout: 60_000 }, async () => {
    world = await makeWorld('fault-target');
    await installScripts(world);
    const ROUNDS = 12;
    /** What each round's writer does: open O_TRUNC, fchmod (the supervisor holds a duplicate fd while it waits), truncate. */
    const ops = ['write', 'fchmod', 'truncate'] as const;
    const opOf = (round: number) => ops[Math.floor(round / 2) % ops.length] ?? 'write';
    /** Every other round the writer kills itself; in the others the shell kills it (each op both ways). */
    const selfKill = (round: number) => round % 2 === 1;
    const holds: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const name = `hold-${round}`;
      await fs.writeFile(path.join(world.ws, name), contentFor(name, 8 * KIB));
      await fs.chmod(path.join(world.ws, name), 0o644);
      const steps = selfKill(round) ? [`killself-at held-${round}`, `${opOf(round)} ${name}`] : [`${opOf(round)} ${name}`];
      await fs.writeFile(path.join(world.tools, `${name}.plan`), `${steps.join('\n')}\n`);
      holds.push(path.join(world.ws, name));
    }
    const before = await snapshot(holds);

    let supervisor = 0;
    const samples: Array<{ what: string; supervisorFds: number; brokerFds: number }> = [];
    const answered: string[] = [];
    const holdPlugin: BrokerPlugin = {
      name: 'fault-hold',
      apply(broker) {
        broker.hooks.preModifyBackup.tapPromise({ name: 'fault-hold', stage: Stage.FIRST }, async (resolved) => {
          const name = path.basename(resolved.targets.find((t) => t.access !== 'read')?.resolved ?? '');
          const match = /^hold-(\d+)$/.exec(name);
          if (name !== 'final' && !match) return;
          const round = Number(match?.[1] ?? -1);
          // Only this request is pending at the supervisor now: the previous round's were answered before the shell went on.
          samples.push({ what: match ? (opOf(round) === 'fchmod' ? 'dup' : 'path') : 'path', supervisorFds: await fdCount(supervisor), brokerFds: await fdCount('self') });
          if (!match) return;
          const writer = await waitFor(`the writer of ${name}`, () => findByArgument(supervisor, `${name}.plan`));
          await fs.writeFile(path.join(world!.outside, `held-${round}`), '');
          // Hold the request until its caller is dead; then let it go on (its backup, then the answer).
          await waitFor(`the writer of ${name} to die`, async () => ((await dead(writer)) ? true : undefined));
        });
        broker.hooks.requestDone.tap('fault-hold', (outcome) => {
          const target = outcome.targets.find((t) => t.access !== 'read');
          if (target && /^hold-\d+$/.test(path.basename(target.resolved)) && outcome.ok) answered.push(target.resolved);
        });
      },
    };
    session = await createSandboxSession({
      workspace: world.ws,
      home: world.home,
      sessionId: 'fault-target',
      env: worldEnv(world, WRITER_ENV),
      plugins: [holdPlugin],
    });
    await session.beginTurn({ userMessage: 'targets killed mid-request' });
    const script = [
      `for i in $(seq 0 ${ROUNDS - 1}); do`,
      '  python3 "$TOOLS/writer.py" "$TOOLS/hold-$i.plan" "$OUT" &',
      '  pid=$!',
      '  if [ $((i % 2)) -eq 0 ]; then',
      '    while [ ! -e "$OUT/held-$i" ]; do sleep 0.005; done',
      '    kill -9 $pid',
      '  fi',
      '  wait $pid; echo "round $i: writer status $?"',
      '  echo "after $i" > "after-$i"',
      'done',
      'echo done > final',
    ].join('\n');
    const result = await session.execute(script, { onStart: (command) => (supervisor = command.pid ?? 0) });
    expect(result.exitCode, result.stderr).toBe(0);
    await session.endTurn();

    // Each writer died of SIGKILL (137) while its request waited, and the shell went on.
    for (let round = 0; round < ROUNDS; round++) {
      expect(result.stdout).toContain(`round ${round}: writer status 137`);
      expect(await fs.readFile(path.join(world.ws, `after-${round}`), 'utf8')).toBe(`after ${round}\n`);
    }
    expect(await fs.readFile(path.join(world.ws, 'final'), 'utf8')).toBe('done\n');
    // The broker answered every held request (allowed, after its backup); the supervisor acted on none.
    expect(answered.sort()).toEqual([...holds].sort());
    const backing = await checkBacking(world.home, 'fault-target', before);
    expect(backing.changed).toEqual([]);
    expect(backing.withEntry).toBe(ROUNDS);
    // The supervisor's fds: the same at every round (and one more while a duplicate for fchmod is held).
    expect(samples).toHaveLength(ROUNDS + 1);
    const byKind = (what: string) => samples.filter((s) => s.what === what);
    const paths = byKind('path').map((s) => s.supervisorFds);
    const dups = byKind('dup').map((s) => s.supervisorFds);
    expect(new Set(paths).size, JSON.stringify(samples)).toBe(1);
    expect(new Set(dups).size, JSON.stringify(samples)).toBe(1);
    expect(dups[0]).toBe((paths[0] ?? 0) + 1);
    // The broker's own fds do not grow round after round either.
    const brokerFds = samples.map((s) => s.brokerFds);
    expect(brokerFds.at(-1), JSON.stringify(samples)).toBeLessThanOrEqual(brokerFds[0] ?? 0);
  });
});
