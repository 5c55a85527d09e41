import { execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { cli, cliJson, makeTurn, sha256, tempDir, writeOld } from './helpers.js';

interface FileJson {
  path: string;
  operation: string;
  size: number;
  sha256: string | null;
  mode: number;
}
interface TurnJson {
  id: string;
  sessionId: string;
  message: string | null;
  committedAt: string | null;
  files: FileJson[];
}

const T1 = '20260101-000001-aaaaaa';
const T2 = '20260101-000003-cccccc';
const T3 = '20260102-000002-bbbbbb';

let home: string;
let work: string;

/** Three committed turns in two sessions; T1 and T2 share the prefix 20260101. */
beforeEach(async () => {
  home = await tempDir('bsh-cli-home-');
  work = await tempDir('bsh-cli-work-');
  const a = await writeOld(path.join(work, 'a.txt'), 'alpha\n', 0o640);
  const b = await writeOld(path.join(work, 'b.txt'), 'bravo!\n', 0o604);
  await makeTurn({
    home,
    sessionId: 'sess-a',
    turnId: T1,
    message: 'edit two files',
    at: '2026-01-01T00:00:01.000Z',
    backups: [
      { path: a, operation: 'open' },
      { path: b, operation: 'delete' },
    ],
    change: async () => {
      await fs.writeFile(a, 'ALPHA\n');
      await fs.unlink(b);
    },
  });
  await makeTurn({
    home,
    sessionId: 'sess-a',
    turnId: T2,
    message: 'first line\n\u001b[31mred\u001b[0m second line',
    at: '2026-01-01T00:00:03.000Z',
    backups: [{ path: a, operation: 'truncate' }],
    change: () => fs.writeFile(a, ''),
  });
  const c = await writeOld(path.join(work, 'c.txt'), 'charlie\n');
  await makeTurn({
    home,
    sessionId: 'sess-b',
    turnId: T3,
    message: 'other session',
    at: '2026-01-02T00:00:02.000Z',
    backups: [{ path: c, operation: 'chmod' }],
    change: () => fs.chmod(c, 0o600),
  });
});

describe('backups list', () => {
  it('--json prints {"turns":[…]} with the contract fields of each turn and file', () => {
    const { status, json, stderr } = cliJson<{ turns: TurnJson[] }>(['backups', 'list', '--json'], { home });
    expect(stderr).toBe('');
    expect(status).toBe(0);
    expect(Object.keys(json)).toEqual(['turns']);
    expect(json.turns.map((t) => t.id)).toEqual([T1, T2, T3]);
    const turn = json.turns[0];
    expect(turn).toMatchObject({ id: T1, sessionId: 'sess-a', message: 'edit two files', committedAt: '2026-01-01T00:00:01.000Z' });
    expect(turn?.files).toHaveLength(2);
    const [a, b] = turn?.files ?? [];
    expect(a).toMatchObject({ path: path.join(work, 'a.txt'), operation: 'open', size: 6, sha256: sha256('alpha\n'), mode: 0o640 });
    expect(b).toMatchObject({ path: path.join(work, 'b.txt'), operation: 'delete', size: 7, sha256: sha256('bravo!\n'), mode: 0o604 });
    for (const file of turn?.files ?? []) {
      expect(typeof file.path).toBe('string');
      expect(path.isAbsolute(file.path)).toBe(true);
      expect(typeof file.operation).toBe('string');
      expect(Number.isInteger(file.size)).toBe(true);
      expect(file.sha256).toMatch(/^[0-9a-f]{64}$/);
      expect(Number.isInteger(file.mode)).toBe(true);
    }
    expect(new Date(turn?.committedAt ?? '').toISOString()).toBe(turn?.committedAt);
  });

  it('--session filters to one session', () => {
    const { status, json } = cliJson<{ turns: TurnJson[] }>(['backups', 'list', '--session', 'sess-b', '--json'], { home });
    expect(status).toBe(0);
    expect(json.turns.map((t) => [t.id, t.sessionId])).toEqual([[T3, 'sess-b']]);
    expect(json.turns[0]?.files[0]).toMatchObject({ operation: 'chmod', mode: 0o644, size: 8 });
  });

  it('--session of a session with no backups is an empty list, not an error', () => {
    const json = cliJson<{ turns: TurnJson[] }>(['backups', 'list', '--session', 'never-seen', '--json'], { home });
    expect(json).toMatchObject({ status: 0, json: { turns: [] }, stderr: '' });
    const human = cli(['backups', 'list', '--session', 'never-seen'], { home });
    expect(human.status).toBe(0);
    expect(human.stdout).toBe('no backups for session never-seen\n');
  });

  it('--session with an id that cannot be a session is refused', () => {
    const result = cli(['backups', 'list', '--session', '../escape'], { home });
    expect(result.status).toBe(1);
    expect(result.stderr).toContain('invalid session id "../escape"');
    expect(result.stdout).toBe('');
  });

  it('an empty or missing home lists no turns', async () => {
    const empty = await tempDir('bsh-cli-empty-');
    for (const where of [empty, path.join(empty, 'not-created')]) {
      const result = cli(['backups', 'list', '--json'], { home: where });
      expect(result.status).toBe(0);
      expect(JSON.parse(result.stdout)).toEqual({ turns: [] });
      expect(cli(['backups', 'list'], { home: where }).stdout).toBe('no backups yet\n');
    }
    // Listing never creates the store.
    expect(await fs.readdir(empty)).toEqual([]);
  });

  it('human output: one row per turn with id, session, commit time, file count and message', () => {
    const result = cli(['backups', 'list'], { home });
    expect(result.status).toBe(0);
    const lines = result.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(4);
    expect(lines[0]).toMatch(/^TURN\s+SESSION\s+COMMITTED\s+FILES\s+CREATED\s+MESSAGE$/);
    expect(lines[1]?.split(/\s{2,}/)).toEqual([T1, 'sess-a', '2026-01-01T00:00:01.000Z', '2', '0', 'edit two files']);
    expect(lines[3]?.split(/\s{2,}/)).toEqual([T3, 'sess-b', '2026-01-02T00:00:02.000Z', '1', '0', 'other session']);
  });

  it('human output counts what a turn created, so a turn that only made files does not look empty', async () => {
    const made = ['n1.txt', 'n2.txt'].map((name) => path.join(work, name));
    await makeTurn({
      home,
      sessionId: 'sess-c',
      turnId: '20260103-000001-dddddd',
      message: 'npm install',
      at: '2026-01-03T00:00:01.000Z',
      backups: [],
      created: made,
      change: async () => {
        for (const file of made) await fs.writeFile(file, 'new\n');
      },
    });
    const lines = cli(['backups', 'list', '--session', 'sess-c'], { home }).stdout.trimEnd().split('\n');
    expect(lines[1]?.split(/\s{2,}/)).toEqual(['20260103-000001-dddddd', 'sess-c', '2026-01-03T00:00:01.000Z', '0', '2', 'npm install']);
  });

  it('human output counts the special files a turn recorded among its files', async () => {
    const pipes = ['p1', 'p2'].map((name) => path.join(work, name));
    for (const pipe of pipes) execFileSync('mkfifo', [pipe]);
    await makeTurn({
      home,
      sessionId: 'sess-f',
      turnId: '20260104-000001-eeeeee',
      message: 'rm p1 p2',
      at: '2026-01-04T00:00:01.000Z',
      backups: pipes.map((pipe) => ({ path: pipe, operation: 'delete' })),
      change: async () => {
        for (const pipe of pipes) await fs.rm(pipe);
      },
    });
    const lines = cli(['backups', 'list', '--session', 'sess-f'], { home }).stdout.trimEnd().split('\n');
    expect(lines[1]?.split(/\s{2,}/)).toEqual(['20260104-000001-eeeeee', 'sess-f', '2026-01-04T00:00:01.000Z', '2', '0', 'rm p1 p2']);
  });

  it('human output keeps a multi-line message with escape codes on one safe line', () => {
    const { stdout } = cli(['backups', 'list', '--session', 'sess-a'], { home });
    expect(stdout).not.toContain('\u001b');
    const row = stdout.split('\n').find((l) => l.startsWith(T2));
    expect(row).toMatch(/\s1\s+0\s+first line …$/);
  });
});

describe('backups show', () => {
  it('--json by full id: the same turn object as list', () => {
    const listed = cliJson<{ turns: TurnJson[] }>(['backups', 'list', '--json'], { home }).json.turns[0];
    const shown = cliJson<TurnJson>(['backups', 'show', T1, '--json'], { home });
    expect(shown.status).toBe(0);
    expect(shown.json).toEqual(listed);
  });

  it('a unique prefix and "latest" find their turn', () => {
    expect(cliJson<TurnJson>(['backups', 'show', '20260102', '--json'], { home }).json.id).toBe(T3);
    expect(cliJson<TurnJson>(['backups', 'show', '20260101-000003', '--json'], { home }).json.id).toBe(T2);
    expect(cliJson<TurnJson>(['backups', 'show', 'latest', '--json'], { home }).json).toMatchObject({ id: T3, sessionId: 'sess-b' });
  });

  it('human output: header and one row per file with operation, size, mode and path', () => {
    const result = cli(['backups', 'show', T1], { home });
    expect(result.status).toBe(0);
    const lines = result.stdout.trimEnd().split('\n');
    expect(lines[0]).toBe(`turn ${T1} (session sess-a)`);
    expect(result.stdout).toContain('message:   edit two files\n');
    expect(result.stdout).toContain('committed: 2026-01-01T00:00:01.000Z\n');
    expect(lines.find((l) => l.endsWith(path.join(work, 'a.txt')))?.split(/\s{2,}/)).toEqual([
      'open',
      '6 B',
      '0640',
      sha256('alpha\n').slice(0, 12),
      path.join(work, 'a.txt'),
    ]);
    expect(lines.find((l) => l.endsWith(path.join(work, 'b.txt')))).toMatch(/^delete\s+7 B\s+0604\s/);
  });

  it('human output: a directory row says whether the directory went, stayed or changed mode', async () => {
    const workspace = await tempDir('bsh-cli-dirs-');
    await fs.mkdir(path.join(workspace, 'gone', 'sub'), { recursive: true });
    await fs.writeFile(path.join(workspace, 'gone', 'sub', 'f.txt'), 'in a tree\n');
    await fs.mkdir(path.join(workspace, 'locked'));
    await fs.chmod(path.join(workspace, 'locked'), 0o755);
    const run = cli(['run', '--workspace', workspace, '--', 'rm -r gone; chmod 700 locked; mkdir fresh'], { home, cwd: workspace });
    expect(run.stderr).not.toContain('denied');
    expect(run.status).toBe(0);
    const result = cli(['backups', 'show', 'latest'], { home });
    expect(result.status).toBe(0);
    const row = (p: string) => result.stdout.split('\n').find((l) => l.endsWith(`  ${p}`))?.split(/\s{2,}/);
    expect(row(path.join(workspace, 'gone', 'sub', 'f.txt'))).toEqual(['delete', '10 B', '0644', sha256('in a tree\n').slice(0, 12), path.join(workspace, 'gone', 'sub', 'f.txt')]);
    expect(row(path.join(workspace, 'gone'))).toEqual(['delete', '(directory, removed)', '0755', '-', path.join(workspace, 'gone')]);
    // Removing `gone` moved the workspace's own times: recorded, and still there.
    expect(row(workspace)?.slice(0, 2)).toEqual(['delete', '(directory, kept)']);
    expect(row(path.join(workspace, 'locked'))).toEqual(['chmod', '(directory, mode changed)', '0755', '-', path.join(workspace, 'locked')]);
    expect(row(path.join(workspace, 'fresh'))?.slice(0, 2)).toEqual(['mkdir', '(created)']);
  });

  it('a special file the turn removed is shown with its type and mode, in human and JSON output', async () => {
    const workspace = await tempDir('bsh-cli-special-');
    execFileSync('mkfifo', ['-m', '0640', path.join(workspace, 'pipe')]);
    const run = cli(['run', '--workspace', workspace, '--', 'rm pipe'], { home, cwd: workspace });
    expect(run.status).toBe(0);
    const human = cli(['backups', 'show', 'latest'], { home });
    const row = human.stdout.split('\n').find((l) => l.endsWith(`  ${path.join(workspace, 'pipe')}`));
    expect(row?.split(/\s{2,}/)).toEqual(['delete', '(fifo)', '0640', '-', path.join(workspace, 'pipe')]);
    const json = JSON.parse(cli(['backups', 'show', 'latest', '--json'], { home }).stdout) as { structure: Array<Record<string, unknown>> };
    expect(json.structure.find((e) => e.path === path.join(workspace, 'pipe'))).toMatchObject({ kind: 'special', fileType: 'fifo', size: 0, sha256: null, mode: 0o640 });
  });

  it('an unknown ref: exit 1, stderr names the ref, nothing on stdout', () => {
    for (const args of [['nope'], ['nope', '--json']]) {
      const result = cli(['backups', 'show', ...args], { home });
      expect(result.status).toBe(1);
      expect(result.stdout).toBe('');
      expect(result.stderr).toMatch(/^brokered-shell: no turn matches "nope" under /);
    }
  });

  it('"latest" in an empty home: exit 1 with a clear message', async () => {
    const result = cli(['backups', 'show', 'latest'], { home: await tempDir('bsh-cli-empty-') });
    expect(result.status).toBe(1);
    expect(result.stderr).toContain('no committed turn');
  });

  it('an ambiguous prefix: exit 1 and every candidate listed', () => {
    const result = cli(['backups', 'show', '20260101'], { home });
    expect(result.status).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain('turn reference "20260101" is ambiguous');
    expect(result.stderr).toContain(`${T1}  (session sess-a)  edit two files`);
    expect(result.stderr).toContain(T2);
    expect(result.stderr).not.toContain(T3);
  });
});
