/**
 * Turns: the commit message made from the user's message; a store that cannot be used
 * at the start of a turn (backup off for the turn, logged, commands still run under the
 * policy — or, with `deny-changes`, changes to existing files refused); a commit that
 * fails (ok: false, no throw; the next turn continues the uncommitted one).
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { commitMessageFrom } from '../../src/agent/commit-message.js';
import { sessionBackupDir } from '../../src/backup/layout.js';
import { makeWorld, openSession, read, savedBytes, turnById, turnsOf } from './helpers.js';

describe('commit message', () => {
  it.each<[string, string, string]>([
    ['short', 'fix the build', 'fix the build'],
    ['first line only, whitespace collapsed', '  fix   the\tbuild  \nand also the docs\n', 'fix the build'],
    ['first non-blank line', '\n\n   \nsecond line wins\nthird', 'second line wins'],
    ['empty', '', '(no message)'],
    ['blank', ' \n\t\n', '(no message)'],
    ['exactly 72', 'x'.repeat(72), 'x'.repeat(72)],
    ['long: 72 with the ellipsis', `${'word '.repeat(30)}end`, `${'word '.repeat(14)}w…`],
    ['cut at a character, not a byte', 'é'.repeat(80), `${'é'.repeat(71)}…`],
  ])('%s', (_label, input, expected) => {
    const message = commitMessageFrom(input);
    expect(message).toBe(expected);
    expect([...message].length).toBeLessThanOrEqual(72);
  });

  it('is what the turn is committed with (long, multi-line and empty messages)', async () => {
    const world = await makeWorld('messages');
    await fs.writeFile(path.join(world.ws, 'f.txt'), 'v0\n');
    const { session } = await openSession(world);
    const messages = [`Please refactor ${'the module '.repeat(10)}\nwith details on a second line`, 'line one\nline two', ''];
    const expected: string[] = [];
    for (const [index, userMessage] of messages.entries()) {
      await session.beginTurn({ userMessage });
      await session.execute(`echo v${index + 1} > f.txt`);
      const ended = await session.endTurn();
      expect(ended.ok).toBe(true);
      expected.push(ended.message);
    }
    expect(expected).toEqual([commitMessageFrom(messages[0] ?? ''), 'line one', '(no message)']);
    expect(expected[0]).toMatch(/^Please refactor the module .*…$/);
    const turns = await turnsOf(world, session.sessionId);
    expect(turns.map((t) => t.message)).toEqual(expected);
    expect(turns.every((t) => t.files.length === 1)).toBe(true);
  });

  it('an explicit message is used as is', async () => {
    const world = await makeWorld('explicit');
    const { session } = await openSession(world);
    await session.beginTurn({ userMessage: 'ignored' });
    const ended = await session.endTurn({ message: 'exactly\nthis' });
    expect(ended).toMatchObject({ ok: true, message: 'exactly\nthis' });
    expect((await turnsOf(world, session.sessionId)).map((t) => t.message)).toEqual(['exactly\nthis']);
  });

  it('ending with no open turn says so', async () => {
    const world = await makeWorld('no-turn');
    const { session } = await openSession(world);
    expect(await session.endTurn()).toEqual({ ok: false, files: 0, message: '(no message)', error: 'no turn is open' });
  });

  it('a call outside any turn opens one; a new turn commits the open one first', async () => {
    const world = await makeWorld('implicit');
    await fs.writeFile(path.join(world.ws, 'f.txt'), 'before\n');
    const { session } = await openSession(world);
    const result = await session.execute('echo after > f.txt');
    expect(result.turnId).toBeDefined();
    expect(session.turn?.turnId).toBe(result.turnId);
    const next = await session.beginTurn({ userMessage: 'next' });
    expect(next.turnId).not.toBe(result.turnId);
    const [first] = await turnsOf(world, session.sessionId);
    expect(first).toMatchObject({ id: result.turnId, message: '(no message)' });
    expect(first?.committedAt).not.toBeNull();
  });
});

describe('a store that cannot be used when the turn begins', () => {
  it('backup is off for the turn, said in the turn info and the log; commands still run under the policy', async () => {
    const world = await makeWorld('no-store');
    const notADir = path.join(world.base, 'home-is-a-file');
    await fs.writeFile(notADir, 'not a directory\n');
    await fs.writeFile(path.join(world.ws, 'kept.txt'), 'kept\n');
    await fs.writeFile(path.join(world.ws, 'secret.txt'), 'secret\n');
    const { session, logLines } = await openSession(world, {
      home: notADir,
      config: { fileSafety: { rules: [{ pattern: 'secret.txt', decision: 'deny' }] } },
    });
    const turn = await session.beginTurn({ userMessage: 'no store' });
    expect(turn.backup.enabled).toBe(false);
    expect(turn.backup.refusesChanges).toBeUndefined();
    expect(turn.backup.reason).toMatch(/^file backup is off for this turn: it cannot be enabled \(.*backup store unavailable: .*ENOTDIR/);
    const warned = logLines().find((line) => line.phase === 'turn' && line.level === 40);
    expect(warned).toMatchObject({ turnId: turn.turnId, msg: turn.backup.reason });

    const result = await session.execute('echo changed > kept.txt; echo "kept $?"; echo x > secret.txt; echo "secret $?"');
    expect(result.stdout).toBe('kept 0\nsecret 1\n');
    expect(result.backups).toEqual([]);
    expect(await read(path.join(world.ws, 'kept.txt'))).toBe('changed\n');
    expect(await read(path.join(world.ws, 'secret.txt'))).toBe('secret\n');
    expect(await session.endTurn()).toMatchObject({ ok: true, files: 0 });
  });

  it("with storeUnavailable 'deny-changes': changes to existing files are refused, new files are made", async () => {
    const world = await makeWorld('no-store-deny');
    const notADir = path.join(world.base, 'home-is-a-file');
    await fs.writeFile(notADir, 'not a directory\n');
    await fs.writeFile(path.join(world.ws, 'kept.txt'), 'kept\n');
    const { session } = await openSession(world, { home: notADir, storeUnavailable: 'deny-changes' });
    const turn = await session.beginTurn({ userMessage: 'no store' });
    expect(turn.backup).toMatchObject({ enabled: false, refusesChanges: true });
    const result = await session.execute('echo changed > kept.txt; echo "kept $?"; echo new > fresh.txt; echo "fresh $?"');
    expect(result.stdout).toBe('kept 1\nfresh 0\n');
    expect(await read(path.join(world.ws, 'kept.txt'))).toBe('kept\n');
    expect(await read(path.join(world.ws, 'fresh.txt'))).toBe('new\n');
  });
});

describe('a commit that fails', () => {
  it('returns ok: false without throwing, logs it, and the next turn continues the uncommitted one', async () => {
    const world = await makeWorld('commit-fails');
    const file = path.join(world.ws, 'f.txt');
    await fs.writeFile(file, 'original\n');
    const { session, logLines } = await openSession(world, { sessionId: 'commit-fails' });
    const turn = await session.beginTurn({ userMessage: 'will not commit' });
    const result = await session.execute('echo changed > f.txt');
    expect(result.backups.map((b) => b.path)).toEqual([file]);

    // Break the store between begin and end: its directory is replaced by a file.
    const storeDir = sessionBackupDir(world.home, 'commit-fails');
    await fs.rename(storeDir, `${storeDir}.away`);
    await fs.writeFile(storeDir, 'in the way\n');
    const ended = await session.endTurn();
    expect(ended).toMatchObject({ ok: false, turnId: turn.turnId, files: 0, message: 'will not commit' });
    expect(ended.error).toMatch(/ENOTDIR|not a directory/);
    expect(logLines().some((line) => line.phase === 'turn' && line.level === 50 && line.turnId === turn.turnId)).toBe(true);

    // Repaired, the next turn carries on with the same id and its backup, and commits.
    await fs.rm(storeDir);
    await fs.rename(`${storeDir}.away`, storeDir);
    const next = await session.beginTurn({ userMessage: 'second try' });
    expect(next).toMatchObject({ turnId: turn.turnId, continued: true });
    const committed = await session.endTurn();
    expect(committed).toMatchObject({ ok: true, turnId: turn.turnId, files: 1 });
    const manifest = await turnById(world, 'commit-fails', turn.turnId);
    expect(await savedBytes(world, manifest, file)).toBe('original\n');
  });
});
