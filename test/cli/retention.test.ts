import fs from 'node:fs/promises';
import path from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { pruneReportSchema, statsReportSchema } from '../../src/backup/index.js';
import { cli, cliJson, makeTurn, sha256, tempDir } from './helpers.js';

const V1 = 'x'.repeat(99) + '\n'; // 100 B
const V2 = 'y'.repeat(199) + '\n'; // 200 B
const V3 = 'z'.repeat(299) + '\n'; // 300 B
const C = 'c'.repeat(49) + '\n'; // 50 B

const T1 = '20260101-000000-aaaaa1';
const T2 = '20260102-000000-aaaaa2';
const T3 = '20260103-000000-aaaaa3';
const T4 = '20260102-120000-bbbbb1';

let home: string;
let work: string;
const at = (name: string) => path.join(work, name);
const root = (session: string) => path.join(home, 'workspace', 'sessions', session, 'modify_backup');

/** Every file under home with its content hash: "nothing changed" is equality. */
async function homeFiles(): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const e of await fs.readdir(home, { recursive: true, withFileTypes: true })) {
    const file = path.join(e.parentPath, e.name);
    out[path.relative(home, file)] = e.isFile() ? sha256(await fs.readFile(file)) : 'dir';
  }
  return out;
}

/** Blobs of turns days old are older than GC's one-hour grace period. */
async function ageBlobs(): Promise<void> {
  const old = new Date(Date.now() - 2 * 60 * 60 * 1000);
  for (const e of await fs.readdir(home, { recursive: true, withFileTypes: true })) {
    if (e.isFile() && e.parentPath.includes(`${path.sep}blobs${path.sep}`)) await fs.utimes(path.join(e.parentPath, e.name), old, old);
  }
}

/**
 * sess-a: T1 (Jan 1) backs up a.txt = V1, T2 (Jan 2) V2, T3 (Jan 3) V1 again (one blob
 * with T1's): 300 B stored, 400 B logical. sess-b: T4 (Jan 2, noon) backs up c.txt = C.
 */
beforeEach(async () => {
  home = await tempDir('bsh-cli-home-');
  work = await tempDir('bsh-cli-work-');
  await fs.writeFile(at('a.txt'), V1);
  const step = (turnId: string, day: string, next: string) =>
    makeTurn({
      home,
      sessionId: 'sess-a',
      turnId,
      message: `write ${next.slice(0, 1)}`,
      at: `${day}T00:00:00.000Z`,
      backups: [{ path: at('a.txt'), operation: 'open' }],
      change: () => fs.writeFile(at('a.txt'), next),
    });
  await step(T1, '2026-01-01', V2);
  await step(T2, '2026-01-02', V1);
  await step(T3, '2026-01-03', V3);
  await fs.writeFile(at('c.txt'), C);
  await makeTurn({
    home,
    sessionId: 'sess-b',
    turnId: T4,
    message: 'other session',
    at: '2026-01-02T12:00:00.000Z',
    backups: [{ path: at('c.txt'), operation: 'truncate' }],
    change: () => fs.writeFile(at('c.txt'), 'C'),
  });
  await ageBlobs();
});

describe('backups stats', () => {
  it('--json: exact counts per session and in total', () => {
    const { status, json, stderr } = cliJson<unknown>(['backups', 'stats', '--json'], { home });
    expect(stderr).toBe('');
    expect(status).toBe(0);
    const report = statsReportSchema.parse(json);
    expect(report.sessions.map((s) => [s.sessionId, s.turns, s.files, s.blobs, s.storedBytes, s.logicalBytes])).toEqual([
      ['sess-a', 3, 3, 2, 300, 400],
      ['sess-b', 1, 1, 1, 50, 50],
    ]);
    expect(report.sessions[0]?.dedupRatio).toBe(400 / 300);
    expect(report.total).toEqual({
      turns: 4,
      openTurns: 0,
      files: 4,
      blobs: 3,
      storedBytes: 350,
      logicalBytes: 450,
      dedupRatio: 450 / 350,
      unreferencedBlobs: 0,
      unreferencedBytes: 0,
    });
  });

  it('human: one row per session and a total', () => {
    const { status, stdout, stderr } = cli(['backups', 'stats'], { home });
    expect(stderr).toBe('');
    expect(status).toBe(0);
    const rows = stdout.trimEnd().split('\n').map((line) => line.split(/\s{2,}/));
    expect(rows).toEqual([
      ['SESSION', 'TURNS', 'OPEN', 'FILES', 'BLOBS', 'STORED', 'LOGICAL', 'DEDUP', 'UNREFERENCED'],
      ['sess-a', '3', '0', '3', '2', '300 B', '400 B', '1.33x', '0 B'],
      ['sess-b', '1', '0', '1', '1', '50 B', '50 B', '1.00x', '0 B'],
      ['total', '4', '0', '4', '3', '350 B', '450 B', '1.29x', '0 B'],
    ]);
  });

  it('--session: that session only; an unknown one fails', () => {
    const one = cliJson<unknown>(['backups', 'stats', '--session', 'sess-b', '--json'], { home });
    expect(statsReportSchema.parse(one.json).sessions.map((s) => s.sessionId)).toEqual(['sess-b']);
    const human = cli(['backups', 'stats', '--session', 'sess-b'], { home });
    expect(human.stdout).not.toContain('total');
    const unknown = cli(['backups', 'stats', '--session', 'nope'], { home });
    expect(unknown.status).toBe(1);
    expect(unknown.stderr).toContain('no backups for session nope');
  });

  it('an empty home says so', async () => {
    const empty = await tempDir('bsh-cli-empty-');
    const result = cli(['backups', 'stats'], { home: empty });
    expect(result.status).toBe(0);
    expect(result.stdout.trim()).toBe('no backups yet');
  });
});

describe('backups prune', () => {
  it('--dry-run (human) lists what would go and changes nothing', async () => {
    const before = await homeFiles();
    const { status, stdout, stderr } = cli(['backups', 'prune', '--keep-last', '1', '--dry-run'], { home });
    expect(stderr).toBe('');
    expect(status).toBe(0);
    expect(await homeFiles()).toEqual(before);
    const lines = stdout.trimEnd().split('\n');
    expect(lines[0]).toBe('would prune 2 turns:');
    expect(lines[1]?.split(/\s{2,}/)).toEqual(['SESSION', 'TURN', 'COMMITTED', 'FILES', 'WHY', 'MESSAGE']);
    expect(lines[2]?.split(/\s{2,}/)).toEqual(['sess-a', T1, '2026-01-01T00:00:00.000Z', '1', 'keep-last', 'write y']);
    expect(lines[3]?.split(/\s{2,}/)).toEqual(['sess-a', T2, '2026-01-02T00:00:00.000Z', '1', 'keep-last', 'write x']);
    expect(lines.slice(4)).toEqual(['blobs: would remove 1 unreferenced blob (200 B)', 'stored: 350 B -> 150 B', 'dry run: nothing was changed']);
  });

  it('--json: the report; then the kept turns list and restore byte for byte', async () => {
    const { status, json, stderr } = cliJson<unknown>(['backups', 'prune', '--keep-last', '1', '--json'], { home });
    expect(stderr).toBe('');
    expect(status).toBe(0);
    const report = pruneReportSchema.parse(json);
    expect(report.dryRun).toBe(false);
    expect(report.pruned.map((t) => [t.sessionId, t.turnId, t.reasons])).toEqual([
      ['sess-a', T1, ['keep-last']],
      ['sess-a', T2, ['keep-last']],
    ]);
    expect(report.gc).toEqual({ blobsRemoved: 1, bytesFreed: 200, blobsKeptRecent: 0, bytesKeptRecent: 0, tempsRemoved: 0 });
    expect(report.storedBytes).toEqual({ before: 350, after: 150 });
    expect(report.criteria).toEqual({ keepLast: 1, olderThan: null, maxSizeBytes: null, includeNewest: false, includeOpen: false });

    const list = cliJson<{ turns: Array<{ id: string }> }>(['backups', 'list', '--json'], { home });
    expect(list.json.turns.map((t) => t.id)).toEqual([T4, T3]);
    // T3 backed up V1 (the blob it shares with the pruned T1).
    const restore = cli(['backups', 'restore', T3], { home, cwd: work });
    expect(restore.stderr).toBe('');
    expect(restore.status).toBe(0);
    expect(await fs.readFile(at('a.txt'), 'utf8')).toBe(V1);
    expect(await fs.readdir(path.join(root('sess-a'), 'blobs'), { recursive: true })).toContain(path.join(sha256(V1).slice(0, 2), sha256(V1)));
  });

  it('--older-than DATE (human): what went and which newest turn was kept', () => {
    const { status, stdout } = cli(['backups', 'prune', '--older-than', '2026-01-03'], { home });
    expect(status).toBe(0);
    const lines = stdout.trimEnd().split('\n');
    expect(lines[0]).toBe('pruned 2 turns:');
    expect(lines.slice(2, 4).map((l) => l.split(/\s{2,}/).slice(0, 2))).toEqual([
      ['sess-a', T1],
      ['sess-a', T2],
    ]);
    expect(lines).toContain(`kept ${T4} of session sess-b: the newest turn of its session (--include-newest lets it go)`);
    expect(lines.at(-1)).toBe('stored: 350 B -> 150 B');
    const list = cliJson<{ turns: Array<{ id: string }> }>(['backups', 'list', '--json'], { home });
    expect(list.json.turns.map((t) => t.id)).toEqual([T4, T3]);
  });

  it('--max-size that cannot be met: prunes what it may, says why the rest stays, exits 1', () => {
    const { status, stdout, stderr } = cli(['backups', 'prune', '--max-size', '100'], { home });
    expect(status).toBe(1);
    expect(stdout).toContain('pruned 2 turns:');
    expect(stdout).toContain(`kept ${T3} of session sess-a: the newest turn of its session (--include-newest lets it go)`);
    expect(stdout).toContain(`kept ${T4} of session sess-b: the newest turn of its session (--include-newest lets it go)`);
    expect(stdout).toContain('stored: 350 B -> 150 B (budget 100 B: NOT met)');
    expect(stderr).toContain('over budget: 150 B stay, the budget is 100 B');
  });

  it('--max-size with --include-newest --json can empty a session', () => {
    const { status, json } = cliJson<unknown>(['backups', 'prune', '--max-size', '0.05K', '--include-newest', '--session', 'sess-a', '--json'], { home });
    expect(status).toBe(0);
    const report = pruneReportSchema.parse(json);
    expect(report.sessions).toEqual(['sess-a']);
    expect(report.budget).toEqual({ maxBytes: 51, met: true });
    expect(report.pruned.map((t) => t.turnId)).toEqual([T1, T2, T3]);
    expect(report.storedBytes).toEqual({ before: 300, after: 0 });
  });

  it('nothing to prune: says so, still collects garbage', async () => {
    const stray = path.join(root('sess-b'), 'tmp', 'b-1-stale.tmp');
    await fs.writeFile(stray, 'crash leftover');
    const old = new Date(Date.now() - 2 * 60 * 60 * 1000);
    await fs.utimes(stray, old, old);
    const { status, stdout } = cli(['backups', 'prune'], { home });
    expect(status).toBe(0);
    expect(stdout.trimEnd().split('\n')).toEqual([
      'no turns pruned',
      'blobs: removed 0 unreferenced blobs (0 B); removed 1 stale temp file',
      'stored: 350 B -> 350 B',
    ]);
    await expect(fs.access(stray)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it.each([
    [['--older-than', 'yesterday'], 'invalid age "yesterday"'],
    [['--max-size', '5X'], 'invalid size "5X"'],
    [['--keep-last=-1'], 'invalid count "-1"'],
  ])('a bad value (%j) is a usage error that changes nothing', async (args, message) => {
    const before = await homeFiles();
    const result = cli(['backups', 'prune', ...args], { home });
    expect(result.status).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain(message);
    expect(await homeFiles()).toEqual(before);
  });

  it('an unknown session fails', () => {
    const result = cli(['backups', 'prune', '--keep-last', '1', '--session', 'nope'], { home });
    expect(result.status).toBe(1);
    expect(result.stderr).toContain('no backups for session nope');
  });

  it('is listed in the help of backups', () => {
    const help = cli(['backups', '--help'], { home });
    expect(help.stdout).toMatch(/^\s+prune \[options\]/m);
    expect(help.stdout).toMatch(/^\s+stats \[options\]/m);
    const prune = cli(['backups', 'prune', '--help'], { home });
    for (const flag of ['--session', '--keep-last', '--older-than', '--max-size', '--include-newest', '--include-open', '--dry-run', '--json']) {
      expect(prune.stdout).toContain(flag);
    }
  });
});
