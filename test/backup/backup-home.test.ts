import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ErrorCodes } from '../../src/core/errors.js';
import { BackupHome } from '../../src/backup/backup-home.js';
import { SessionBackupStore } from '../../src/backup/session-store.js';
import { tempDir } from './helpers.js';
import { closeLater } from '../helpers/close-opened.js';

/** A home with two sessions and turns at known times; ids chosen so prefixes collide on purpose. */
async function populatedHome() {
  const home = await tempDir('bsh-home-');
  const work = await tempDir('bsh-work-');
  let now = new Date('2026-03-01T10:00:00.000Z');
  const clock = () => now;
  const alpha = closeLater(await SessionBackupStore.open({ home, sessionId: 'alpha', clock }));
  const beta = closeLater(await SessionBackupStore.open({ home, sessionId: 'beta', clock }));
  const at = (iso: string) => (now = new Date(iso));

  await fs.writeFile(path.join(work, 'a.txt'), 'a');
  at('2026-03-01T10:00:00.000Z');
  await alpha.backup(path.join(work, 'a.txt'), { turnId: '20260301-100000-aaa111', operation: 'open' });
  at('2026-03-01T10:05:00.000Z');
  await alpha.commitTurn('20260301-100000-aaa111', 'first');

  at('2026-03-01T11:00:00.000Z');
  await beta.beginTurn('20260301-110000-bbb222');
  at('2026-03-01T11:30:00.000Z');
  await beta.commitTurn('20260301-110000-bbb222', 'second');

  at('2026-03-01T12:00:00.000Z');
  await alpha.backup(path.join(work, 'a.txt'), { turnId: '20260301-120000-aaa333', operation: 'delete' });
  await fs.rm(path.join(work, 'a.txt'));
  at('2026-03-01T12:01:00.000Z');
  await alpha.commitTurn('20260301-120000-aaa333', 'third');

  // Open (uncommitted) and started last: listed, but never 'latest'.
  at('2026-03-01T13:00:00.000Z');
  await fs.writeFile(path.join(work, 'b.txt'), 'b');
  await beta.backup(path.join(work, 'b.txt'), { turnId: '20260301-130000-ccc444', operation: 'open' });
  return { home, work };
}

describe('BackupHome', () => {
  it('lists sessions and turns ordered by start time', async () => {
    const { home } = await populatedHome();
    const backups = new BackupHome({ home });
    expect(await backups.listSessions()).toEqual(['alpha', 'beta']);
    const turns = await backups.listTurns();
    expect(turns.map((t) => [t.id, t.sessionId, t.message])).toEqual([
      ['20260301-100000-aaa111', 'alpha', 'first'],
      ['20260301-110000-bbb222', 'beta', 'second'],
      ['20260301-120000-aaa333', 'alpha', 'third'],
      ['20260301-130000-ccc444', 'beta', null],
    ]);
    expect((await backups.listTurns({ sessionId: 'alpha' })).map((t) => t.id)).toEqual(['20260301-100000-aaa111', '20260301-120000-aaa333']);
    // The CLI contract fields are present under their exact names.
    const first = turns[0]!;
    expect(Object.keys(first)).toEqual(expect.arrayContaining(['id', 'sessionId', 'message', 'committedAt', 'files']));
    expect(Object.keys(first.files[0]!)).toEqual(expect.arrayContaining(['path', 'operation', 'size', 'sha256', 'mode']));
  });

  it('resolves the home from $BROKERED_SHELL_HOME by default', async () => {
    const { home } = await populatedHome();
    const saved = process.env.BROKERED_SHELL_HOME;
    process.env.BROKERED_SHELL_HOME = home;
    try {
      expect(new BackupHome().home).toBe(home);
    } finally {
      if (saved === undefined) delete process.env.BROKERED_SHELL_HOME;
      else process.env.BROKERED_SHELL_HOME = saved;
    }
  });

  it('finds a turn by full id, with its session store', async () => {
    const { home } = await populatedHome();
    const found = await new BackupHome({ home }).findTurn('20260301-110000-bbb222');
    expect(found.manifest.message).toBe('second');
    expect(found.store.sessionId).toBe('beta');
  });

  it('finds a turn by unique prefix', async () => {
    const { home } = await populatedHome();
    const found = await new BackupHome({ home }).findTurn('20260301-12');
    expect(found.manifest.id).toBe('20260301-120000-aaa333');
  });

  it("finds 'latest' as the most recently committed turn", async () => {
    const { home } = await populatedHome();
    const backups = new BackupHome({ home });
    expect((await backups.findTurn('latest')).manifest.id).toBe('20260301-120000-aaa333');
    expect((await backups.findTurn('latest', { sessionId: 'beta' })).manifest.id).toBe('20260301-110000-bbb222');
  });

  it('refuses an ambiguous prefix and lists the candidates', async () => {
    const { home } = await populatedHome();
    const error = await new BackupHome({ home }).findTurn('20260301-1').catch((e: unknown) => e);
    expect(error).toMatchObject({ code: ErrorCodes.TURN_NOT_FOUND });
    const details = (error as { details: { candidates: { id: string }[] } }).details;
    expect(details.candidates.map((c) => c.id)).toEqual([
      '20260301-100000-aaa111',
      '20260301-110000-bbb222',
      '20260301-120000-aaa333',
      '20260301-130000-ccc444',
    ]);
    expect((error as Error).message).toContain('20260301-110000-bbb222');
  });

  it('lists an ambiguous prefix one line per candidate, messages escaped, at most ten', async () => {
    const home = await tempDir('bsh-home-many-');
    const store = closeLater(await SessionBackupStore.open({ home, sessionId: 'many' }));
    const ids = Array.from({ length: 12 }, (_, i) => `20260401-1000${String(i).padStart(2, '0')}-abc${String(i).padStart(3, '0')}`);
    for (const id of ids) {
      await store.beginTurn(id);
      await store.commitTurn(id, `run \u001b[31mred\u001b[0m\nsecond line`);
    }
    const error = await new BackupHome({ home }).findTurn('20260401').catch((e: unknown) => e);
    const lines = (error as Error).message.split('\n');
    expect(lines[0]).toBe('turn reference "20260401" is ambiguous; it matches:');
    expect(lines.slice(1, 11)).toEqual(ids.slice(0, 10).map((id) => `  ${id}  (session many)  run \\x1b[31mred\\x1b[0m …`));
    expect(lines.slice(11)).toEqual(['  … and 2 more: give more of the id']);
    expect((error as { details: { candidates: unknown[] } }).details.candidates).toHaveLength(12);
  });

  it.each(['20990101-000000-ffffff', 'nope', '', '../x'])('reports %j as TURN_NOT_FOUND', async (ref) => {
    const { home } = await populatedHome();
    await expect(new BackupHome({ home }).findTurn(ref)).rejects.toMatchObject({ code: ErrorCodes.TURN_NOT_FOUND });
  });

  it('reports an unknown session as TURN_NOT_FOUND without creating it', async () => {
    const { home } = await populatedHome();
    const backups = new BackupHome({ home });
    await expect(backups.findTurn('latest', { sessionId: 'gamma' })).rejects.toMatchObject({ code: ErrorCodes.TURN_NOT_FOUND });
    expect(await backups.listSessions()).toEqual(['alpha', 'beta']);
  });

  it("has no 'latest' in an empty home", async () => {
    const home = await tempDir('bsh-home-');
    const backups = new BackupHome({ home });
    expect(await backups.listSessions()).toEqual([]);
    expect(await backups.listTurns()).toEqual([]);
    await expect(backups.findTurn('latest')).rejects.toMatchObject({ code: ErrorCodes.TURN_NOT_FOUND });
  });

  it('lists around a damaged manifest instead of failing', async () => {
    const { home } = await populatedHome();
    const turns = path.join(home, 'workspace', 'sessions', 'alpha', 'modify_backup', 'turns');
    await fs.writeFile(path.join(turns, '20260301-100000-aaa111.json'), '{"version": 1, "id": "trunc');
    const backups = new BackupHome({ home });
    expect((await backups.listTurns()).map((t) => t.id)).not.toContain('20260301-100000-aaa111');
    const alpha = await backups.session('alpha');
    await expect(alpha.readTurn('20260301-100000-aaa111')).rejects.toMatchObject({ code: ErrorCodes.BACKUP_FAILED });
    // A damaged manifest makes blob references uncountable: refuse rather than under-count.
    await expect(alpha.referencedBlobs()).rejects.toMatchObject({ code: ErrorCodes.BACKUP_FAILED });
  });

  it('restores a found turn through its store', async () => {
    const { home, work } = await populatedHome();
    const { store, manifest } = await new BackupHome({ home }).findTurn('20260301-120000');
    const report = await store.restore(manifest);
    expect(report.restored).toMatchObject([{ path: path.join(work, 'a.txt'), action: 'recreate' }]);
    expect(await fs.readFile(path.join(work, 'a.txt'), 'utf8')).toBe('a');
  });
});
