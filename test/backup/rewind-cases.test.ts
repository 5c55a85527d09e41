/**
 * Rewind, case by case, on the store: a turn recorded through the real modify-backup
 * plugin (a check request before each change, as the kernel supervisor asks), then
 * `restore` of the turn. After each rewind the whole workspace tree — types, modes,
 * owners, mtimes (directories too), content, link targets, xattrs — equals the tree
 * before the turn; what the rewind replaced or removed is in its rescue turn, and
 * restoring that turn gives back the tree the turn left.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { SessionBackupStore } from '../../src/backup/session-store.js';
import type { TurnManifest } from '../../src/backup/index.js';
import { exists, plant, recorder, stamp, stampDirs, treeSnapshot, type Recorder } from './rewind-helpers.js';

const isRoot = process.geteuid?.() === 0;

interface Case {
  rec: Recorder;
  store: SessionBackupStore;
  turn: TurnManifest;
  /** The tree before the turn and as the turn left it. */
  before: Awaited<ReturnType<typeof treeSnapshot>>;
  after: Awaited<ReturnType<typeof treeSnapshot>>;
}

/** Prepare the workspace, snapshot it, run the turn, commit it, snapshot again. */
async function turnOf(prepare: (ws: string) => Promise<void>, act: (rec: Recorder, ws: string) => Promise<void>): Promise<Case> {
  const rec = await recorder();
  await prepare(rec.ws);
  await stampDirs(rec.ws);
  const before = await treeSnapshot(rec.ws);
  await act(rec, rec.ws);
  const turn = await rec.commit('the turn');
  const after = await treeSnapshot(rec.ws);
  return { rec, store: await rec.backups.session(turn.sessionId), turn, before, after };
}

/** Rewind the turn: no conflict, no failure, the tree as before; then undo the rewind: the tree as the turn left it. */
async function rewindAndUndo(c: Case) {
  const report = await c.store.restore(c.turn.id);
  expect(report.conflicts).toEqual([]);
  expect(report.failed).toEqual([]);
  expect(await treeSnapshot(c.rec.ws)).toEqual(c.before);
  const rescue = await c.store.readTurn(report.rescueTurnId!);
  expect(rescue).toMatchObject({ kind: 'restore', restoreOf: c.turn.id });
  const undo = await c.store.restore(rescue);
  expect(undo.conflicts).toEqual([]);
  expect(undo.failed).toEqual([]);
  expect(await treeSnapshot(c.rec.ws)).toEqual(c.after);
  return { report, rescue, undo };
}

describe('rewind of one turn', () => {
  it('modified file: previous content, mode and times', async () => {
    const c = await turnOf(
      (ws) => plant(path.join(ws, 'f'), 'before\n', 0o640),
      (rec, ws) => rec.write(path.join(ws, 'f'), 'after\n'),
    );
    const { report } = await rewindAndUndo(c);
    // Changed in place: the directory's names did not change, so only the file is restored (and the restore's temp file leaves no trace on the directory's times).
    expect(report.restored).toMatchObject([{ path: path.join(c.rec.ws, 'f'), action: 'replace', kind: 'file', timesExact: true }]);
  });

  it('deleted file: back, and the directory it was in gets its mtime back', async () => {
    const c = await turnOf(
      (ws) => plant(path.join(ws, 'sub', 'f'), 'keep me\n', 0o600),
      (rec, ws) => rec.unlink(path.join(ws, 'sub', 'f')),
    );
    expect(c.after['sub']?.mtimeNs).not.toBe(c.before['sub']?.mtimeNs);
    await rewindAndUndo(c);
  });

  it('renamed file (mv a b): a comes back, b (created by the turn) goes', async () => {
    const c = await turnOf(
      (ws) => plant(path.join(ws, 'a'), 'the bytes of a\n', 0o600),
      (rec, ws) => rec.rename(path.join(ws, 'a'), path.join(ws, 'b')),
    );
    expect(c.turn.structure?.find((e) => e.path === path.join(c.rec.ws, 'b'))).toMatchObject({ kind: 'absent', operation: 'rename' });
    const { report } = await rewindAndUndo(c);
    expect(report.restored).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ path: path.join(c.rec.ws, 'b'), kind: 'absent', action: 'remove' }),
        expect.objectContaining({ path: path.join(c.rec.ws, 'a'), kind: 'file', action: 'recreate' }),
      ]),
    );
  });

  it('renamed over an existing file (mv a c): both come back', async () => {
    const c = await turnOf(
      async (ws) => {
        await plant(path.join(ws, 'a'), 'a\n', 0o600, 1_500_000_001);
        await plant(path.join(ws, 'c'), 'the old c\n', 0o644, 1_500_000_002);
      },
      (rec, ws) => rec.rename(path.join(ws, 'a'), path.join(ws, 'c')),
    );
    await rewindAndUndo(c);
  });

  it('renamed directory (mv d e): the tree is back under d with its modes and times, e is gone', async () => {
    const c = await turnOf(
      async (ws) => {
        await plant(path.join(ws, 'd', 'top'), 'top\n', 0o644);
        await plant(path.join(ws, 'd', 'sub', 'deep'), 'deep\n', 0o600);
        await fs.symlink('../top', path.join(ws, 'd', 'sub', 'link'));
        await fs.chmod(path.join(ws, 'd', 'sub'), 0o750);
        await fs.chmod(path.join(ws, 'd'), 0o711);
      },
      (rec, ws) => rec.rename(path.join(ws, 'd'), path.join(ws, 'e')),
    );
    expect(await exists(path.join(c.rec.ws, 'd'))).toBe(false);
    await rewindAndUndo(c);
  });

  it('created file: removed, kept in the rescue turn, back after undo', async () => {
    const c = await turnOf(
      async () => undefined,
      (rec, ws) => rec.write(path.join(ws, 'new.txt'), 'made by the turn\n'),
    );
    const created = path.join(c.rec.ws, 'new.txt');
    expect(c.turn.files).toEqual([]);
    expect(c.turn.structure?.map((e) => [e.path, e.kind])).toEqual([
      [created, 'absent'],
      [c.rec.ws, 'directory'],
    ]);
    const { rescue } = await rewindAndUndo(c);
    const kept = rescue.files.find((f) => f.path === created);
    expect(kept).toMatchObject({ kind: 'file', operation: 'restore', size: 17 });
    expect((await c.store.readBlob(kept!.sha256!)).toString()).toBe('made by the turn\n');
  });

  it('created directory tree: removed deepest first, back after undo with its modes', async () => {
    const c = await turnOf(
      async () => undefined,
      async (rec, ws) => {
        await rec.mkdir(path.join(ws, 'out'), 0o750);
        await rec.mkdir(path.join(ws, 'out', 'lib'), 0o700);
        await rec.write(path.join(ws, 'out', 'lib', 'a.o'), 'object\n');
        await rec.write(path.join(ws, 'out', 'main'), 'binary\n');
        await rec.symlink('lib/a.o', path.join(ws, 'out', 'alias'));
      },
    );
    const { report } = await rewindAndUndo(c);
    expect(report.restored.filter((r) => r.action === 'remove').map((r) => path.relative(c.rec.ws, r.path))).toEqual(['out/lib/a.o', 'out/lib', 'out/main', 'out/alias', 'out'].sort((a, b) => b.split('/').length - a.split('/').length));
  });

  it('rm -rf of a tree: every directory comes back with its mode and times', async () => {
    const c = await turnOf(
      async (ws) => {
        await plant(path.join(ws, 'tree', 'top'), 'top\n', 0o644);
        await plant(path.join(ws, 'tree', 'private', 'key'), 'secret\n', 0o600);
        await plant(path.join(ws, 'tree', 'private', 'empty-dir', '.keep'), '', 0o644);
        await fs.rm(path.join(ws, 'tree', 'private', 'empty-dir', '.keep'));
        await fs.chmod(path.join(ws, 'tree', 'private'), 0o700);
        await fs.chmod(path.join(ws, 'tree', 'private', 'empty-dir'), 0o1777);
      },
      (rec, ws) => rec.rmTree(path.join(ws, 'tree')),
    );
    await rewindAndUndo(c);
  });

  it('symlink whose target changed (ln -sf), and a link replaced by a file', async () => {
    const c = await turnOf(
      async (ws) => {
        await fs.symlink('releases/v1', path.join(ws, 'current'));
        await fs.symlink('config.real', path.join(ws, 'config'));
        await stamp(path.join(ws, 'current'), 1_500_000_003);
      },
      async (rec, ws) => {
        await rec.unlink(path.join(ws, 'current'));
        await rec.symlink('releases/v2', path.join(ws, 'current'));
        await rec.unlink(path.join(ws, 'config'));
        await rec.write(path.join(ws, 'config'), 'inline config\n');
      },
    );
    await rewindAndUndo(c);
  });

  it('metadata only: chmod, times, xattrs (added, changed, removed), owner', async () => {
    const c = await turnOf(
      async (ws) => {
        await plant(path.join(ws, 'mode'), 'm\n', 0o644);
        await plant(path.join(ws, 'times'), 't\n', 0o644);
        await plant(path.join(ws, 'attrs'), 'x\n', 0o644);
        await plant(path.join(ws, 'owner'), 'o\n', 0o644);
        await fs.mkdir(path.join(ws, 'dir'), { mode: 0o755 });
        const { native } = await import('../../src/native/loader.js');
        native().setXattr(path.join(ws, 'attrs'), 'user.colour', Buffer.from('blue'));
        native().setXattr(path.join(ws, 'attrs'), 'user.gone', Buffer.from('soon'));
        native().setXattr(path.join(ws, 'dir'), 'user.kept', Buffer.from('1'));
      },
      async (rec, ws) => {
        await rec.chmod(path.join(ws, 'mode'), 0o600);
        await rec.touch(path.join(ws, 'times'), 946_684_800_000_000_000n, 946_684_800_000_000_000n);
        await rec.setXattr(path.join(ws, 'attrs'), 'user.colour', 'red');
        await rec.setXattr(path.join(ws, 'attrs'), 'user.new', 'added');
        await rec.change('xattr', { path: path.join(ws, 'attrs') }, async () => (await import('../../src/native/loader.js')).native().removeXattr(path.join(ws, 'attrs'), 'user.gone'));
        await rec.setXattr(path.join(ws, 'dir'), 'user.added', 'by the turn');
        await rec.chmod(path.join(ws, 'dir'), 0o700);
        if (isRoot) await rec.chown(path.join(ws, 'owner'), 1234, 5678);
      },
    );
    // The content did not change: each is still seen as changed (mode, mtime, xattrs, owner) and put back.
    const { report } = await rewindAndUndo(c);
    const restored = report.restored.map((r) => path.relative(c.rec.ws, r.path));
    expect(restored).toEqual(expect.arrayContaining(['mode', 'times', 'attrs', 'dir', ...(isRoot ? ['owner'] : [])]));
  });

  it('a second rewind finds everything as before and changes nothing', async () => {
    const c = await turnOf(
      (ws) => plant(path.join(ws, 'f'), 'before\n'),
      async (rec, ws) => {
        await rec.write(path.join(ws, 'f'), 'after\n');
        await rec.write(path.join(ws, 'g'), 'new\n');
      },
    );
    await c.store.restore(c.turn.id);
    const again = await c.store.restore(c.turn.id);
    expect(again.restored).toEqual([]);
    expect(again.conflicts).toEqual([]);
    expect(again.rescueTurnId).toBeUndefined();
    expect(again.skipped.map((s) => s.reason)).toEqual(['unchanged', 'unchanged', 'unchanged']);
  });

  it('PATH filters: a directory named selects what lies under it', async () => {
    const c = await turnOf(
      async (ws) => plant(path.join(ws, 'keep'), 'k\n'),
      async (rec, ws) => {
        await rec.mkdir(path.join(ws, 'gen'));
        await rec.write(path.join(ws, 'gen', 'x'), 'x\n');
        await rec.write(path.join(ws, 'keep'), 'changed\n');
      },
    );
    const report = await c.store.restore(c.turn.id, { paths: [path.join(c.rec.ws, 'gen')] });
    expect(report.notInTurn).toEqual([]);
    expect(report.restored.map((r) => [path.relative(c.rec.ws, r.path), r.action])).toEqual([
      ['gen/x', 'remove'],
      ['gen', 'remove'],
    ]);
    expect(await fs.readFile(path.join(c.rec.ws, 'keep'), 'utf8')).toBe('changed\n');
  });

  it('a dry run reports the removals and changes nothing', async () => {
    const c = await turnOf(
      async () => undefined,
      (rec, ws) => rec.write(path.join(ws, 'new'), 'n\n'),
    );
    const turnsBefore = await c.store.listTurns();
    const report = await c.store.restore(c.turn.id, { dryRun: true });
    expect(report.restored).toMatchObject([{ path: path.join(c.rec.ws, 'new'), kind: 'absent', action: 'remove' }, { kind: 'directory' }]);
    expect(await treeSnapshot(c.rec.ws)).toEqual(c.after);
    expect(await c.store.listTurns()).toEqual(turnsBefore);
  });
});

describe('conflicts', () => {
  it('a file changed after the turn is left alone and listed; --force restores it and keeps the later version', async () => {
    const c = await turnOf(
      (ws) => plant(path.join(ws, 'f'), 'before\n'),
      (rec, ws) => rec.write(path.join(ws, 'f'), 'by the turn\n'),
    );
    const f = path.join(c.rec.ws, 'f');
    await fs.writeFile(f, 'by a person, later\n');
    const refused = await c.store.restore(c.turn.id);
    expect(refused.conflicts).toEqual([{ path: f, reason: 'changed-since-turn', detail: expect.any(String) }]);
    expect(await fs.readFile(f, 'utf8')).toBe('by a person, later\n');

    const forced = await c.store.restore(c.turn.id, { force: true });
    expect(forced.restored.find((r) => r.path === f)).toMatchObject({ forced: true });
    expect(await fs.readFile(f, 'utf8')).toBe('before\n');
    const rescue = await c.store.readTurn(forced.rescueTurnId!);
    const kept = rescue.files.find((e) => e.path === f);
    expect((await c.store.readBlob(kept!.sha256!)).toString()).toBe('by a person, later\n');
  });

  it('an xattr or owner change after the turn is a change too', async () => {
    const c = await turnOf(
      (ws) => plant(path.join(ws, 'f'), 'before\n'),
      (rec, ws) => rec.write(path.join(ws, 'f'), 'by the turn\n'),
    );
    const f = path.join(c.rec.ws, 'f');
    const { native } = await import('../../src/native/loader.js');
    native().setXattr(f, 'user.later', Buffer.from('x'));
    expect((await c.store.restore(c.turn.id)).conflicts).toMatchObject([{ path: f, reason: 'changed-since-turn', detail: expect.stringContaining('extended attributes') }]);
    native().removeXattr(f, 'user.later');
    if (isRoot) {
      const { uid, gid } = await fs.lstat(f);
      await fs.chown(f, 4321, 8765);
      expect((await c.store.restore(c.turn.id)).conflicts).toMatchObject([{ path: f, detail: expect.stringContaining('owner is 4321:8765') }]);
      await fs.chown(f, uid, gid);
    }
    expect((await c.store.restore(c.turn.id)).conflicts).toEqual([]);
  });

  it('a file created by the turn and edited since stays, even with force it is only removed after being kept', async () => {
    const c = await turnOf(
      async () => undefined,
      (rec, ws) => rec.write(path.join(ws, 'new'), 'by the turn\n'),
    );
    const file = path.join(c.rec.ws, 'new');
    await fs.appendFile(file, 'and a person\n');
    expect((await c.store.restore(c.turn.id)).conflicts).toMatchObject([{ path: file, reason: 'changed-since-turn' }]);
    expect(await exists(file)).toBe(true);
    const forced = await c.store.restore(c.turn.id, { force: true });
    expect(await exists(file)).toBe(false);
    const kept = (await c.store.readTurn(forced.rescueTurnId!)).files.find((e) => e.path === file);
    expect((await c.store.readBlob(kept!.sha256!)).toString()).toBe('by the turn\nand a person\n');
  });

  it('a directory the turn created that now holds someone else’s file is not removed, even with force', async () => {
    const c = await turnOf(
      async () => undefined,
      async (rec, ws) => {
        await rec.mkdir(path.join(ws, 'build'));
        await rec.write(path.join(ws, 'build', 'out'), 'o\n');
      },
    );
    await fs.writeFile(path.join(c.rec.ws, 'build', 'notes'), 'a person put this here\n');
    for (const force of [false, true]) {
      const report = await c.store.restore(c.turn.id, { force });
      expect(report.conflicts).toMatchObject([{ path: path.join(c.rec.ws, 'build'), reason: 'not-empty' }]);
      expect(await fs.readFile(path.join(c.rec.ws, 'build', 'notes'), 'utf8')).toBe('a person put this here\n');
    }
    expect(await exists(path.join(c.rec.ws, 'build', 'out'))).toBe(false);
  });
});

describe('undo of a restore', () => {
  it('removes the files the restore re-created (a deleted file brought back goes again)', async () => {
    const c = await turnOf(
      (ws) => plant(path.join(ws, 'gone', 'f'), 'deleted by the turn\n'),
      async (rec, ws) => {
        await rec.unlink(path.join(ws, 'gone', 'f'));
        await rec.rmdir(path.join(ws, 'gone'));
      },
    );
    const report = await c.store.restore(c.turn.id);
    expect(await exists(path.join(c.rec.ws, 'gone', 'f'))).toBe(true);
    const rescue = await c.store.readTurn(report.rescueTurnId!);
    expect(rescue.structure?.filter((e) => e.kind === 'absent').map((e) => path.relative(c.rec.ws, e.path)).sort()).toEqual(['gone', 'gone/f']);
    // The newest restore turn of the session is that rescue turn: what --undo-last restores.
    expect((await c.rec.backups.lastRestore({ sessionId: c.turn.sessionId })).manifest.id).toBe(rescue.id);
    await c.store.restore(rescue);
    expect(await treeSnapshot(c.rec.ws)).toEqual(c.after);
  });
});

describe('journal and manifest', () => {
  it('records created paths without blobs; a manifest without `structure` (older stores) still reads and restores', async () => {
    const c = await turnOf(
      (ws) => plant(path.join(ws, 'f'), 'before\n'),
      async (rec, ws) => {
        for (let i = 0; i < 200; i++) await rec.write(path.join(ws, `gen-${i}`), `${i}\n`);
        await rec.write(path.join(ws, 'f'), 'after\n');
      },
    );
    expect(c.turn.files).toHaveLength(1);
    expect(c.turn.structure?.filter((e) => e.kind === 'absent')).toHaveLength(200);
    // One blob (f's): created paths cost none.
    const blobDirs = await fs.readdir(path.join(c.store.root, 'blobs'));
    const blobs = (await Promise.all(blobDirs.map((d) => fs.readdir(path.join(c.store.root, 'blobs', d))))).flat();
    expect(blobs).toHaveLength(1);

    // The same turn as a store written before this change would hold it: files only.
    const file = path.join(c.store.root, 'turns', `${c.turn.id}.json`);
    const { structure: _structure, ...legacy } = JSON.parse(await fs.readFile(file, 'utf8')) as TurnManifest;
    await fs.writeFile(file, `${JSON.stringify(legacy)}\n`);
    const read = await c.store.readTurn(c.turn.id);
    expect(read.structure).toBeUndefined();
    const report = await c.store.restore(read);
    expect(report.restored.map((r) => r.path)).toEqual([path.join(c.rec.ws, 'f')]);
    expect(await fs.readFile(path.join(c.rec.ws, 'f'), 'utf8')).toBe('before\n');
  });
});
