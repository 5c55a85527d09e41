import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { cli, cliJson, makeTurn, snapshot, tempDir, writeOld } from './helpers.js';

const TURN = '20260401-090000-4e5703';
const NAMES = ['text.txt', 'run.sh', 'gone.txt', 'data.bin'] as const;
type Name = (typeof NAMES)[number];
type Snap = Awaited<ReturnType<typeof snapshot>>;

let home: string;
let work: string;
/** Each file as it was before the turn, and as the turn left it (gone.txt: absent). */
let before: Record<Name, Snap>;
let after: Partial<Record<Name, Snap>>;
const at = (name: string) => path.join(work, name);

async function snapAll(): Promise<Partial<Record<Name, Snap>>> {
  const out: Partial<Record<Name, Snap>> = {};
  for (const name of NAMES) if (existsSync(at(name))) out[name] = await snapshot(at(name));
  return out;
}

/**
 * One turn: rewrites a 0640 text file, chmods a script (content kept), deletes a file
 * and rewrites a binary one. Every file starts with an old mtime.
 */
beforeEach(async () => {
  home = await tempDir('bsh-cli-home-');
  work = await tempDir('bsh-cli-work-');
  await writeOld(at('text.txt'), 'original text\n', 0o640, 1_000_000_001);
  await writeOld(at('run.sh'), '#!/bin/sh\necho hi\n', 0o644, 1_000_000_002);
  await writeOld(at('gone.txt'), 'deleted by the turn\n', 0o600, 1_000_000_003);
  await writeOld(at('data.bin'), Buffer.from([0, 1, 2, 3, 255]), 0o644, 1_000_000_004);
  before = (await snapAll()) as Record<Name, Snap>;
  await makeTurn({
    home,
    sessionId: 'sess-r',
    turnId: TURN,
    message: 'the turn to undo',
    at: '2026-04-01T09:00:00.000Z',
    backups: [
      { path: at('text.txt'), operation: 'open' },
      { path: at('run.sh'), operation: 'chmod' },
      { path: at('gone.txt'), operation: 'delete' },
      { path: at('data.bin'), operation: 'truncate' },
    ],
    change: async () => {
      await fs.writeFile(at('text.txt'), 'changed by the turn\n');
      await fs.chmod(at('run.sh'), 0o755);
      await fs.unlink(at('gone.txt'));
      await fs.writeFile(at('data.bin'), Buffer.from([9, 9]));
    },
  });
  after = await snapAll();
});

const restore = (...args: string[]) => cli(['backups', 'restore', ...args], { home, cwd: work });

function expectAsBefore(names: readonly Name[]) {
  return Promise.all(
    names.map(async (name) => {
      const now = await snapshot(at(name));
      expect(now.bytes.equals(before[name].bytes), `${name} bytes`).toBe(true);
      expect(now.mode, `${name} mode`).toBe(before[name].mode);
      expect(now.mtimeNs, `${name} mtime`).toBe(before[name].mtimeNs);
    }),
  );
}

describe('backups restore', () => {
  it('puts every file back byte-, mode- and mtime-identical, recreating the deleted one', async () => {
    expect(after['gone.txt']).toBeUndefined();
    expect(after['run.sh']?.mode).toBe(0o755);
    const result = restore(TURN);
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    await expectAsBefore(NAMES);
    const lines = result.stdout.trimEnd().split('\n');
    expect(lines).toContain(`restored ${at('text.txt')}`);
    expect(lines).toContain(`restored ${at('run.sh')}`);
    expect(lines).toContain(`restored ${at('gone.txt')} (recreated)`);
    expect(lines).toContain(`restored ${at('data.bin')}`);
    expect(lines.at(-1)).toMatch(/^what was replaced is kept in turn \S+ \(restore it to undo\)$/);
  });

  it('--dry-run changes nothing and says what would happen', async () => {
    const turnsBefore = cliJson<{ turns: unknown[] }>(['backups', 'list', '--json'], { home }).json.turns.length;
    const result = restore(TURN, '--dry-run');
    expect(result.status).toBe(0);
    expect(result.stdout).toBe(
      [
        `would restore ${at('text.txt')}`,
        `would restore ${at('run.sh')}`,
        `would restore ${at('gone.txt')} (recreated)`,
        `would restore ${at('data.bin')}`,
        'dry run: nothing was changed',
        '',
      ].join('\n'),
    );
    expect(await snapAll()).toEqual(after);
    expect(cliJson<{ turns: unknown[] }>(['backups', 'list', '--json'], { home }).json.turns).toHaveLength(turnsBefore);
  });

  it('a file changed after the turn: exit 3, left untouched and listed on stderr; the rest restored', async () => {
    await fs.writeFile(at('text.txt'), 'changed again by a person\n');
    const changed = await snapshot(at('text.txt'));
    const result = restore(TURN);
    expect(result.status).toBe(3);
    expect(result.stderr).toMatch(new RegExp(`^conflict ${escape(at('text.txt'))}: .*\\(changed-since-turn; --force to restore anyway\\)$`, 'm'));
    expect(result.stderr).toContain('1 file(s) left alone');
    expect(result.stdout).not.toContain(`restored ${at('text.txt')}`);
    expect(await snapshot(at('text.txt'))).toEqual(changed);
    await expectAsBefore(['run.sh', 'gone.txt', 'data.bin']);

    const forced = restore(TURN, '--force');
    expect(forced.status).toBe(0);
    expect(forced.stdout).toContain(`restored ${at('text.txt')} (forced)`);
    await expectAsBefore(NAMES);
  });

  it('the rescue turn it prints undoes the restore when restored itself', async () => {
    const first = restore(TURN);
    expect(first.status).toBe(0);
    const rescue = /kept in turn (\S+) /.exec(first.stdout)?.[1];
    expect(rescue).toBeDefined();
    const shown = cliJson<{ id: string; message: string; files: Array<{ path: string; operation: string }> }>(['backups', 'show', String(rescue), '--json'], {
      home,
    });
    expect(shown.json.message).toBe(`restore of ${TURN}`);
    expect(shown.json.files.map((f) => f.path).sort()).toEqual([at('data.bin'), at('run.sh'), at('text.txt')]);
    expect(shown.json.files.every((f) => f.operation === 'restore')).toBe(true);
    const human = cli(['backups', 'show', String(rescue)], { home });
    expect(human.stdout).toContain(`restore of turn ${TURN}; restore this turn to undo it\n`);
    expect(cli(['backups', 'list'], { home }).stdout).toMatch(new RegExp(`^${rescue}\\s.*\\s3\\s+1\\s+\\[restore\\] restore of ${TURN}$`, 'm'));

    const undo = restore(String(rescue));
    expect(undo.stderr).toBe('');
    expect(undo.status).toBe(0);
    for (const name of ['text.txt', 'run.sh', 'data.bin'] as const) {
      const now = await snapshot(at(name));
      expect(now.bytes.equals(after[name]?.bytes ?? Buffer.alloc(0)), name).toBe(true);
      expect(now.mode, name).toBe(after[name]?.mode);
      expect(now.mtimeNs, name).toBe(after[name]?.mtimeNs);
    }
  });

  it('restore TURN PATH restores only that path', async () => {
    const result = restore(TURN, at('gone.txt'));
    expect(result.status).toBe(0);
    expect(result.stdout).toContain(`restored ${at('gone.txt')} (recreated)`);
    await expectAsBefore(['gone.txt']);
    const now = await snapAll();
    expect({ ...now, 'gone.txt': undefined }).toEqual({ ...after, 'gone.txt': undefined });
  });

  it('relative PATHs are taken from the current directory; several may be named', async () => {
    const result = restore(TURN, 'run.sh', 'data.bin');
    expect(result.status).toBe(0);
    await expectAsBefore(['run.sh', 'data.bin']);
    expect(await snapshot(at('text.txt'))).toEqual(after['text.txt']);
  });

  it('a PATH the turn did not touch: exit 1, named on stderr, and nothing restored', async () => {
    const result = restore(TURN, at('text.txt'), at('never.txt'));
    expect(result.status).toBe(1);
    expect(result.stderr).toContain(`not in turn ${TURN}: ${at('never.txt')}`);
    expect(result.stderr).toContain('nothing was restored');
    expect(await snapAll()).toEqual(after);
  });

  it('--json prints the report', async () => {
    const { status, json } = cliJson<{
      turnId: string;
      sessionId: string;
      dryRun: boolean;
      rescueTurnId?: string;
      restored: Array<{ path: string; kind: string; action: string; forced: boolean }>;
      conflicts: unknown[];
      skipped: unknown[];
      failed: unknown[];
      notInTurn: unknown[];
    }>(['backups', 'restore', TURN, '--json'], { home });
    expect(status).toBe(0);
    expect(json).toMatchObject({ turnId: TURN, sessionId: 'sess-r', dryRun: false, conflicts: [], skipped: [], failed: [], notInTurn: [] });
    expect(json.rescueTurnId).toMatch(/^\d{8}-\d{6}-[0-9a-f]{6}$/);
    expect(json.restored).toEqual(
      NAMES.map((name) => expect.objectContaining({ path: at(name), kind: 'file', action: name === 'gone.txt' ? 'recreate' : 'replace', forced: false })),
    );
    await expectAsBefore(NAMES);
  });

  it('--json with a conflict still exits 3 and reports it', async () => {
    await fs.writeFile(at('data.bin'), 'not binary any more');
    const { status, json } = cliJson<{ conflicts: Array<{ path: string; reason: string }> }>(['backups', 'restore', TURN, '--json'], { home });
    expect(status).toBe(3);
    expect(json.conflicts).toEqual([expect.objectContaining({ path: at('data.bin'), reason: 'changed-since-turn' })]);
  });

  it('restoring twice: the second time every file is already as it was', async () => {
    expect(restore(TURN).status).toBe(0);
    const again = restore(TURN);
    expect(again.status).toBe(0);
    expect(again.stdout.trimEnd().split('\n')).toEqual(NAMES.map((name) => `skipped ${at(name)}: already as it was before the turn`));
  });
});

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
