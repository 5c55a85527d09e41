import { chmodSync, mkdirSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BackupHome } from '../../src/backup/index.js';
import { Broker, ErrorCodes, createLogger, type BrokerRequestInput, type Operation } from '../../src/core/index.js';
import { ModifyBackupPlugin, getModifyBackupHooks } from '../../src/plugins/modify-backup/index.js';
import { SPARE_PREFIX } from '../../src/backup/spare-temps.js';
import { PathResolutionPlugin } from '../../src/plugins/path-resolution/index.js';
import { operationTargets, openTargets } from '../../src/requests/targets.js';
import { allowAll } from '../helpers/bare-broker.js';
import { closeLater, closeOpened } from '../helpers/close-opened.js';
import { tempDir } from '../helpers/serve-process.js';
import { waitFor } from '../helpers/wait-for.js';

let base: string;
let ws: string;
let home: string;
beforeEach(() => {
  base = tempDir('bsh-modify-backup-');
  ws = path.join(base, 'ws');
  home = path.join(base, 'home');
  mkdirSync(ws);
});
afterEach(async () => {
  await closeOpened();
  rmSync(base, { recursive: true, force: true });
});

function setup(options: { enabled?: boolean; fileBackupMaxSizeMB?: number; oversize?: 'deny' | 'skip' } = {}) {
  const plugin = new ModifyBackupPlugin({ home, ...options });
  const broker = closeLater(new Broker({ sessionId: 's1' })).use(new PathResolutionPlugin(), allowAll(), plugin);
  return { broker, plugin };
}

const check = (operation: Operation, paths: Parameters<typeof operationTargets>[1], options: BrokerRequestInput['options'] = {}): BrokerRequestInput => ({
  origin: 'host-op',
  action: 'check',
  operation,
  targets: operationTargets(operation, paths),
  sessionId: 's1',
  options,
});

async function committed(broker: Broker, message = 'turn') {
  const answer = await broker.control('CommitModifyBackup', { commitMsg: message });
  expect(answer).toMatchObject({ ok: true });
  const { store, manifest } = await new BackupHome({ home }).findTurn(String(answer.turnId));
  return { manifest, answer, blob: (p: string) => store.readBlob(manifest.files.find((f) => f.path === p)?.sha256 ?? '') };
}

describe('ModifyBackupPlugin: a tree holding a name that is not UTF-8', () => {
  it('refuses moving it (EILSEQ) rather than record its file under another name', async () => {
    const { broker } = setup();
    const dir = path.join(ws, 'd');
    mkdirSync(dir);
    writeFileSync(path.join(dir, 'ok'), 'fine\n');
    writeFileSync(Buffer.concat([Buffer.from(`${dir}/caf`), Buffer.from([0xe9])]), 'bad\n');
    const outcome = await broker.handle(check('rename', { from: dir, to: path.join(ws, 'e') }));
    expect(outcome).toMatchObject({ ok: false, error: { code: ErrorCodes.BACKUP_FAILED, errno: 'EILSEQ' } });
    expect(readdirSync(ws)).toEqual(['d']);
  });
});

describe('ModifyBackupPlugin', () => {
  it.each<[string, Operation, (f: string, g: string) => Parameters<typeof operationTargets>[1], string[]]>([
    ['delete backs up the path', 'delete', (f) => ({ path: f }), ['f']],
    ['rename backs up both ends', 'rename', (f, g) => ({ from: f, to: g }), ['f', 'g']],
    ['copy backs up only the target', 'copy', (f, g) => ({ from: f, to: g }), ['g']],
    ['chmod keeps the metadata of the path, not its bytes', 'chmod', (f) => ({ path: f }), []],
    ['touch keeps the metadata of the path, not its bytes', 'touch', (f) => ({ path: f }), []],
    ['mkdir backs up nothing', 'mkdir', (_f, g) => ({ path: `${g}.d` }), []],
    ['a hard link backs up nothing', 'link', (f) => ({ from: f, to: `${f}.link` }), []],
  ])('%s', async (_label, operation, paths, expected) => {
    const { broker } = setup();
    const f = path.join(ws, 'f');
    const g = path.join(ws, 'g');
    writeFileSync(f, 'F');
    writeFileSync(g, 'G');
    expect(await broker.handle(check(operation, paths(f, g)))).toMatchObject({ ok: true });
    const { manifest } = await committed(broker);
    expect(manifest.files.map((e) => path.basename(e.path)).sort()).toEqual(expected);
  });

  it('keeps the first version of a path within a turn', async () => {
    const { broker } = setup();
    const f = path.join(ws, 'f');
    writeFileSync(f, 'first');
    await broker.handle(check('truncate', { path: f }));
    writeFileSync(f, 'second');
    await broker.handle(check('delete', { path: f }));
    const { manifest, blob } = await committed(broker);
    expect(manifest.files).toHaveLength(1);
    expect((await blob(f)).toString()).toBe('first');
  });

  it('a change of a file\'s metadata keeps that metadata; a later change of its bytes keeps the bytes too, taken then', async () => {
    const { broker } = setup();
    const f = path.join(ws, 'f');
    writeFileSync(f, 'bytes');
    chmodSync(f, 0o640);
    await broker.handle(check('chmod', { path: f }, { mode: 0o600 }));
    chmodSync(f, 0o600);
    await broker.handle(check('chmod', { path: f }, { mode: 0o644 }));
    await broker.handle(check('delete', { path: f }));
    const { manifest, blob, answer } = await committed(broker);
    expect(manifest.structure?.filter((e) => e.kind === 'metadata')).toEqual([expect.objectContaining({ path: f, kind: 'metadata', operation: 'chmod', mode: 0o640, size: 5 })]);
    expect(manifest.files).toEqual([expect.objectContaining({ path: f, operation: 'delete', mode: 0o600 })]);
    expect((await blob(f)).toString()).toBe('bytes');
    // One file kept, however many records it took.
    expect(answer).toMatchObject({ files: 1 });
  });

  it('a recursive delete backs up every file in the tree, symlinks as symlinks', async () => {
    const { broker } = setup();
    const dir = path.join(ws, 'tree');
    mkdirSync(path.join(dir, 'a', 'b'), { recursive: true });
    writeFileSync(path.join(dir, 'a', 'one'), '1');
    writeFileSync(path.join(dir, 'a', 'b', 'two'), '2');
    symlinkSync('one', path.join(dir, 'a', 'ln'));
    await broker.handle(check('delete', { path: dir }, { recursive: true }));
    const { manifest } = await committed(broker);
    const kinds = Object.fromEntries(manifest.files.map((e) => [path.relative(dir, e.path), e.kind]));
    expect(kinds).toEqual({ 'a/one': 'file', 'a/b/two': 'file', 'a/ln': 'symlink' });
  });

  it('a FIFO is recorded (type and mode) when deleted, renamed or chmodded, in a tree too, and not when opened for writing', async () => {
    const { broker } = setup();
    const fifo = (name: string) => (execFileSync('mkfifo', ['-m', '0640', path.join(ws, name)]), path.join(ws, name));
    mkdirSync(path.join(ws, 'tree'));
    const deleted = fifo('deleted');
    const renamed = fifo('renamed');
    const chmodded = fifo('chmodded');
    const written = fifo('written');
    const inTree = fifo('tree/inside');
    await broker.handle(check('delete', { path: deleted }));
    await broker.handle(check('rename', { from: renamed, to: path.join(ws, 'elsewhere') }));
    await broker.handle(check('chmod', { path: chmodded }));
    await broker.handle({ origin: 'api', action: 'check', operation: 'open', targets: openTargets(written, true), sessionId: 's1' });
    await broker.handle(check('delete', { path: path.join(ws, 'tree') }, { recursive: true }));
    const { manifest, answer } = await committed(broker);
    const special = (manifest.structure ?? []).filter((e) => e.kind === 'special');
    expect(special.map((e) => e.path).sort()).toEqual([chmodded, deleted, inTree, renamed].sort());
    expect(special.every((e) => e.kind === 'special' && e.fileType === 'fifo' && e.mode === 0o640)).toBe(true);
    expect(manifest.files).toEqual([]);
    // The commit's answer (and so run's summary) counts them: the turn did back something up.
    expect(answer).toMatchObject({ files: 4 });
  });

  it('a recursive copy backs up the destination files it will overwrite', async () => {
    const { broker } = setup();
    mkdirSync(path.join(ws, 'src', 'x'), { recursive: true });
    mkdirSync(path.join(ws, 'dst', 'x'), { recursive: true });
    writeFileSync(path.join(ws, 'src', 'x', 'same'), 'new');
    writeFileSync(path.join(ws, 'src', 'only-src'), 'new');
    writeFileSync(path.join(ws, 'dst', 'x', 'same'), 'old');
    await broker.handle(check('copy', { from: path.join(ws, 'src'), to: path.join(ws, 'dst') }, { recursive: true }));
    const { manifest, blob } = await committed(broker);
    expect(manifest.files.map((e) => e.path)).toEqual([path.join(ws, 'dst', 'x', 'same')]);
    expect((await blob(path.join(ws, 'dst', 'x', 'same'))).toString()).toBe('old');
  });

  it('new files need no backup and a write token on one is allowed', async () => {
    const { broker } = setup();
    const outcome = await broker.handle({ origin: 'api', action: 'check', operation: 'open', targets: openTargets(path.join(ws, 'new'), true), sessionId: 's1' });
    expect(outcome.ok).toBe(true);
    expect((await committed(broker)).manifest.files).toEqual([]);
  });

  it('over the size cap: deny by default, metadata only with oversize=skip', async () => {
    const big = () => {
      const f = path.join(ws, 'big');
      writeFileSync(f, Buffer.alloc(1024 * 1024 + 1));
      return f;
    };
    const denying = setup({ fileBackupMaxSizeMB: 1 });
    expect(await denying.broker.handle(check('delete', { path: big() }))).toMatchObject({ ok: false, error: { code: ErrorCodes.BACKUP_TOO_LARGE } });
    rmSync(home, { recursive: true, force: true });
    const skipping = setup({ fileBackupMaxSizeMB: 1, oversize: 'skip' });
    expect(await skipping.broker.handle(check('delete', { path: big() }))).toMatchObject({ ok: true });
    const { manifest } = await committed(skipping.broker);
    expect(manifest.files[0]).toMatchObject({ skipped: 'too-large', blob: null });
  });

  it('EnableModifyBackup off: requests pass, nothing is stored; on again: backups resume', async () => {
    const { broker } = setup();
    const f = path.join(ws, 'f');
    writeFileSync(f, 'x');
    expect(await broker.control('EnableModifyBackup', { enabled: false })).toMatchObject({ ok: true, enabled: false });
    expect(await broker.handle(check('touch', { path: f }))).toMatchObject({ ok: true });
    expect(await broker.control('EnableModifyBackup', { enabled: true, fileBackupMaxSizeMB: 5000 })).toMatchObject({ ok: true, enabled: true, fileBackupMaxSizeMB: 1024 });
    expect(await broker.handle(check('delete', { path: f }))).toMatchObject({ ok: true });
    const { manifest } = await committed(broker);
    expect(manifest.files.map((e) => e.operation)).toEqual(['delete']);
  });

  it('ModifyBackup backs up an explicit path into the open turn', async () => {
    const { broker } = setup();
    const f = path.join(ws, 'f');
    writeFileSync(f, 'explicit');
    expect(await broker.control('ModifyBackup', { targetPath: f })).toMatchObject({ ok: true, backedUp: true });
    expect(await broker.control('ModifyBackup', { targetPath: 'relative' })).toMatchObject({ ok: false, errorCode: ErrorCodes.BAD_REQUEST });
    const { blob } = await committed(broker);
    expect((await blob(f)).toString()).toBe('explicit');
  });

  it('CommitModifyBackup reports the turn id and file count, and a fresh turn follows', async () => {
    const { broker } = setup();
    const f = path.join(ws, 'f');
    writeFileSync(f, 'x');
    await broker.handle(check('delete', { path: f }));
    const { answer, manifest } = await committed(broker, 'my message');
    expect(answer).toMatchObject({ files: 1 });
    expect(manifest).toMatchObject({ message: 'my message', committedAt: expect.any(String) });
    expect(broker.currentTurn).toBeUndefined();
  });

  it.each(['each', 'turn'] as const)('opens the store with durability %s, which an enable command does not change', async (durability) => {
    const plugin = new ModifyBackupPlugin({ home, durability });
    const broker = closeLater(new Broker({ sessionId: 's1' })).use(new PathResolutionPlugin(), allowAll(), plugin);
    const store = await plugin.store(broker);
    expect(store.durability).toBe(durability);
    expect(await broker.control('EnableModifyBackup', { enabled: true, fileBackupMaxSizeMB: 5 })).toMatchObject({ ok: true });
    expect((await plugin.store(broker)).durability).toBe(durability);
  });

  it("opens the store with durability 'turn' when none is given: backups are synced once, at the commit", async () => {
    const plugin = new ModifyBackupPlugin({ home });
    const broker = closeLater(new Broker({ sessionId: 's1' })).use(new PathResolutionPlugin(), allowAll(), plugin);
    expect((await plugin.store(broker)).durability).toBe('turn');
  });

  it('refuses an unknown durability', () => {
    expect(() => new ModifyBackupPlugin({ home, durability: 'sometimes' as 'each' })).toThrow(/durability/);
  });

  it('an unusable store denies modifications (fail closed)', async () => {
    writeFileSync(home, 'a file where the store should be');
    const { broker } = setup();
    const f = path.join(ws, 'f');
    writeFileSync(f, 'safe');
    expect(await broker.handle(check('delete', { path: f }))).toMatchObject({ ok: false, error: { code: ErrorCodes.STORE_UNAVAILABLE } });
    expect(readFileSync(f, 'utf8')).toBe('safe');
  });
});

describe('the exempt hook', () => {
  /** A broker whose exempt tap keeps `ws/tool-cache` (and what is beneath it) out of the turn. */
  function exempting(onAsk: (path: string) => void = () => undefined) {
    const { broker } = setup();
    const cache = path.join(ws, 'tool-cache');
    mkdirSync(cache);
    getModifyBackupHooks(broker).exempt.tap('test-cache', (p) => {
      onAsk(p);
      return p === cache || p.startsWith(`${cache}/`) ? 'test-cache' : undefined;
    });
    return { broker, cache };
  }

  it('keeps what a tap names out of the turn, neither backed up nor created, and counts it', async () => {
    const { broker, cache } = exempting();
    const old = path.join(cache, 'old');
    writeFileSync(old, 'old');
    const f = path.join(ws, 'f');
    writeFileSync(f, 'F');
    for (const input of [check('delete', { path: old }), check('mkdir', { path: path.join(cache, 'd') }), check('rename', { from: f, to: path.join(cache, 'f') })]) {
      expect(await broker.handle(input)).toMatchObject({ ok: true });
    }
    const { manifest, answer } = await committed(broker);
    expect(manifest.files.map((e) => e.path)).toEqual([f]);
    expect((manifest.structure ?? []).map((e) => `${e.kind} ${e.path}`)).toEqual([`directory ${ws}`]);
    expect(answer).toMatchObject({ files: 1, exempted: { 'test-cache': 3 } });
  });

  it('records the other side of a tree moved out of an exempt folder, and walks no exempt tree', async () => {
    const asked: string[] = [];
    const { broker, cache } = exempting((p) => asked.push(p));
    mkdirSync(path.join(cache, 'tree/sub'), { recursive: true });
    writeFileSync(path.join(cache, 'tree/sub/file'), 'x');
    mkdirSync(path.join(cache, 'gone/deep'), { recursive: true });
    expect(await broker.handle(check('delete', { path: path.join(cache, 'gone') }, { recursive: true }))).toMatchObject({ ok: true });
    expect(asked).toEqual([path.join(cache, 'gone')]);
    expect(await broker.handle(check('rename', { from: path.join(cache, 'tree'), to: path.join(ws, 'tree') }))).toMatchObject({ ok: true });
    const { manifest, answer } = await committed(broker);
    expect((manifest.structure ?? []).map((e) => `${e.kind} ${e.path}`).sort()).toEqual([
      `absent ${path.join(ws, 'tree')}`,
      `absent ${path.join(ws, 'tree/sub')}`,
      `absent ${path.join(ws, 'tree/sub/file')}`,
      `directory ${ws}`,
    ]);
    // Counted once each: the removed folder, the moved folder and what it held.
    expect(answer.exempted).toEqual({ 'test-cache': 4 });
  });

  it('a tap that throws refuses the change (fail closed)', async () => {
    const { broker } = setup();
    getModifyBackupHooks(broker).exempt.tap('test-broken', () => {
      throw new Error('broken tap');
    });
    const f = path.join(ws, 'f');
    writeFileSync(f, 'safe');
    expect(await broker.handle(check('delete', { path: f }))).toMatchObject({ ok: false });
    expect(readFileSync(f, 'utf8')).toBe('safe');
  });

  it('counts nothing without a tap', async () => {
    const { broker } = setup();
    writeFileSync(path.join(ws, 'f'), 'x');
    await broker.handle(check('delete', { path: path.join(ws, 'f') }));
    expect((await committed(broker)).answer.exempted).toEqual({});
  });
});

describe('closing', () => {
  it('removes the spare temp files its store made for backups', async () => {
    const { broker } = setup();
    const f = path.join(ws, 'f');
    writeFileSync(f, 'F');
    expect(await broker.handle(check('delete', { path: f }))).toMatchObject({ ok: true });
    const tmp = path.join(home, 'workspace', 'sessions', 's1', 'modify_backup', 'tmp');
    const spares = () => readdirSync(tmp).filter((name) => name.startsWith(SPARE_PREFIX));
    await waitFor('spare temp files', () => (spares().length > 0 ? true : undefined));
    expect(spares().length).toBeGreaterThan(0);
    await broker.close();
    // A refill still running when the store closed removes what it makes.
    await waitFor('no spare temp files', () => (spares().length === 0 ? true : undefined), 2_000);
    expect(spares()).toEqual([]);
  });
});

describe('its log line', () => {
  /** `countChildren`: count the child loggers made (the count's wrapper loses pino's bindings, so only then). */
  function logged(level: string, countChildren = false) {
    const lines: Array<Record<string, unknown>> = [];
    const logger = createLogger({ level, destination: { write: (text: string) => void lines.push(JSON.parse(text) as Record<string, unknown>) } });
    let children = 0;
    const child = logger.child.bind(logger);
    if (countChildren) {
      logger.child = ((...args: Parameters<typeof logger.child>) => {
        children += 1;
        return child(...args);
      }) as typeof logger.child;
    }
    const broker = closeLater(new Broker({ sessionId: 's1', logger })).use(new PathResolutionPlugin(), allowAll(), new ModifyBackupPlugin({ home }));
    return { broker, lines, children: () => children };
  }

  it('at info, says what it backed up, bound to the request', async () => {
    const { broker, lines } = logged('info');
    const f = path.join(ws, 'f');
    writeFileSync(f, 'F');
    expect(await broker.handle(check('delete', { path: f }))).toMatchObject({ ok: true });
    const line = lines.find((l) => l.msg === 'backed up before change');
    expect(line).toMatchObject({ phase: 'host-modify-backup', path: f, first: true });
    expect(typeof line?.requestId).toBe('string');
  });

  it('below info, makes no child logger for a backup', async () => {
    const { broker, children } = logged('warn', true);
    const [f, g] = [path.join(ws, 'f'), path.join(ws, 'g')];
    writeFileSync(f, 'F');
    writeFileSync(g, 'G');
    expect(await broker.handle(check('delete', { path: f }))).toMatchObject({ ok: true }); // opens the store (its own logger, once)
    const before = children();
    expect(await broker.handle(check('delete', { path: g }))).toMatchObject({ ok: true });
    expect(children()).toBe(before);
  });
});

describe('files created during the turn', () => {
  it('are not backed up when changed again later in the turn (their state before the turn is absent)', async () => {
    const { broker } = setup();
    const temp = path.join(ws, 'sedXYZ');
    const target = path.join(ws, 'f');
    writeFileSync(target, 'original');
    const create = { origin: 'kernel' as const, action: 'check' as const, operation: 'open' as const, targets: openTargets(temp, true), sessionId: 's1' };
    expect(await broker.handle(create)).toMatchObject({ ok: true });
    writeFileSync(temp, 'edited'); // what the command wrote through the granted open
    expect(await broker.handle(check('chown', { path: temp }))).toMatchObject({ ok: true });
    expect(await broker.handle(check('rename', { from: temp, to: target }))).toMatchObject({ ok: true });
    const { manifest, blob } = await committed(broker);
    expect(manifest.files.map((e) => e.path)).toEqual([target]);
    expect((await blob(target)).toString()).toBe('original');
  });

  it('start over in the next turn', async () => {
    const { broker } = setup();
    const f = path.join(ws, 'new');
    await broker.handle({ origin: 'kernel', action: 'check', operation: 'open', targets: openTargets(f, true), sessionId: 's1' });
    writeFileSync(f, 'made in turn 1');
    await committed(broker, 'turn 1');
    await broker.handle(check('delete', { path: f }));
    const { manifest } = await committed(broker, 'turn 2');
    expect(manifest.files.map((e) => e.path)).toEqual([f]);
  });
});
