/**
 * Approvals asked after the command (`approvals: "after"`, the reference's flow; the
 * inline default is in inline-approval.test.ts): a `prompt` rule on a workspace file refuses the sandboxed attempt and
 * records prompt blocks; the approver is asked once with all of them; approved, the
 * paths are granted for the session and the command runs again brokered, in the same
 * turn, so the change is backed up; what the rerun newly needs is asked in a next round
 * (up to `maxApprovalRounds`); denied, the result of the last run stands. Grants are
 * reused within a session and never across sessions.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { PromptBlock } from '../../src/plugins/approval/index.js';
import { exists, makeWorld, openSession, read, recordingApprover, savedBytes, turnById, type World } from './helpers.js';

const after = { approvals: 'after' as const };
const config = { ...after, fileSafety: { rules: [{ pattern: 'ask*.txt', decision: 'prompt' as const, reason: 'asks first' }] } };

async function prepare(prefix: string): Promise<World> {
  const world = await makeWorld(prefix);
  await fs.writeFile(path.join(world.ws, 'ask.txt'), 'original\n');
  await fs.writeFile(path.join(world.ws, 'ask-gone.txt'), 'to delete\n');
  return world;
}

const pathsOf = (blocks: readonly PromptBlock[]) => blocks.map((b) => `${b.access} ${path.basename(b.normalisedPath)}`).sort();

describe('approval of prompt blocks', () => {
  it('approved: one question for every block, then the command runs again brokered and the change is backed up in the turn', async () => {
    const world = await prepare('approve');
    const approver = recordingApprover(true);
    const { session } = await openSession(world, { config, approver, maxApprovalRounds: 1 });
    const turn = await session.beginTurn({ userMessage: 'change the guarded files' });
    const result = await session.execute('echo changed > ask.txt && rm ask-gone.txt && echo done', { toolCallId: 'call-1' });

    expect(approver.requests).toHaveLength(1);
    const [request] = approver.requests;
    expect(request?.kind).toBe('paths');
    if (request?.kind !== 'paths') throw new Error('expected a paths request');
    // The first attempt stopped at the first refusal: only ask.txt was asked about.
    expect(pathsOf(request.blocks)).toEqual(['write ask.txt']);
    expect(request.command).toBe('echo changed > ask.txt && rm ask-gone.txt && echo done');

    // The rerun reached the delete, which needs its own approval: one round allowed, so it is returned.
    expect(result).toMatchObject({ sandboxed: true, approval: { asked: true, approved: true, rerun: true, rounds: 1 } });
    expect(pathsOf(result.promptBlocks)).toEqual(['delete ask-gone.txt']);
    expect(await read(path.join(world.ws, 'ask.txt'))).toBe('changed\n');
    expect(await exists(path.join(world.ws, 'ask-gone.txt'))).toBe(true);
    expect(result.backups.map((b) => path.basename(b.path))).toEqual(['ask.txt']);
    expect(session.grants.map((g) => `${g.access} ${path.basename(g.path)}`)).toEqual(['write ask.txt']);

    const ended = await session.endTurn();
    expect(ended).toMatchObject({ ok: true, turnId: turn.turnId, files: 1 });
    const manifest = await turnById(world, session.sessionId, turn.turnId);
    expect(await savedBytes(world, manifest, path.join(world.ws, 'ask.txt'))).toBe('original\n');
  });

  it('a rerun that needs more asks again, about the new paths only, until nothing is left', async () => {
    const world = await prepare('rounds');
    const approver = recordingApprover(true);
    const { session } = await openSession(world, { config, approver });
    const turn = await session.beginTurn({ userMessage: 'one after the other' });
    const result = await session.execute('echo changed > ask.txt && rm -f ask-gone.txt && echo new > ask-new.txt && echo done', { toolCallId: 'call-rounds' });

    const asked = approver.requests.map((request) => (request.kind === 'paths' ? [request.round, pathsOf(request.blocks)] : []));
    expect(asked).toEqual([
      [1, ['write ask.txt']],
      [2, ['delete ask-gone.txt']],
      [3, ['write ask-new.txt']],
    ]);
    expect(result).toMatchObject({ exitCode: 0, stdout: 'done\n', promptBlocks: [], approval: { asked: true, approved: true, rerun: true, rounds: 3 } });
    expect(pathsOf(result.approval?.blocks ?? [])).toEqual(['delete ask-gone.txt', 'write ask-new.txt', 'write ask.txt']);
    expect(await read(path.join(world.ws, 'ask.txt'))).toBe('changed\n');
    expect(await exists(path.join(world.ws, 'ask-gone.txt'))).toBe(false);
    expect(await read(path.join(world.ws, 'ask-new.txt'))).toBe('new\n');
    await session.endTurn();
    const manifest = await turnById(world, session.sessionId, turn.turnId);
    expect(await savedBytes(world, manifest, path.join(world.ws, 'ask.txt'))).toBe('original\n');
    expect(await savedBytes(world, manifest, path.join(world.ws, 'ask-gone.txt'))).toBe('to delete\n');
  });

  it('a later round refused: what was approved stands, the refused path is untouched and returned', async () => {
    const world = await prepare('rounds-no');
    const approver = recordingApprover([true, false]);
    const { session } = await openSession(world, { config, approver });
    const result = await session.execute('echo changed > ask.txt && rm ask-gone.txt && echo done');
    expect(approver.requests).toHaveLength(2);
    expect(result).toMatchObject({ exitCode: 1, approval: { asked: true, approved: false, rerun: true, rounds: 2 } });
    expect(pathsOf(result.promptBlocks)).toEqual(['delete ask-gone.txt']);
    expect(await read(path.join(world.ws, 'ask.txt'))).toBe('changed\n');
    expect(await read(path.join(world.ws, 'ask-gone.txt'))).toBe('to delete\n');
    expect(session.grants.map((g) => `${g.access} ${path.basename(g.path)}`)).toEqual(['write ask.txt']);
  });

  it('never asks twice about a path its grant cannot lift; it is returned with what is left', async () => {
    const world = await prepare('rounds-stuck');
    await fs.mkdir(path.join(world.ws, 'guarded'));
    await fs.writeFile(path.join(world.ws, 'guarded', 'inside.txt'), 'inside\n');
    const rules = [...config.fileSafety.rules, { pattern: 'guarded', decision: 'prompt' as const, reason: 'guarded' }];
    const approver = recordingApprover(true);
    const { session } = await openSession(world, { config: { ...after, fileSafety: { rules } }, approver });
    const result = await session.execute('mv guarded moved; echo 1 > ask-1.txt && echo 2 > ask-2.txt');
    const asked = approver.requests.map((request) => (request.kind === 'paths' ? [request.round, pathsOf(request.blocks)] : []));
    expect(asked).toEqual([
      [1, ['delete guarded', 'write ask-1.txt']],
      [2, ['write ask-2.txt']],
    ]);
    expect(pathsOf(result.promptBlocks)).toEqual(['delete guarded']);
    expect(await read(path.join(world.ws, 'ask-2.txt'))).toBe('2\n');
    expect(await read(path.join(world.ws, 'guarded', 'inside.txt'))).toBe('inside\n');
  });

  it('stops after maxApprovalRounds: what is left is returned, unchanged', async () => {
    const world = await prepare('rounds-cap');
    const approver = recordingApprover(true);
    const { session } = await openSession(world, { config, approver, maxApprovalRounds: 2 });
    const result = await session.execute('echo a > ask-1.txt && echo b > ask-2.txt && echo c > ask-3.txt');
    expect(approver.requests).toHaveLength(2);
    expect(result.approval).toMatchObject({ approved: true, rounds: 2 });
    expect(pathsOf(result.promptBlocks)).toEqual(['write ask-3.txt']);
    expect(await exists(path.join(world.ws, 'ask-2.txt'))).toBe(true);
    expect(await exists(path.join(world.ws, 'ask-3.txt'))).toBe(false);
  });

  it('refuses a maxApprovalRounds that is not a whole number of at least 1', async () => {
    const world = await prepare('rounds-bad');
    await expect(openSession(world, { config, maxApprovalRounds: 0 })).rejects.toThrow(/session options are invalid:\n  maxApprovalRounds: Too small: expected number to be >=1/);
  });

  it('approved with every block met in one attempt: exit 0, nothing left to approve', async () => {
    const world = await prepare('approve-all');
    const approver = recordingApprover(true);
    const { session } = await openSession(world, { config, approver });
    await session.beginTurn({ userMessage: 'both' });
    const result = await session.execute('echo a > ask.txt; rm -f ask-gone.txt; echo end', { toolCallId: 'call-all' });
    expect(approver.requests).toHaveLength(1);
    const [request] = approver.requests;
    if (request?.kind !== 'paths') throw new Error('expected a paths request');
    expect(pathsOf(request.blocks)).toEqual(['delete ask-gone.txt', 'write ask.txt']);
    expect(result).toMatchObject({ exitCode: 0, promptBlocks: [], approval: { approved: true, rerun: true } });
    expect(result.stdout).toBe('end\n');
    expect(await exists(path.join(world.ws, 'ask-gone.txt'))).toBe(false);
    expect(result.backups.map((b) => path.basename(b.path)).sort()).toEqual(['ask-gone.txt', 'ask.txt']);
  });

  it('denied: the sandboxed attempt stands, the file is untouched and nothing is backed up', async () => {
    const world = await prepare('deny');
    const approver = recordingApprover(false);
    const { session } = await openSession(world, { config, approver });
    const turn = await session.beginTurn({ userMessage: 'try' });
    const result = await session.execute('echo changed > ask.txt; echo "status $?"');
    expect(approver.requests).toHaveLength(1);
    expect(result).toMatchObject({ exitCode: 0, approval: { asked: true, approved: false, rerun: false } });
    expect(result.stdout).toBe('status 1\n');
    expect(result.stderr).toMatch(/ask\.txt: Permission denied/);
    expect(pathsOf(result.promptBlocks)).toEqual(['write ask.txt']);
    expect(result.backups).toEqual([]);
    expect(await read(path.join(world.ws, 'ask.txt'))).toBe('original\n');
    expect(session.grants).toEqual([]);
    await session.endTurn();
    expect((await turnById(world, session.sessionId, turn.turnId)).files).toEqual([]);
  });

  it('no approver: the blocks are returned, nobody is asked', async () => {
    const world = await prepare('no-approver');
    const { session } = await openSession(world, { config });
    const result = await session.execute('echo changed > ask.txt');
    expect(result).toMatchObject({ exitCode: 1, approval: { asked: false, approved: false, rerun: false } });
    expect(pathsOf(result.promptBlocks)).toEqual(['write ask.txt']);
    expect(await read(path.join(world.ws, 'ask.txt'))).toBe('original\n');
  });

  it('an approver that throws denies', async () => {
    const world = await prepare('throws');
    const { session, logLines } = await openSession(world, {
      config,
      approver: () => {
        throw new Error('the dialog crashed');
      },
    });
    const result = await session.execute('echo changed > ask.txt');
    expect(result.approval).toMatchObject({ asked: true, approved: false });
    expect(await read(path.join(world.ws, 'ask.txt'))).toBe('original\n');
    expect(logLines().some((line) => line.phase === 'approval' && line.level === 50)).toBe(true);
  });
});

describe('grants', () => {
  it('are reused within the session: a second call on the same path asks nobody', async () => {
    const world = await prepare('reuse');
    const approver = recordingApprover(true);
    const { session } = await openSession(world, { config, approver });
    await session.beginTurn({ userMessage: 'first' });
    await session.execute('echo one > ask.txt');
    expect(approver.requests).toHaveLength(1);
    await session.endTurn();

    const turn = await session.beginTurn({ userMessage: 'second' });
    const again = await session.execute('echo two > ask.txt', { toolCallId: 'again' });
    expect(approver.requests).toHaveLength(1);
    expect(again).toMatchObject({ exitCode: 0, promptBlocks: [] });
    expect(again.approval).toBeUndefined();
    expect(await read(path.join(world.ws, 'ask.txt'))).toBe('two\n');
    // A grant lifts the prompt, not the backup.
    expect(again.backups).toEqual([expect.objectContaining({ path: path.join(world.ws, 'ask.txt'), toolCallId: 'again', turnId: turn.turnId })]);
  });

  it('are not carried to another session: it asks again', async () => {
    const world = await prepare('across');
    const first = recordingApprover(true);
    const one = await openSession(world, { config, approver: first, sessionId: 'first-session' });
    await one.session.execute('echo one > ask.txt');
    expect(first.requests).toHaveLength(1);
    await one.session.close();

    const second = recordingApprover(false);
    const two = await openSession(world, { config, approver: second, sessionId: 'second-session' });
    const result = await two.session.execute('echo two > ask.txt');
    expect(second.requests).toHaveLength(1);
    expect(result.approval).toMatchObject({ asked: true, approved: false });
    expect(await read(path.join(world.ws, 'ask.txt'))).toBe('one\n');
    expect(two.session.grants).toEqual([]);
  });
});

describe('a yes covers the operation the person was asked about', () => {
  it.each([
    ['a directory moved in', 'mkdir -p prep/hooks && printf "#!/bin/sh\\necho ran\\n" > prep/hooks/pre-commit && chmod +x prep/hooks/pre-commit && mkdir -p .git && mv -T prep .git', 'rename'],
    // The broker calls a symlink's creation a link (to: the new name).
    ['a symlink made instead', 'mkdir -p prep/hooks && if [ -e .rerun ]; then ln -s prep .git; else touch .rerun; mkdir .git; fi', 'link'],
  ])('approving mkdir .git does not let the rerun put %s there', async (_label, command, operation) => {
    await expectOnlyFirstApproved(command, 'write .git mkdir', `write .git ${operation}${operation === 'rename' ? ' directory' : ''}`);
  });

  it('approving an empty directory moved onto .git does not let the rerun move a link there', async () => {
    const command = 'if [ ! -e .rerun ]; then touch .rerun; mkdir e; mv e .git; exit 0; fi; mkdir -p x/hooks; ln -s x y; mv y .git';
    await expectOnlyFirstApproved(command, 'write .git rename directory', 'write .git rename symlink');
  });

  /** The person says yes to the first question only; the second must be asked, and nothing is planted. */
  async function expectOnlyFirstApproved(command: string, first: string, second: string): Promise<void> {
    const world = await makeWorld('approve-operation');
    // The person approves the empty directory they were asked about, and nothing else.
    const approver = recordingApprover([true, false]);
    const { session } = await openSession(world, { config: after, approver, maxApprovalRounds: 3 });
    await session.beginTurn({ userMessage: 'make .git' });
    const result = await session.execute(command);
    const asked = approver.requests.map((r) =>
      r.kind === 'paths' ? r.blocks.map((b) => `${b.access} ${path.basename(b.normalisedPath)} ${b.operation}${b.sourceKind ? ` ${b.sourceKind}` : ''}`) : [],
    );
    expect(asked).toEqual([[first], [second]]);
    expect(result.approval).toMatchObject({ approved: false, rounds: 2 });
    // No hooks arrived: .git is the empty directory that was approved, or not there at all.
    const made = await fs.lstat(path.join(world.ws, '.git')).catch(() => undefined);
    if (made) {
      expect(made.isDirectory()).toBe(true);
      expect(await fs.readdir(path.join(world.ws, '.git'))).toEqual([]);
    }
    expect(await exists(path.join(world.ws, '.git', 'hooks', 'pre-commit'))).toBe(false);
    expect((await fs.lstat(path.join(world.ws, '.git')).catch(() => undefined))?.isSymbolicLink() ?? false).toBe(false);
  }
});
