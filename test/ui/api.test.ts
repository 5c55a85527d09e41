/**
 * What the page reads and does through the API: sessions and turns, where each file
 * stands, diffs as `backups diff` prints them, and restores that are the CLI's own
 * (same report, same rescue turn, same refusal of a path the turn did not touch).
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { RestoreReport } from '../../src/backup/index.js';
import type { DiffView, TurnSummary, TurnView } from '../../src/ui/views.js';
import { cliJson, makeTurn, snapshot, tempDir, writeOld } from '../cli/helpers.js';
import { startViewer, type Viewer } from './helpers.js';

const SESSION = 'sess-api';
const TURN = '20260502-110000-0a0b0c';
let home: string;
let work: string;
let viewer: Viewer;
const at = (name: string) => path.join(work, name);

/** One turn that edits a text file, rewrites a binary one, deletes one and retargets a symlink. */
beforeEach(async () => {
  home = await tempDir('bsh-ui-home-');
  work = await tempDir('bsh-ui-work-');
  await writeOld(at('text.txt'), 'one\ntwo\nthree\n', 0o640);
  await writeOld(at('data.bin'), Buffer.from([0, 1, 2, 3, 255]));
  await writeOld(at('gone.txt'), 'deleted by the turn\n', 0o600);
  await fs.symlink('text.txt', at('link'));
  await makeTurn({
    home,
    sessionId: SESSION,
    turnId: TURN,
    message: 'change four files\nwith a second line',
    at: '2026-05-02T11:00:00.000Z',
    backups: [
      { path: at('text.txt'), operation: 'open' },
      { path: at('data.bin'), operation: 'truncate' },
      { path: at('gone.txt'), operation: 'delete' },
      { path: at('link'), operation: 'link' },
    ],
    change: async () => {
      await fs.writeFile(at('text.txt'), 'one\nTWO\nthree\n');
      await fs.writeFile(at('data.bin'), Buffer.from([9, 0, 9]));
      await fs.unlink(at('gone.txt'));
      await fs.unlink(at('link'));
      await fs.symlink('data.bin', at('link'));
    },
  });
  viewer = await startViewer(home);
});

afterEach(async () => {
  await viewer.server.close();
});

const turnPath = (turn = TURN) => `/api/turn?session=${SESSION}&turn=${turn}`;
const diffOf = async (file: string) => viewer.json<{ diff: DiffView }>(await viewer.get(`/api/diff?session=${SESSION}&turn=${TURN}&path=${encodeURIComponent(file)}`)).diff;
const statusOf = async (name: string) => (await viewer.json<{ turn: TurnView }>(await viewer.get(turnPath()))).turn.files.find((f) => f.path === at(name))?.status;
const restore = (body: Record<string, unknown>) => viewer.post('/api/restore', { session: SESSION, turn: TURN, ...body });

describe('reading', () => {
  it('lists sessions and their turns: id, times, message, file count, kind', async () => {
    const { sessions, home: shownHome } = viewer.json<{ home: string; sessions: Array<{ id: string; turns: TurnSummary[] }> }>(await viewer.get('/api/sessions'));
    expect(shownHome).toBe(home);
    expect(sessions).toEqual([
      {
        id: SESSION,
        turns: [
          {
            id: TURN,
            sessionId: SESSION,
            kind: 'turn',
            message: 'change four files\nwith a second line',
            startedAt: expect.any(String),
            committedAt: '2026-05-02T11:00:00.000Z',
            fileCount: 4,
            otherCount: 0,
          },
        ],
      },
    ]);
  });

  it('an empty home lists no sessions', async () => {
    const empty = await startViewer(await tempDir('bsh-ui-empty-'));
    try {
      expect(empty.json(await empty.get('/api/sessions'))).toEqual({ home: expect.any(String), sessions: [] });
    } finally {
      await empty.server.close();
    }
  });

  it("a turn's files say what the backup holds and where each stands now", async () => {
    const { turn } = viewer.json<{ turn: TurnView }>(await viewer.get(turnPath()));
    expect(turn.id).toBe(TURN);
    const byName = Object.fromEntries(turn.files.map((f) => [path.basename(f.path), f]));
    expect(byName['text.txt']).toMatchObject({ operation: 'open', kind: 'file', size: 14, mode: 0o640, status: 'as-turn-left', now: { type: 'file', size: 14 } });
    expect(byName['data.bin']).toMatchObject({ operation: 'truncate', size: 5, status: 'as-turn-left', now: { type: 'file', size: 3 } });
    expect(byName['gone.txt']).toMatchObject({ operation: 'delete', status: 'as-turn-left', now: { type: 'absent' } });
    expect(byName.link).toMatchObject({ kind: 'symlink', linkTarget: 'text.txt', status: 'as-turn-left', now: { type: 'symlink', target: 'data.bin' } });
  });

  it('a file changed after the turn is marked so, with what differs', async () => {
    await fs.writeFile(at('text.txt'), 'edited by a person later\n');
    const { turn } = viewer.json<{ turn: TurnView }>(await viewer.get(turnPath()));
    expect(turn.files.find((f) => f.path === at('text.txt'))).toMatchObject({ status: 'changed-since', detail: expect.stringContaining('size is 25') });
  });

  it('a text diff is the unified diff of `backups diff`, line by line, classified for colour', async () => {
    const diff = await diffOf(at('text.txt'));
    expect(diff.omitted).toBe(0);
    expect(diff.lines).toEqual([
      { kind: 'head', text: `--- ${at('text.txt')} (backup)` },
      { kind: 'head', text: `+++ ${at('text.txt')} (now)` },
      { kind: 'hunk', text: '@@ -1,3 +1,3 @@' },
      { kind: 'ctx', text: ' one' },
      { kind: 'del', text: '-two' },
      { kind: 'add', text: '+TWO' },
      { kind: 'ctx', text: ' three' },
    ]);
    const cli = (await import('../cli/helpers.js')).cli(['backups', 'diff', TURN, at('text.txt'), '--no-color'], { home });
    expect(cli.stdout.trimEnd()).toBe(diff.lines.map((l) => l.text).join('\n'));
  });

  it('a binary file is detected, a deleted file diffs against /dev/null, a symlink shows its targets', async () => {
    expect((await diffOf(at('data.bin'))).lines).toEqual([{ kind: 'note', text: `Binary files ${at('data.bin')} (backup, 5 B) and ${at('data.bin')} (now, 3 B) differ` }]);
    expect((await diffOf(at('gone.txt'))).lines).toContainEqual({ kind: 'head', text: '+++ /dev/null' });
    expect((await diffOf(at('gone.txt'))).lines).toContainEqual({ kind: 'del', text: '-deleted by the turn' });
    expect((await diffOf(at('link'))).lines).toEqual([
      { kind: 'head', text: `--- ${at('link')} (backup)` },
      { kind: 'head', text: `+++ ${at('link')} (now)` },
      { kind: 'del', text: '-symlink -> text.txt' },
      { kind: 'add', text: '+symlink -> data.bin' },
    ]);
  });

  it('a diff line that looks like a header inside a hunk is still a removed line', async () => {
    await writeOld(at('dashes.txt'), '-- x\nkeep\n');
    await makeTurn({
      home,
      sessionId: SESSION,
      turnId: '20260502-120000-dddddd',
      message: 'dashes',
      at: '2026-05-02T12:00:00.000Z',
      backups: [{ path: at('dashes.txt'), operation: 'open' }],
      change: () => fs.writeFile(at('dashes.txt'), 'keep\n'),
    });
    const answer = viewer.json<{ diff: DiffView }>(await viewer.get(`/api/diff?session=${SESSION}&turn=20260502-120000-dddddd&path=${encodeURIComponent(at('dashes.txt'))}`));
    expect(answer.diff.lines).toContainEqual({ kind: 'del', text: '--- x' });
  });

  it('unknown turns, sessions and paths are 404; bad queries 400', async () => {
    expect((await viewer.get(`/api/turn?session=${SESSION}&turn=nope`)).status).toBe(404);
    expect((await viewer.get(`/api/turn?session=other&turn=${TURN}`)).status).toBe(404);
    expect((await viewer.get(`/api/diff?session=${SESSION}&turn=${TURN}&path=/etc/passwd`)).status).toBe(404);
    expect((await viewer.get(`/api/turn?session=${SESSION}`)).status).toBe(400);
    expect((await viewer.get(`/api/turn?session=../x&turn=${TURN}`)).status).toBe(400);
    expect((await viewer.get('/api/nothing')).status).toBe(404);
  });
});

describe('restoring', () => {
  it('one file: its backed-up bytes, mode and mtime come back; the other files stay as the turn left them', async () => {
    const reply = await restore({ paths: [at('text.txt')] });
    const { refused, report } = viewer.json<{ refused: boolean; report: RestoreReport }>(reply);
    expect(refused).toBe(false);
    expect(report.restored.map((r) => r.path)).toEqual([at('text.txt')]);
    expect(report.rescueTurnId).toMatch(/^\d{8}-\d{6}-[0-9a-f]{6}$/);
    const now = await snapshot(at('text.txt'));
    expect(now.bytes.toString()).toBe('one\ntwo\nthree\n');
    expect(now.mode).toBe(0o640);
    expect(now.mtimeNs).toBe(1_000_000_000n * 1_000_000_000n); // writeOld's mtime
    expect(await fs.readFile(at('data.bin'))).toEqual(Buffer.from([9, 0, 9]));
    expect(await statusOf('text.txt')).toBe('as-before');
  });

  it('the whole turn, with the report the CLI prints as JSON, and a rescue turn listed as kind restore', async () => {
    const { report } = viewer.json<{ report: RestoreReport }>(await restore({}));
    expect(report.restored.map((r) => path.basename(r.path)).sort()).toEqual(['data.bin', 'gone.txt', 'link', 'text.txt']);
    expect(report.conflicts).toEqual([]);
    expect(await fs.readFile(at('text.txt'), 'utf8')).toBe('one\ntwo\nthree\n');
    expect(await fs.readFile(at('data.bin'))).toEqual(Buffer.from([0, 1, 2, 3, 255]));
    expect(await fs.readFile(at('gone.txt'), 'utf8')).toBe('deleted by the turn\n');
    expect(await fs.readlink(at('link'))).toBe('text.txt');
    const listed = cliJson<{ turns: Array<{ id: string; kind: string; restoreOf?: string }> }>(['backups', 'list', '--json'], { home });
    expect(listed.json.turns).toContainEqual(expect.objectContaining({ id: report.rescueTurnId, kind: 'restore', restoreOf: TURN }));
    const { sessions } = viewer.json<{ sessions: Array<{ turns: TurnSummary[] }> }>(await viewer.get('/api/sessions'));
    expect(sessions[0]?.turns.map((t) => t.kind)).toEqual(['turn', 'restore']);
  });

  it('a file changed since the turn is a conflict and stays; force (explicit) restores it, and the rescue turn keeps the edit', async () => {
    await fs.writeFile(at('text.txt'), 'edited by a person later\n');
    const first = viewer.json<{ report: RestoreReport }>(await restore({ paths: [at('text.txt')] })).report;
    expect(first.conflicts).toEqual([{ path: at('text.txt'), reason: 'changed-since-turn', detail: expect.any(String) }]);
    expect(first.restored).toEqual([]);
    expect(await fs.readFile(at('text.txt'), 'utf8')).toBe('edited by a person later\n');

    const forced = viewer.json<{ report: RestoreReport }>(await restore({ paths: [at('text.txt')], force: true })).report;
    expect(forced.restored).toEqual([expect.objectContaining({ path: at('text.txt'), forced: true })]);
    expect(await fs.readFile(at('text.txt'), 'utf8')).toBe('one\ntwo\nthree\n');
    // Undo the forced restore: the person's edit comes back from the rescue turn.
    const undo = viewer.json<{ report: RestoreReport }>(await viewer.post('/api/restore', { session: SESSION, turn: forced.rescueTurnId }));
    expect(undo.report.restored).toHaveLength(1);
    expect(await fs.readFile(at('text.txt'), 'utf8')).toBe('edited by a person later\n');
  });

  it('a dry run changes nothing', async () => {
    const { report } = viewer.json<{ report: RestoreReport }>(await restore({ dryRun: true }));
    expect(report.dryRun).toBe(true);
    expect(report.restored).toHaveLength(4);
    expect(await fs.readFile(at('text.txt'), 'utf8')).toBe('one\nTWO\nthree\n');
  });

  it('a path the turn did not touch refuses the whole request, as the CLI does', async () => {
    const { refused, report } = viewer.json<{ refused: boolean; report: RestoreReport }>(await restore({ paths: [at('text.txt'), at('never.txt')] }));
    expect(refused).toBe(true);
    expect(report.notInTurn).toEqual([at('never.txt')]);
    expect(await fs.readFile(at('text.txt'), 'utf8')).toBe('one\nTWO\nthree\n');
  });

  it.each([
    ['relative path', { paths: ['text.txt'] }],
    ['unknown field', { everything: true }],
    ['force as text', { force: 'yes' }],
  ])('a body with a %s is 400 and changes nothing', async (_name, body) => {
    const reply = await restore(body);
    expect(reply.status).toBe(400);
    expect(await fs.readFile(at('text.txt'), 'utf8')).toBe('one\nTWO\nthree\n');
  });

  it('a body that is not JSON is 400; an unknown turn 404', async () => {
    expect((await viewer.post('/api/restore', undefined, { body: '{not json' })).status).toBe(400);
    expect((await viewer.post('/api/restore', { session: SESSION, turn: '20990101-000000-ffffff' })).status).toBe(404);
  });

  it('takes whole turn ids only: a prefix or "latest" (which could name another turn by then) is 404 and changes nothing', async () => {
    const state = async () => [await snapshot(at('text.txt')), await snapshot(at('data.bin')), await fs.readlink(at('link')), await fs.readdir(work)];
    const before = await state();
    for (const ref of [TURN.slice(0, 10), 'latest']) {
      expect((await viewer.get(turnPath(ref))).status, ref).toBe(404);
      expect((await viewer.get(`/api/rewind-plan?session=${SESSION}&turn=${ref}`)).status, ref).toBe(404);
      const restored = await viewer.post('/api/restore', { session: SESSION, turn: ref });
      expect(restored.status, ref).toBe(404);
      expect(restored.body).toContain('whole turn ids');
      expect((await viewer.post('/api/rewind', { session: SESSION, turn: ref, turns: [TURN] })).status, ref).toBe(404);
    }
    expect(await state()).toEqual(before);
    expect((await viewer.get(turnPath())).status).toBe(200);
  });
});
