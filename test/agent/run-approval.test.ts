/**
 * `brokered-shell run` and approvals asked after the command (`approvals: "after"` in the
 * home config; the inline default is in run-inline-approval.test.ts), as a process (real
 * CLI, sandbox, broker, store):
 * `--yes` approves and the command runs again brokered, with the backup in the turn;
 * `--no` refuses, the status is the command's; with neither and no terminal the blocks
 * are listed and the status is 77; on a terminal a person is asked (y/N).
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TERMINAL_RESET } from '../../src/cli/approve.js';
import {
  CLI,
  blobOf,
  brokeredShell,
  describeRun,
  entryFor,
  makeWorld,
  onlyTurn,
  removeWorld,
  worldEnv,
  writeOld,
  type CliRun,
  type World,
} from '../e2e/run-helpers.js';

let world: World;
let policy: string;
const ws = (name: string) => path.join(world.ws, name);

beforeAll(async () => {
  world = await makeWorld('approval');
  await fs.writeFile(path.join(world.home, 'config.json'), JSON.stringify({ approvals: 'after' }));
  policy = path.join(world.base, 'policy.json');
  await fs.writeFile(policy, JSON.stringify({ rules: [{ pattern: 'ask-*.txt', decision: 'prompt', reason: 'asks first' }] }));
});

afterAll(() => removeWorld(world));

const runWith = (session: string, flags: string[], command: string) =>
  brokeredShell(world, ['run', '--workspace', world.ws, '--session', session, '--policy', policy, ...flags, '--', command]);

describe('run: approvals', () => {
  it('no terminal and no --yes/--no: the blocks are listed, nothing changed, exit 77', async () => {
    await writeOld(ws('ask-none.txt'), 'original\n');
    const result = await runWith('approve-none', [], 'echo changed > ask-none.txt; echo ran');
    expect(result.status, describeRun(result)).toBe(77);
    expect(result.out).toBe('ran\n');
    expect(result.stderr).toContain(`brokered-shell: needs approval: write ${ws('ask-none.txt')} by open (asks first)`);
    expect(result.stderr).toContain('run again with --yes');
    expect(await fs.readFile(ws('ask-none.txt'), 'utf8')).toBe('original\n');
    expect((await onlyTurn(world, 'approve-none')).files).toEqual([]);
  });

  it('--yes: approved, run again brokered in the same turn: changed, and backed up', async () => {
    await writeOld(ws('ask-yes.txt'), 'original\n');
    const result = await runWith('approve-yes', ['--yes'], 'echo changed > ask-yes.txt && echo ok');
    expect(result.status, describeRun(result)).toBe(0);
    // The first (refused) attempt, then the rerun.
    expect(result.out).toBe('ok\n');
    expect(result.stderr).toMatch(/ask-yes\.txt: Permission denied/);
    expect(result.stderr).toContain(`brokered-shell: approved for this session: write ${ws('ask-yes.txt')}`);
    expect(result.stderr).not.toContain('needs approval');
    expect(await fs.readFile(ws('ask-yes.txt'), 'utf8')).toBe('changed\n');
    const turn = await onlyTurn(world, 'approve-yes');
    const entry = entryFor(turn, ws('ask-yes.txt'));
    if (!entry) throw new Error(`ask-yes.txt was not backed up\n${describeRun(result)}`);
    expect((await blobOf(world, turn, entry)).toString('utf8')).toBe('original\n');
    expect(result.stderr).toMatch(new RegExp(`^brokered-shell: turn ${turn.id} backed up 1 file `, 'm'));
  });

  it('--yes and a command that stops at each refusal: approved round after round until it is through', async () => {
    const result = await runWith('approve-rounds', ['--yes'], 'echo 1 > ask-r1.txt && echo 2 > ask-r2.txt && echo 3 > ask-r3.txt && echo ok');
    expect(result.status, describeRun(result)).toBe(0);
    expect(result.out).toBe('ok\n');
    for (const name of ['ask-r1.txt', 'ask-r2.txt', 'ask-r3.txt']) {
      expect(result.stderr).toContain(`brokered-shell: approved for this session: write ${ws(name)}`);
    }
    expect(result.stderr).not.toContain('needs approval');
    expect(await fs.readFile(ws('ask-r3.txt'), 'utf8')).toBe('3\n');
  });

  it('--yes lets git init through: the .git directory, each hook and the config are approved in turn', async () => {
    const repo = ws('fresh-repo');
    await fs.mkdir(repo);
    const result = await brokeredShell(world, ['run', '--workspace', repo, '--session', 'approve-git', '--yes', '--', 'git init -q && git -c user.name=t -c user.email=t@t commit -q --allow-empty -m first && git rev-parse --verify -q HEAD']);
    expect(result.status, describeRun(result)).toBe(0);
    // Each round's output is shown; a round may get as far as the commit (git goes on past a refused chmod).
    expect(result.out).toMatch(/(^|\n)[0-9a-f]{40}\n$/);
    expect(result.stderr).toContain(`brokered-shell: approved for this session: write ${path.join(repo, '.git', 'config')}`);
    expect(result.stderr).toContain(`brokered-shell: approved for this session: write ${path.join(repo, '.git', 'hooks')}`);
    expect(result.stderr).not.toContain('needs approval');
    expect(await fs.readFile(path.join(repo, '.git', 'HEAD'), 'utf8')).toMatch(/^ref: refs\/heads\//);
  });

  it('--yes and a refusal no grant lifts (a guarded directory moved whole): listed, not called approved, exit 77', async () => {
    await fs.mkdir(ws('guarded-dir'));
    await writeOld(ws('guarded-dir/inside.txt'), 'inside\n');
    const dirPolicy = path.join(world.base, 'dir-policy.json');
    await fs.writeFile(dirPolicy, JSON.stringify({ rules: [{ pattern: 'guarded-dir', decision: 'prompt', reason: 'guarded' }] }));
    const result = await brokeredShell(world, ['run', '--workspace', world.ws, '--session', 'approve-stuck', '--policy', dirPolicy, '--yes', '--', 'mv guarded-dir moved-dir']);
    expect(result.status, describeRun(result)).toBe(77);
    expect(result.stderr).toContain(`brokered-shell: needs approval: delete ${ws('guarded-dir')}`);
    expect(result.stderr).not.toContain('approved for this session');
    expect(result.stderr).toContain('still refused after 1 round of approving and running the command again');
    expect(await fs.readFile(ws('guarded-dir/inside.txt'), 'utf8')).toBe('inside\n');
  });

  it("--no: refused without asking, the file untouched, the status is the command's", async () => {
    await writeOld(ws('ask-no.txt'), 'original\n');
    const result = await runWith('approve-no', ['--no'], 'echo changed > ask-no.txt; exit 3');
    expect(result.status, describeRun(result)).toBe(3);
    expect(result.stderr).toContain(`brokered-shell: not approved: write ${ws('ask-no.txt')}`);
    expect(await fs.readFile(ws('ask-no.txt'), 'utf8')).toBe('original\n');
    expect((await onlyTurn(world, 'approve-no')).files).toEqual([]);
  });

  it('--yes and --no together are a usage error', async () => {
    const result = await runWith('approve-both', ['--yes', '--no'], 'true');
    expect(result.status, describeRun(result)).toBe(2);
  });

  it('nothing to approve: --yes changes nothing about the status', async () => {
    const result = await runWith('approve-nothing', ['--yes'], 'exit 5');
    expect(result.status, describeRun(result)).toBe(5);
    expect(result.stderr).not.toContain('approv');
  });
});

/**
 * `run` under `script`, which gives it a terminal. Each answer is typed once the next
 * `[y/N]` has appeared, as a person would (what is typed ahead of a question is dropped);
 * a question with no answer left gets an empty line, which is no. `script` runs the line
 * with `$SHELL -c`; `exec` leaves no shell between it and `run`, since a shell such as
 * dash that waits for `run` would itself die of a Ctrl-C typed at the question.
 */
function onTerminal(session: string, command: string, answers: readonly string[]): Promise<CliRun> {
  const line = ['exec', process.execPath, CLI, 'run', '--workspace', world.ws, '--session', session, '--policy', policy, '--', command]
    .map((word) => (word === 'exec' ? word : `'${word.replace(/'/g, `'\\''`)}'`))
    .join(' ');
  return new Promise((resolve, reject) => {
    const child = spawn('script', ['-qec', line, '/dev/null'], { cwd: world.ws, env: worldEnv(world), stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    let asked = 0;
    const onOutput = (chunk: Buffer) => {
      out.push(chunk);
      const questions = Buffer.concat(out).toString('utf8').split('[y/N]').length - 1;
      for (; asked < questions; asked += 1) child.stdin.write(answers[asked] ?? '\n');
    };
    child.stdout.on('data', onOutput);
    child.stderr.on('data', onOutput);
    child.once('error', reject);
    child.once('close', (status, signal) => {
      const text = Buffer.concat(out).toString('utf8');
      resolve({ status, signal, stdout: Buffer.concat(out), out: text, stderr: text, pid: child.pid ?? -1 });
    });
  });
}

describe('run: approvals on a terminal', () => {
  it('asks y/N listing the blocks; y approves and runs again', async () => {
    await writeOld(ws('ask-tty.txt'), 'original\n');
    const result = await onTerminal('tty-yes', 'echo changed > ask-tty.txt', ['y\n']);
    expect(result.status, describeRun(result)).toBe(0);
    expect(result.out).toContain('brokered-shell: the command needs approval for:');
    expect(result.out).toContain(`write ${ws('ask-tty.txt')} by open (asks first)`);
    expect(result.out).toContain('[y/N]');
    expect(await fs.readFile(ws('ask-tty.txt'), 'utf8')).toBe('changed\n');
    const turn = await onlyTurn(world, 'tty-yes');
    expect(entryFor(turn, ws('ask-tty.txt'))).toBeDefined();
  });

  it('asks again about what the rerun newly needs; refusing then keeps the first approval', async () => {
    await writeOld(ws('ask-tty-a.txt'), 'a\n');
    await writeOld(ws('ask-tty-b.txt'), 'b\n');
    const result = await onTerminal('tty-rounds', 'echo A > ask-tty-a.txt && echo B > ask-tty-b.txt', ['y\n', 'n\n']);
    expect(result.status, describeRun(result)).toBe(1);
    expect(result.out).toContain('brokered-shell: the command ran again and now also needs approval for:');
    expect(result.out).toContain(`brokered-shell: approved for this session: write ${ws('ask-tty-a.txt')}`);
    expect(result.out).toContain(`brokered-shell: not approved: write ${ws('ask-tty-b.txt')}`);
    expect(await fs.readFile(ws('ask-tty-a.txt'), 'utf8')).toBe('A\n');
    expect(await fs.readFile(ws('ask-tty-b.txt'), 'utf8')).toBe('b\n');
  });

  it("a y typed before the question (here drawn out by the command's own fake question) does not answer it", async () => {
    await writeOld(ws('ask-tty-ahead.txt'), 'original\n');
    // The fake question gets the y; the command sleeps without reading it; the real question gets n.
    const command = "printf 'Update 3 packages? [y/N] '; sleep 1; echo; echo changed > ask-tty-ahead.txt; exit 3";
    const result = await onTerminal('tty-ahead', command, ['y\n', 'n\n']);
    expect(result.status, describeRun(result)).toBe(3);
    expect(result.out).toContain(`brokered-shell: not approved: write ${ws('ask-tty-ahead.txt')}`);
    expect(await fs.readFile(ws('ask-tty-ahead.txt'), 'utf8')).toBe('original\n');
    // The question starts from plain text, whatever styling the command left on.
    // On a line of its own: after the reset (which moves no cursor), a new line.
    expect(result.out).toMatch(new RegExp(`${escapeRegExp(TERMINAL_RESET)}\r?\nbrokered-shell: the command needs approval for:`));
  });

  it('Ctrl-C at the question refuses: the turn is committed and run ends with the command\'s status', async () => {
    await writeOld(ws('ask-tty-int.txt'), 'original\n');
    const result = await onTerminal('tty-int', 'echo changed > ask-tty-int.txt; exit 6', ['\x03']);
    expect(result.status, describeRun(result)).toBe(6);
    expect(result.out).toContain(`brokered-shell: not approved: write ${ws('ask-tty-int.txt')}`);
    expect(await fs.readFile(ws('ask-tty-int.txt'), 'utf8')).toBe('original\n');
    expect((await onlyTurn(world, 'tty-int')).committedAt).not.toBeNull();
  });

  it('anything but y refuses', async () => {
    await writeOld(ws('ask-tty-no.txt'), 'original\n');
    const result = await onTerminal('tty-no', 'echo changed > ask-tty-no.txt; exit 4', ['nope\n']);
    expect(result.status, describeRun(result)).toBe(4);
    expect(result.out).toContain(`brokered-shell: not approved: write ${ws('ask-tty-no.txt')}`);
    expect(await fs.readFile(ws('ask-tty-no.txt'), 'utf8')).toBe('original\n');
  });
});

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
