/**
 * Rewind: a session's files back to before one of its turns, by restoring that turn
 * and each later one, newest first, through the CLI's restore. It stops at the first
 * turn with conflicts; force (asked for explicitly) goes on from there.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { RewindReport } from '../../src/backup/index.js';
import type { TurnSummary } from '../../src/ui/views.js';
import { makeTurn, tempDir, writeOld } from '../cli/helpers.js';
import { startViewer, type Viewer } from './helpers.js';

const SESSION = 'sess-rewind';
const T1 = '20260503-090000-111111';
const T2 = '20260503-100000-222222';
const T3 = '20260503-110000-333333';
let home: string;
let work: string;
let viewer: Viewer;
const at = (name: string) => path.join(work, name);
const read = (name: string) => fs.readFile(at(name), 'utf8').catch(() => '(absent)');

/**
 * T1 writes a.txt v1→v2; T2 writes a.txt v2→v3 and deletes b.txt; T3 writes a.txt v3→v4
 * and c.txt. Another session's turn touches d.txt and must never be rewound.
 */
beforeEach(async () => {
  home = await tempDir('bsh-ui-home-');
  work = await tempDir('bsh-ui-work-');
  await writeOld(at('a.txt'), 'v1\n');
  await writeOld(at('b.txt'), 'b\n');
  await writeOld(at('c.txt'), 'c1\n');
  await writeOld(at('d.txt'), 'd1\n');
  const turn = (turnId: string, hour: string, names: string[], change: () => Promise<void>) =>
    makeTurn({
      home,
      sessionId: SESSION,
      turnId,
      message: `turn at ${hour}`,
      at: `2026-05-03T${hour}:00:00.000Z`,
      backups: names.map((name) => ({ path: at(name), operation: 'open' })),
      change,
    });
  await turn(T1, '09', ['a.txt'], () => fs.writeFile(at('a.txt'), 'v2\n'));
  await turn(T2, '10', ['a.txt', 'b.txt'], async () => {
    await fs.writeFile(at('a.txt'), 'v3\n');
    await fs.unlink(at('b.txt'));
  });
  await makeTurn({
    home,
    sessionId: 'other-session',
    turnId: '20260503-103000-444444',
    message: 'elsewhere',
    at: '2026-05-03T10:30:00.000Z',
    backups: [{ path: at('d.txt'), operation: 'open' }],
    change: () => fs.writeFile(at('d.txt'), 'd2\n'),
  });
  await turn(T3, '11', ['a.txt', 'c.txt'], async () => {
    await fs.writeFile(at('a.txt'), 'v4\n');
    await fs.writeFile(at('c.txt'), 'c2\n');
  });
  viewer = await startViewer(home);
});

afterEach(async () => {
  await viewer.server.close();
});

const planned = async (turn: string) => viewer.json<{ turns: TurnSummary[] }>(await viewer.get(`/api/rewind-plan?session=${SESSION}&turn=${turn}`)).turns.map((t) => t.id);

/** As the page does it: the plan first, then the rewind of the turns it listed. */
const rewind = async (turn: string, force?: boolean) =>
  viewer.json<RewindReport>(await viewer.post('/api/rewind', { session: SESSION, turn, turns: await planned(turn), ...(force === undefined ? {} : { force }) }));

describe('rewind', () => {
  it('plans the turn and every later turn of its session, newest first', async () => {
    const { turns } = viewer.json<{ turns: TurnSummary[] }>(await viewer.get(`/api/rewind-plan?session=${SESSION}&turn=${T2}`));
    expect(turns.map((t) => t.id)).toEqual([T3, T2]);
  });

  it('puts every file back as it was before the turn, leaving other sessions alone', async () => {
    const result = await rewind(T2);
    expect(result.complete).toBe(true);
    expect(result.to).toBe(T2);
    expect(result.turns.map((t) => t.turnId)).toEqual([T3, T2]);
    // One rescue turn for the whole rewind.
    expect(result.rescueTurnId).toMatch(/^\d{8}-\d{6}-[0-9a-f]{6}$/);
    expect(new Set(result.turns.map((t) => t.rescueTurnId))).toEqual(new Set([result.rescueTurnId]));
    expect(await read('a.txt')).toBe('v2\n');
    expect(await read('b.txt')).toBe('b\n');
    expect(await read('c.txt')).toBe('c1\n');
    expect(await read('d.txt')).toBe('d2\n');
    // Again, it changes nothing: T3's a.txt is no longer as T3 left it (T2's restore moved it on).
    const again = await rewind(T2);
    expect(again.stoppedAt).toBe(T3);
    expect(again.turns.flatMap((t) => t.restored)).toEqual([]);
    expect(await read('a.txt')).toBe('v2\n');
  });

  it('stops before a turn with conflicts, changing nothing of it; force goes on from there', async () => {
    await fs.writeFile(at('c.txt'), 'edited by a person after T3\n');
    const stopped = await rewind(T2);
    expect(stopped.complete).toBe(false);
    expect(stopped.stoppedAt).toBe(T3);
    expect(stopped.turns).toHaveLength(1);
    expect(stopped.turns[0]?.conflicts).toEqual([expect.objectContaining({ path: at('c.txt'), reason: 'changed-since-turn' })]);
    expect(stopped.turns[0]?.restored).toEqual([]);
    // Nothing of T3 was changed, and T2 was not touched.
    expect(await read('a.txt')).toBe('v4\n');
    expect(await read('b.txt')).toBe('(absent)');
    expect(await read('c.txt')).toBe('edited by a person after T3\n');

    const forced = await rewind(T2, true);
    expect(forced.complete).toBe(true);
    expect(await read('a.txt')).toBe('v2\n');
    expect(await read('b.txt')).toBe('b\n');
    expect(await read('c.txt')).toBe('c1\n');
  });

  it('restoring its rescue turn undoes the whole rewind; rescue turns are never part of a later plan', async () => {
    const first = await rewind(T2);
    expect(await read('a.txt')).toBe('v2\n');
    const plan = viewer.json<{ turns: TurnSummary[] }>(await viewer.get(`/api/rewind-plan?session=${SESSION}&turn=${T2}`));
    expect(plan.turns.map((t) => t.id)).toEqual([T3, T2]);
    const undo = viewer.json<{ report: { restored: unknown[] } }>(await viewer.post('/api/restore', { session: SESSION, turn: first.rescueTurnId }));
    expect(undo.report.restored.length).toBeGreaterThan(0);
    expect(await read('a.txt')).toBe('v4\n');
    expect(await read('b.txt')).toBe('(absent)');
    expect(await read('c.txt')).toBe('c2\n');
  });

  it('the plan comes with a dry run of the rewind, which changes nothing', async () => {
    const preview = async (turn: string) => viewer.json<{ preview: RewindReport }>(await viewer.get(`/api/rewind-plan?session=${SESSION}&turn=${turn}`)).preview;
    const clean = await preview(T1);
    expect(clean.dryRun).toBe(true);
    expect(clean.complete).toBe(true);
    expect(clean.turns.map((t) => t.turnId)).toEqual([T3, T2, T1]);
    expect(clean.turns.map((t) => t.restored.length)).toEqual([2, 2, 1]);
    await fs.writeFile(at('c.txt'), 'edited by a person after T3\n');
    const blocked = await preview(T2);
    expect(blocked.stoppedAt).toBe(T3);
    expect(blocked.turns[0]?.conflicts.map((c) => c.path)).toEqual([at('c.txt')]);
    expect(await read('a.txt')).toBe('v4\n');
    expect(await read('b.txt')).toBe('(absent)');
  });

  it('refuses (409) when a turn was committed after the confirmation listed the turns, and changes nothing', async () => {
    const confirmed = await planned(T2);
    expect(confirmed).toEqual([T3, T2]);
    await makeTurn({
      home,
      sessionId: SESSION,
      turnId: '20260503-120000-555555',
      message: 'committed while the person read the confirmation',
      at: '2026-05-03T12:00:00.000Z',
      backups: [{ path: at('c.txt'), operation: 'open' }],
      change: () => fs.writeFile(at('c.txt'), 'c3\n'),
    });
    const answer = await viewer.post('/api/rewind', { session: SESSION, turn: T2, turns: confirmed });
    expect(answer.status).toBe(409);
    expect([await read('a.txt'), await read('b.txt'), await read('c.txt')]).toEqual(['v4\n', '(absent)', 'c3\n']);
    // Without the list the server does not guess.
    expect((await viewer.post('/api/rewind', { session: SESSION, turn: T2 })).status).toBe(400);
  });

  it('an unknown turn is 404 and a turn of another session is not found in this one', async () => {
    expect((await viewer.post('/api/rewind', { session: SESSION, turn: '20990101-000000-ffffff', turns: [T2] })).status).toBe(404);
    expect((await viewer.post('/api/rewind', { session: SESSION, turn: '20260503-103000-444444', turns: [T2] })).status).toBe(404);
    expect(await read('d.txt')).toBe('d2\n');
  });
});
