/**
 * The library's whole loop, with no other module: refusals with reasons in the result,
 * output streamed while the command runs, and the session's own turns listed, diffed,
 * restored and the restore undone.
 */
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { makeWorld, openSession, recordingApprover } from './helpers.js';

const config = { fileSafety: { rules: [{ pattern: 'ask*.txt', decision: 'prompt' as const, reason: 'asks first' }] } };

describe('ExecuteResult.refusals', () => {
  it('names each denial with its reason and the real config file, and each prompt with its answer', async () => {
    const world = await makeWorld('refusals');
    await fs.writeFile(path.join(world.outside, 'b'), 'keep\n');
    const { session } = await openSession(world, { config, approver: recordingApprover(false) });
    const result = await session.execute('echo x > "$OUT/a"; rm -f "$OUT/b"; echo {} > ask1.txt; echo ok > fine.txt');
    expect(result.exitCode).toBe(0);
    expect(result.refusals).toEqual([
      {
        kind: 'denied',
        access: 'write',
        path: path.join(world.outside, 'a'),
        operation: expect.any(String),
        reason: expect.stringContaining(`in ${path.join(world.home, 'config.json')} would allow it`),
      },
      { kind: 'denied', access: 'delete', path: path.join(world.outside, 'b'), operation: 'delete', reason: expect.stringContaining('is outside the writable roots') },
      { kind: 'not-approved', access: 'write', path: path.join(world.ws, 'ask1.txt'), operation: 'open', reason: 'asks first' },
    ]);
    expect(await fs.readFile(path.join(world.outside, 'b'), 'utf8')).toBe('keep\n');
    expect(existsSync(path.join(world.ws, 'ask1.txt'))).toBe(false);
    expect(result.unlistedRefusals).toBe(0);
    expect(await fs.readFile(path.join(world.ws, 'fine.txt'), 'utf8')).toBe('ok\n');
  });

  it('needs-approval when nobody could be asked', async () => {
    const world = await makeWorld('refusals-unasked');
    const { session } = await openSession(world, { config });
    const result = await session.execute('echo {} > ask2.txt');
    expect(result.refusals).toEqual([{ kind: 'needs-approval', access: 'write', path: path.join(world.ws, 'ask2.txt'), operation: 'open', reason: 'asks first' }]);
  });

  it('lists 20 denials by name and counts the rest', async () => {
    const world = await makeWorld('refusals-many');
    const { session } = await openSession(world);
    const result = await session.execute('for i in $(seq 1 25); do echo x > "$OUT/f$i" 2>/dev/null; done; true');
    expect(result.refusals).toHaveLength(20);
    expect(result.unlistedRefusals).toBe(5);
  });
});

describe('output streaming', () => {
  it('gives each chunk while the command runs, and still returns the whole output', async () => {
    const world = await makeWorld('stream');
    const { session } = await openSession(world);
    const out: string[] = [];
    const err: string[] = [];
    // The command waits for the file that onStdout writes on its first chunk: it can only go on if the chunk came while it ran.
    const gate = path.join(world.ws, 'gate');
    const result = await session.execute(`echo first; while [ ! -e gate ]; do sleep 0.05; done; echo second; echo oops >&2`, {
      timeoutMs: 20_000,
      onStdout: (chunk) => {
        out.push(chunk.toString('utf8'));
        if (out.length === 1) void fs.writeFile(gate, '');
      },
      onStderr: (chunk) => err.push(chunk.toString('utf8')),
    });
    expect(result.timedOut).toBe(false);
    expect(out.join('')).toBe('first\nsecond\n');
    expect(out[0]).toBe('first\n');
    expect(err.join('')).toBe('oops\n');
    expect(result.stdout).toBe('first\nsecond\n');
  });

  it('a callback that throws does not stop the command or its output', async () => {
    const world = await makeWorld('stream-throw');
    const { session } = await openSession(world);
    const result = await session.execute('echo one; echo two', {
      onStdout: () => {
        throw new Error('the UI is gone');
      },
    });
    expect(result).toMatchObject({ exitCode: 0, stdout: 'one\ntwo\n' });
  });
});

describe("the session's turns", () => {
  it('lists, diffs and restores its own turns, and undoLast undoes the restore', async () => {
    const world = await makeWorld('history');
    const file = path.join(world.ws, 'notes.txt');
    const gone = path.join(world.ws, 'old.bin');
    const bytes = Buffer.from([0, 1, 2, 255, 10]);
    await fs.writeFile(file, 'v1\n');
    await fs.writeFile(gone, bytes);
    const { session } = await openSession(world);
    await session.beginTurn({ userMessage: 'edit, delete, create' });
    await session.execute('echo v2 > notes.txt; rm old.bin; echo new > made.txt');
    // No endTurn: restore commits the open turn, so `latest` is the turn just run.
    expect(session.turn?.userMessage).toBe('edit, delete, create');

    const report = await session.restore('latest');
    expect(report.conflicts).toEqual([]);
    expect(await fs.readFile(file, 'utf8')).toBe('v1\n');
    expect(await fs.readFile(gone)).toEqual(bytes);
    expect(existsSync(path.join(world.ws, 'made.txt'))).toBe(false);
    expect(report.rescueTurnId).toBeDefined();

    const turns = await session.turns();
    expect(turns.map((t) => t.kind)).toEqual(['turn', 'restore']);
    expect(turns[0]?.message).toBe('edit, delete, create');
    expect(turns.every((t) => t.sessionId === session.sessionId)).toBe(true);

    const diff = await session.diff(turns[0]?.id ?? '', { path: file });
    expect(diff.files).toHaveLength(1);
    // Restored: the file is as before the turn, so the diff from its backup is empty of changes.
    expect(diff.files[0]?.diff).not.toContain('+v2');

    const undone = await session.undoLast();
    expect(undone.turnId).toBe(report.rescueTurnId);
    expect(await fs.readFile(file, 'utf8')).toBe('v2\n');
    expect(existsSync(gone)).toBe(false);
    expect(await fs.readFile(path.join(world.ws, 'made.txt'), 'utf8')).toBe('new\n');
  });

  it('diff of the latest turn shows each change; a turn of another session is not found', async () => {
    const world = await makeWorld('history-diff');
    await fs.writeFile(path.join(world.ws, 'a.txt'), 'before\n');
    const { session: other } = await openSession(world);
    await other.execute('echo other > other.txt');
    await other.endTurn();
    const { session } = await openSession(world);
    await session.execute('echo after > a.txt');
    await session.endTurn();
    const diff = await session.diff('latest');
    expect(diff.files.map((f) => path.basename(f.path))).toEqual(['a.txt']);
    expect(diff.files[0]?.diff).toContain('-before');
    expect(diff.files[0]?.diff).toContain('+after');
    const foreign = (await other.turns())[0]?.id ?? '';
    await expect(session.diff(foreign)).rejects.toMatchObject({ code: 'BSH_TURN_NOT_FOUND' });
    expect((await session.turns()).map((t) => t.id)).not.toContain(foreign);
  });

  it('rewind undoes a turn and every later one of the session', async () => {
    const world = await makeWorld('history-rewind');
    const file = path.join(world.ws, 'f.txt');
    await fs.writeFile(file, 'v0\n');
    const { session } = await openSession(world);
    for (const v of ['v1', 'v2', 'v3']) {
      await session.execute(`echo ${v} > f.txt`);
      await session.endTurn();
    }
    const [first] = await session.turns();
    const report = await session.rewind(first?.id ?? '');
    expect(report.complete).toBe(true);
    expect(report.turns).toHaveLength(3);
    expect(await fs.readFile(file, 'utf8')).toBe('v0\n');
  });
});
