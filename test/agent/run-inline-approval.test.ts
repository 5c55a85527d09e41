/**
 * `brokered-shell run` with inline approvals (the default), on a real terminal: a change
 * that needs approval waits at its syscall while the person is asked; a yes lets it
 * through and the command goes on, never run twice; a directory the command made can be
 * approved whole, so git init, clone and worktree add need a question or two.
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, brokeredShell, describeRun, entryFor, blobOf, makeWorld, onlyTurn, removeWorld, worldEnv, writeOld, type CliRun, type World } from '../e2e/run-helpers.js';

let world: World;
let policy: string;
const ws = (name: string) => path.join(world.ws, name);

beforeAll(async () => {
  world = await makeWorld('inline');
  policy = path.join(world.base, 'policy.json');
  await fs.writeFile(policy, JSON.stringify({ rules: [{ pattern: '*.env', access: ['write'], decision: 'prompt', reason: 'holds secrets' }] }));
});

afterAll(() => removeWorld(world));

const QUESTION = 'brokered-shell: the command waits for approval:';
const PROMPT = 'Allow? [y/N';

/** What a test does at each question: the answer to type (it may look at the disk first). */
type Answerer = (question: string, index: number) => Promise<string> | string;

interface TerminalRun extends CliRun {
  /** Each question as shown, from its first line to the `[y/N…]` prompt. */
  questions: string[];
}

/**
 * `run` under `script`, which gives it a terminal (its stdin, stdout and stderr are the
 * pty). Each time a new `Allow? [y/N` prompt has appeared, `answer` is asked for the line
 * to type. `exec` leaves no shell between `script` and `run`.
 */
function onTerminal(session: string, command: string, answer: Answerer, options: { cwd?: string; extra?: string[] } = {}): Promise<TerminalRun> {
  const cwd = options.cwd ?? world.ws;
  const line = ['exec', process.execPath, CLI, 'run', '--workspace', cwd, '--session', session, ...(options.extra ?? []), '--', command]
    .map((word) => (word === 'exec' ? word : `'${word.replace(/'/g, `'\\''`)}'`))
    .join(' ');
  return new Promise((resolve, reject) => {
    const child = spawn('script', ['-qec', line, '/dev/null'], { cwd, env: worldEnv(world), stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const questions: string[] = [];
    let answering = Promise.resolve();
    const onOutput = (chunk: Buffer) => {
      out.push(chunk);
      const text = Buffer.concat(out).toString('utf8');
      const shown = text.split(PROMPT).length - 1;
      while (questions.length < shown) {
        const index = questions.length;
        let start = -1;
        for (let n = 0; n <= index; n += 1) start = text.indexOf(QUESTION, start + 1);
        questions.push(text.slice(start, text.indexOf(']', text.indexOf(PROMPT, start)) + 1));
        answering = answering.then(async () => void child.stdin.write(`${await answer(questions[index] ?? '', index)}\n`));
      }
    };
    child.stdout.on('data', onOutput);
    child.stderr.on('data', onOutput);
    child.once('error', reject);
    child.once('close', (status, signal) => {
      const text = Buffer.concat(out).toString('utf8');
      resolve({ status, signal, stdout: Buffer.concat(out), out: text, stderr: text, pid: child.pid ?? -1, questions });
    });
  });
}

const exists = (p: string) => fs.access(p).then(() => true, () => false);
const withPolicy = ['--policy', () => policy] as const;
const policyArgs = () => [withPolicy[0], withPolicy[1]()];

describe('run: a change that needs approval waits while the person is asked', () => {
  it('the command is held at the protected write until answered; a yes lets it through and the command goes on, once', async () => {
    await writeOld(ws('held.env'), 'A=1\n');
    const seenAtQuestion: string[] = [];
    const command = 'echo ran >> held-log.txt; echo A=2 > held.env; echo after >> held-log.txt; echo done';
    const result = await onTerminal('inline-held', command, async () => {
      // What the command does after the held write has not happened yet.
      seenAtQuestion.push(`${await fs.readFile(ws('held-log.txt'), 'utf8')}|${await fs.readFile(ws('held.env'), 'utf8')}`);
      return 'y';
    }, { extra: policyArgs() });
    expect(result.status, describeRun(result)).toBe(0);
    expect(seenAtQuestion).toEqual(['ran\n|A=1\n']);
    expect(result.questions).toHaveLength(1);
    expect(result.questions[0]).toContain(`write ${ws('held.env')} by open`);
    expect(result.questions[0]).toContain('why: ');
    expect(result.questions[0]).toMatch(/Allow\? \[y\/N\/s\]$/);
    // Never run twice: each side effect happened once.
    expect(await fs.readFile(ws('held-log.txt'), 'utf8')).toBe('ran\nafter\n');
    expect(await fs.readFile(ws('held.env'), 'utf8')).toBe('A=2\n');
    expect(result.out.match(/^done\r?$/gm)).toHaveLength(1);
    const turn = await onlyTurn(world, 'inline-held');
    const entry = entryFor(turn, ws('held.env'));
    if (!entry) throw new Error(`held.env was not backed up\n${describeRun(result)}`);
    expect((await blobOf(world, turn, entry)).toString('utf8')).toBe('A=1\n');
  });

  it('a held question holds up only its own path: another process of the command writes elsewhere meanwhile', async () => {
    await writeOld(ws('waiting.env'), 'A=1\n');
    // The first process is held at waiting.env; the second writes elsewhere while the question waits.
    const command = '(echo A=2 > waiting.env) & (sleep 0.2; for i in 1 2 3; do echo $i >> elsewhere.txt; done); wait; echo done';
    const seenAtAnswer: string[] = [];
    const result = await onTerminal('inline-elsewhere', command, async () => {
      for (let tries = 0; tries < 400 && !(await fs.readFile(ws('elsewhere.txt'), 'utf8').catch(() => '')).includes('3'); tries += 1) {
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
      seenAtAnswer.push(await fs.readFile(ws('elsewhere.txt'), 'utf8').catch(() => 'missing'));
      return 'y';
    }, { extra: policyArgs() });
    expect(result.status, describeRun(result)).toBe(0);
    expect(seenAtAnswer).toEqual(['1\n2\n3\n']);
    expect(await fs.readFile(ws('waiting.env'), 'utf8')).toBe('A=2\n');
  });

  it('n: the write gets EACCES, the command goes on, the file is untouched, the status is the command\'s', async () => {
    await writeOld(ws('refused.env'), 'A=1\n');
    const result = await onTerminal('inline-no', 'echo A=2 > refused.env || echo "refused $?"; echo after >> refused-log.txt; exit 4', () => 'n', { extra: policyArgs() });
    expect(result.status, describeRun(result)).toBe(4);
    expect(result.out).toMatch(/refused\.env: Permission denied/);
    expect(result.out).toContain('refused 1');
    expect(result.out).toContain(`brokered-shell: not approved: write ${ws('refused.env')}`);
    expect(await fs.readFile(ws('refused.env'), 'utf8')).toBe('A=1\n');
    expect(await fs.readFile(ws('refused-log.txt'), 'utf8')).toBe('after\n');
  });

  it('--yes with no terminal: approved while the command waits, no rerun: the counter ends with one line', async () => {
    const result = await brokeredShell(world, ['run', '--workspace', world.ws, '--session', 'inline-yes', '--policy', policy, '--yes', '--', 'echo run >> counter.txt; echo A=2 > counter.env; echo ok']);
    expect(result.status, describeRun(result)).toBe(0);
    expect(result.out).toBe('ok\n');
    expect(await fs.readFile(ws('counter.txt'), 'utf8')).toBe('run\n');
    expect(result.stderr).toContain(`brokered-shell: approved for this session: write ${ws('counter.env')}`);
  });

  it('no terminal and neither --yes nor --no: refused at once, listed, exit 77, and the command ran once', async () => {
    const result = await brokeredShell(world, ['run', '--workspace', world.ws, '--session', 'inline-none', '--policy', policy, '--', 'echo run >> once.txt; echo A=2 > none.env; echo ok']);
    expect(result.status, describeRun(result)).toBe(77);
    expect(result.stderr).toContain(`brokered-shell: needs approval: write ${ws('none.env')} by open`);
    expect(await fs.readFile(ws('once.txt'), 'utf8')).toBe('run\n');
    expect(await exists(ws('none.env'))).toBe(false);
  });
});

/** The command natively, for its exit status. */
function nativeStatus(command: string, cwd: string): number | null {
  return spawnSync('bash', ['-c', command], { cwd, stdio: 'ignore' }).status;
}

const GIT = '-c user.name=t -c user.email=t@t -c init.defaultBranch=main';

describe('run: git with inline approvals, a question or two', () => {
  it('git init + add + commit: one question (the new repository), native exit code', async () => {
    const repo = ws('init-repo');
    await fs.mkdir(repo);
    await fs.writeFile(path.join(repo, 'a.txt'), 'a\n');
    const command = `git ${GIT} init -q && git add -A && git ${GIT} commit -qm first && git rev-parse --verify -q HEAD`;
    const result = await onTerminal('inline-git-init', command, (question) => (question.includes('d  yes, and let this command set up the new repository') ? 'd' : 'n'), { cwd: repo });
    const nativeRepo = ws('init-native');
    await fs.mkdir(nativeRepo);
    await fs.writeFile(path.join(nativeRepo, 'a.txt'), 'a\n');
    expect(result.status, describeRun(result)).toBe(nativeStatus(command, nativeRepo));
    expect(result.status).toBe(0);
    expect(result.questions.length).toBeLessThanOrEqual(3);
    expect(result.questions).toHaveLength(1);
    expect(result.out).toMatch(/[0-9a-f]{40}/);
    expect(spawnSync('git', ['-C', repo, 'log', '--format=%s'], { encoding: 'utf8' }).stdout).toBe('first\n');
  });

  it('git clone of a repository with a committed symlink: one question, the symlink checked out as a symlink', async () => {
    const origin = path.join(world.outside, 'origin');
    await fs.mkdir(origin);
    spawnSync('bash', ['-c', `git ${GIT} init -q && echo x > f && ln -s f link && git add -A && git ${GIT} commit -qm c`], { cwd: origin });
    const result = await onTerminal('inline-git-clone', `git clone -q ${origin} cloned && git -C cloned status --porcelain`, (question) => (question.includes('set up the new') ? 'd' : 'n'));
    expect(result.status, describeRun(result)).toBe(0);
    expect(result.questions.length).toBeLessThanOrEqual(3);
    expect((await fs.lstat(ws('cloned/link'))).isSymbolicLink()).toBe(true);
    expect(spawnSync('git', ['-C', ws('cloned'), 'config', 'core.symlinks'], { encoding: 'utf8' }).stdout.trim()).not.toBe('false');
  });

  it('git worktree add in a repository made before: at most three questions, native exit code', async () => {
    const repo = ws('wt-repo');
    await fs.mkdir(repo);
    spawnSync('bash', ['-c', `git ${GIT} init -q && echo x > f && git add -A && git ${GIT} commit -qm c`], { cwd: repo });
    const result = await onTerminal('inline-git-worktree', 'cd wt-repo && git worktree add -q ../wt-tree && git -C ../wt-tree rev-parse --abbrev-ref HEAD', (question) => (question.includes('set up the new') ? 'd' : 'n'));
    expect(result.status, describeRun(result)).toBe(0);
    expect(result.questions.length).toBeLessThanOrEqual(3);
    expect(await fs.readFile(ws('wt-tree/f'), 'utf8')).toBe('x\n');
    // The existing repository's own hooks and config are asked about as before: nothing here offered them.
    for (const question of result.questions) expect(question).not.toContain(`${path.join(repo, '.git')}/config`);
  });

  it('git clone over the network (git daemon on loopback): one question', async () => {
    const served = path.join(world.outside, 'served');
    await fs.mkdir(path.join(served, 'lib'), { recursive: true });
    spawnSync('bash', ['-c', `git ${GIT} init -q && echo l > l && git add -A && git ${GIT} commit -qm l`], { cwd: path.join(served, 'lib') });
    const daemon = await startGitDaemon(served);
    // A server outside the command: the network policy must name it.
    const allowDaemon = path.join(world.base, 'allow-daemon.json');
    await fs.writeFile(allowDaemon, JSON.stringify({ network: { allow: [`127.0.0.1:${daemon.port}`] } }));
    try {
      const result = await onTerminal('inline-git-net', `git clone -q git://127.0.0.1:${daemon.port}/lib netlib && cat netlib/l`, (question) => (question.includes('set up the new') ? 'd' : 'n'), {
        extra: ['--policy', allowDaemon],
      });
      expect(result.status, describeRun(result)).toBe(0);
      expect(result.questions).toHaveLength(1);
      expect(await fs.readFile(ws('netlib/l'), 'utf8')).toBe('l\n');
    } finally {
      daemon.stop();
    }
  });

  it('git submodule update --init: at most three questions (the repository\'s own config is asked, as before)', async () => {
    const parts = path.join(world.outside, 'parts');
    await fs.mkdir(path.join(parts, 'lib'), { recursive: true });
    await fs.mkdir(path.join(parts, 'app'));
    spawnSync('bash', ['-c', `git ${GIT} init -q && echo l > l && git add -A && git ${GIT} commit -qm l`], { cwd: path.join(parts, 'lib') });
    spawnSync('bash', ['-c', `git ${GIT} init -q && git -c protocol.file.allow=always submodule add -q ../lib lib && git ${GIT} commit -qm app`], { cwd: path.join(parts, 'app') });
    spawnSync('git', ['clone', '-q', path.join(parts, 'app'), ws('with-sub')]);
    const result = await onTerminal('inline-git-sub', 'cd with-sub && git -c protocol.file.allow=always submodule update --init -q && cat lib/l', (question) => (question.includes('set up the new') ? 'd' : 's'));
    expect(result.status, describeRun(result)).toBe(0);
    expect(result.questions.length, result.out).toBeLessThanOrEqual(3);
    expect(result.questions.some((question) => question.includes(`write ${ws('with-sub/.git/config')}`))).toBe(true);
    expect(await fs.readFile(ws('with-sub/lib/l'), 'utf8')).toBe('l\n');
  });
});

/** `git daemon` serving `base` on a free loopback port, accepting once this resolves. */
async function startGitDaemon(base: string): Promise<{ port: number; stop: () => void }> {
  for (let attempt = 0; attempt < 20; attempt += 1) {
    const port = 20_000 + Math.floor(Math.random() * 20_000);
    const child = spawn('git', ['daemon', '--export-all', `--base-path=${base}`, '--listen=127.0.0.1', `--port=${port}`, '--reuseaddr', base], { stdio: 'ignore' });
    const stop = () => void child.kill('SIGTERM');
    for (let wait = 0; wait < 50; wait += 1) {
      if (child.exitCode !== null) break;
      if (await accepts(port)) return { port, stop };
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    stop();
  }
  throw new Error('git daemon did not start');
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port }, () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}
