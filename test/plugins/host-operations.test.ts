import { execFileSync } from 'node:child_process';
import { closeSync, constants, openSync, promises as fs, readdirSync, statSync, type BigIntStats } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  Broker,
  ErrorCodes,
  Stage,
  hostOperationSchema,
  type BrokerPlugin,
  type BrokerRequestInput,
  type HostOperation,
  type Outcome,
  type RequestOptions,
} from '../../src/core/index.js';
import {
  HostOperationsPlugin,
  hostOperationsOptionsSchema,
  type HostOperationsOptions,
} from '../../src/plugins/host-operations/index.js';
import { copyFile } from '../../src/plugins/host-operations/copy.js';
import { FsAt } from '../../src/plugins/host-operations/fs-at.js';
import { PathResolutionPlugin } from '../../src/plugins/path-resolution/index.js';
import { operationTargets, type OperationPaths } from '../../src/requests/targets.js';

// Each test gets its own tree: root/work holds the files, root/xdg the trash, root/other a
// directory a swapped-in symlink points at.
let root: string;
let work: string;
let other: string;
let env: { XDG_DATA_HOME: string; HOME: string };
let trash: string;

beforeEach(async () => {
  root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'bsh-hostops-')));
  work = path.join(root, 'work');
  other = path.join(root, 'other');
  await fs.mkdir(work);
  await fs.mkdir(other);
  env = { XDG_DATA_HOME: path.join(root, 'xdg'), HOME: path.join(root, 'home') };
  trash = path.join(env.XDG_DATA_HOME, 'Trash');
});

afterEach(async () => {
  await fs.rm(root, { recursive: true, force: true });
});

const umask = process.umask();
const w = (...parts: string[]) => path.join(work, ...parts);

/** Lets every request through; what is under test is what happens after the decision. */
const allowAll: BrokerPlugin = {
  name: 'test-allow-all',
  apply(broker) {
    broker.hooks.evaluatePolicy.tap('test-allow-all', () => ({ verdict: 'sandbox', source: 'test' }));
  },
};

function makeBroker(options: HostOperationsOptions = {}, ...extra: BrokerPlugin[]): Broker {
  return new Broker({ sessionId: 's1' }).use(
    new PathResolutionPlugin({ home: env.HOME }),
    allowAll,
    new HostOperationsPlugin({ env, ...options }),
    ...extra,
  );
}

function hostOp(operation: HostOperation, paths: OperationPaths, options: RequestOptions = {}): BrokerRequestInput {
  return {
    origin: 'host-op',
    action: 'host-op',
    operation,
    targets: operationTargets(operation, { ...paths, ...(options.symbolic ? { symbolic: true } : {}) }),
    sessionId: 's1',
    options,
  };
}

function run(operation: HostOperation, paths: OperationPaths, options: RequestOptions = {}, broker = makeBroker()): Promise<Outcome> {
  return broker.handle(hostOp(operation, paths, options));
}

function expectOk(outcome: Outcome): void {
  expect(outcome.error).toBeUndefined();
  expect(outcome).toMatchObject({ ok: true, wireDecision: 'host-op' });
}

function expectErrno(outcome: Outcome, errno: string): void {
  expect(outcome.ok).toBe(false);
  expect(outcome.wireDecision).toBe('host-op');
  expect(outcome.error).toMatchObject({ code: ErrorCodes.HOST_OP_FAILED, errno, plugin: HostOperationsPlugin.PLUGIN_NAME });
}

async function exists(p: string): Promise<boolean> {
  return fs.lstat(p).then(
    () => true,
    () => false,
  );
}

const modeOf = async (p: string) => (await fs.lstat(p)).mode & 0o7777;

/** Every entry under `dir`: bytes for files, `-> text` for links, '/' for directories, with modes. */
async function snapshot(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const walk = async (current: string, rel: string): Promise<void> => {
    for (const name of (await fs.readdir(current)).sort()) {
      const full = path.join(current, name);
      const key = rel ? `${rel}/${name}` : name;
      const info = await fs.lstat(full);
      if (info.isSymbolicLink()) out[key] = `-> ${await fs.readlink(full)}`;
      else if (info.isDirectory()) {
        out[`${key}/`] = (info.mode & 0o7777).toString(8);
        await walk(full, key);
      } else out[key] = `${(info.mode & 0o7777).toString(8)} ${await fs.readFile(full, 'utf8')}`;
    }
  };
  await walk(dir, '');
  return out;
}

/** The names in the trash's files/ and info/ (empty when the trash was never created). */
async function trashContents(): Promise<{ files: string[]; info: string[] }> {
  const list = (sub: string) => fs.readdir(path.join(trash, sub)).catch(() => [] as string[]);
  return { files: (await list('files')).sort(), info: (await list('info')).sort() };
}

/** A tree with nested files, an empty directory and a relative symlink. */
async function makeTree(at: string): Promise<void> {
  await fs.mkdir(path.join(at, 'sub', 'deeper'), { recursive: true });
  await fs.mkdir(path.join(at, 'empty'));
  await fs.writeFile(path.join(at, 'top.txt'), 'top');
  await fs.writeFile(path.join(at, 'sub', 'mid.txt'), 'mid', { mode: 0o600 });
  await fs.writeFile(path.join(at, 'sub', 'deeper', 'low.sh'), '#!/bin/sh\n');
  await fs.chmod(path.join(at, 'sub', 'deeper', 'low.sh'), 0o750);
  await fs.chmod(path.join(at, 'sub'), 0o751);
  await fs.symlink('sub/mid.txt', path.join(at, 'link-to-mid'));
  await fs.symlink('/nowhere/at/all', path.join(at, 'dangling'));
}

describe('HostOperationsPlugin', () => {
  it('taps every host operation, and only those', () => {
    const broker = makeBroker();
    for (const operation of hostOperationSchema.options) {
      expect(broker.hooks.executeHostOp.get(operation)?.isUsed(), operation).toBe(true);
    }
    expect(broker.hooks.executeHostOp.get('open')).toBeUndefined();
  });

  it.each([
    ['an unknown key', { bogus: true }],
    ['an unknown delete mode', { defaultDeleteMode: 'shred' }],
    ['a non-string env value', { env: { HOME: 1 } }],
  ])('rejects %s with INVALID_OPTIONS', (_label, options) => {
    expect(() => new HostOperationsPlugin(options as never)).toThrow(expect.objectContaining({ code: ErrorCodes.INVALID_OPTIONS }));
  });

  it('defaults to the trash for delete', () => {
    expect(hostOperationsOptionsSchema.parse({})).toEqual({ defaultDeleteMode: 'trash', volatileRoots: [] });
    const options = { defaultDeleteMode: 'unlink' } satisfies HostOperationsOptions;
    // @ts-expect-error not a delete mode
    const wrong: HostOperationsOptions = { defaultDeleteMode: 'shred' };
    expect([options, wrong]).toHaveLength(2);
  });
});

describe('delete', () => {
  it('moves a file into the trash with its bytes and an info file', async () => {
    await fs.writeFile(w('a.txt'), 'precious');
    const outcome = await run('delete', { path: w('a.txt') });
    expectOk(outcome);
    const trashed = path.join(trash, 'files', 'a.txt');
    expect(outcome.result).toEqual({ trashedTo: trashed });
    expect(await exists(w('a.txt'))).toBe(false);
    expect(await fs.readFile(trashed, 'utf8')).toBe('precious');
    const info = await fs.readFile(path.join(trash, 'info', 'a.txt.trashinfo'), 'utf8');
    expect(info).toMatch(/^\[Trash Info\]\n/);
    expect(info).toContain(`Path=${w('a.txt')}\n`);
  });

  it.each([
    ['the request', {}, { deleteMode: 'unlink' as const }],
    ['the plugin default', { defaultDeleteMode: 'unlink' as const }, {}],
  ])('removes a file for good when %s says unlink', async (_label, pluginOptions, requestOptions) => {
    await fs.writeFile(w('a.txt'), 'gone');
    const outcome = await run('delete', { path: w('a.txt') }, requestOptions, makeBroker(pluginOptions));
    expectOk(outcome);
    expect(outcome.result).toEqual({});
    expect(await exists(w('a.txt'))).toBe(false);
    expect(await trashContents()).toEqual({ files: [], info: [] });
  });

  it('lets the request override an unlink default with the trash', async () => {
    await fs.writeFile(w('a.txt'), 'keep me');
    const outcome = await run('delete', { path: w('a.txt') }, { deleteMode: 'trash' }, makeBroker({ defaultDeleteMode: 'unlink' }));
    expectOk(outcome);
    expect(await fs.readFile(path.join(trash, 'files', 'a.txt'), 'utf8')).toBe('keep me');
  });

  it('gives a second item of the same name its own trash name', async () => {
    for (const text of ['first', 'second']) {
      await fs.writeFile(w('a.txt'), text);
      expectOk(await run('delete', { path: w('a.txt') }));
    }
    expect(await trashContents()).toEqual({ files: ['a.2.txt', 'a.txt'], info: ['a.2.txt.trashinfo', 'a.txt.trashinfo'] });
    expect(await fs.readFile(path.join(trash, 'files', 'a.2.txt'), 'utf8')).toBe('second');
  });

  it.each(['trash', 'unlink'] as const)('in %s mode removes a symlink itself, never its target', async (deleteMode) => {
    await fs.writeFile(w('target.txt'), 'target');
    await fs.symlink(w('target.txt'), w('link'));
    const outcome = await run('delete', { path: w('link') }, { deleteMode });
    expectOk(outcome);
    expect(outcome.targets[0]).toMatchObject({ resolved: w('link'), kind: 'symlink' });
    expect(await exists(w('link'))).toBe(false);
    expect(await fs.readFile(w('target.txt'), 'utf8')).toBe('target');
    if (deleteMode === 'trash') {
      expect(await fs.readlink(path.join(trash, 'files', 'link'))).toBe(w('target.txt'));
    }
  });

  it.each(['trash', 'unlink'] as const)('in %s mode refuses a non-empty directory without recursive (ENOTEMPTY)', async (deleteMode) => {
    await makeTree(w('tree'));
    const before = await snapshot(w('tree'));
    expectErrno(await run('delete', { path: w('tree') }, { deleteMode }), 'ENOTEMPTY');
    expect(await snapshot(w('tree'))).toEqual(before);
    expect(await trashContents()).toEqual({ files: [], info: [] });
  });

  it.each(['trash', 'unlink'] as const)('in %s mode removes an empty directory without recursive', async (deleteMode) => {
    await fs.mkdir(w('empty'));
    expectOk(await run('delete', { path: w('empty') }, { deleteMode }));
    expect(await exists(w('empty'))).toBe(false);
  });

  it('with recursive trashes a whole tree as it was', async () => {
    await makeTree(w('tree'));
    const before = await snapshot(w('tree'));
    const outcome = await run('delete', { path: w('tree') }, { recursive: true });
    expectOk(outcome);
    expect(outcome.result?.trashedTo).toBe(path.join(trash, 'files', 'tree'));
    expect(await exists(w('tree'))).toBe(false);
    expect(await snapshot(path.join(trash, 'files', 'tree'))).toEqual(before);
  });

  it('with recursive and unlink removes a whole tree, following none of its links', async () => {
    await makeTree(w('tree'));
    await fs.writeFile(path.join(other, 'keep.txt'), 'keep');
    await fs.symlink(other, w('tree', 'sub', 'to-other'));
    expectOk(await run('delete', { path: w('tree') }, { recursive: true, deleteMode: 'unlink' }));
    expect(await exists(w('tree'))).toBe(false);
    expect(await snapshot(other)).toEqual({ 'keep.txt': '644 keep' });
    expect(await trashContents()).toEqual({ files: [], info: [] });
  });

  it.each([
    ['trash', true],
    ['unlink', true],
    ['trash', false],
    ['unlink', false],
  ] as const)('in %s mode a missing path with force=%s', async (deleteMode, force) => {
    const outcome = await run('delete', { path: w('missing') }, { deleteMode, force });
    // The parent exists, so resolution succeeds and reports the path as absent.
    expect(outcome.targets[0]).toMatchObject({ resolved: w('missing'), kind: 'absent' });
    if (force) {
      expectOk(outcome);
      expect(outcome.result).toEqual({});
    } else {
      expectErrno(outcome, 'ENOENT');
    }
    expect(await trashContents()).toEqual({ files: [], info: [] });
  });

  it('reaches a trash whose directory path runs through a symlink', async () => {
    const realData = path.join(root, 'real-data');
    await fs.mkdir(realData);
    await fs.symlink(realData, path.join(root, 'data-link'));
    await fs.writeFile(w('a.txt'), 'linked trash');
    const broker = makeBroker({ env: { XDG_DATA_HOME: path.join(root, 'data-link'), HOME: env.HOME } });
    const outcome = await run('delete', { path: w('a.txt') }, {}, broker);
    expectOk(outcome);
    expect(await fs.readFile(path.join(realData, 'Trash', 'files', 'a.txt'), 'utf8')).toBe('linked trash');
    expect(await exists(w('a.txt'))).toBe(false);
  });
});

describe('mkdir', () => {
  it.each([
    ['no mode (0777)', undefined, 0o777],
    ['0755', 0o755, 0o755],
    ['0700', 0o700, 0o700],
    ['0777', 0o777, 0o777],
    ['0750 with recursive', 0o750, 0o750, true],
  ])('creates a directory with %s, less the umask', async (_label, mode, expected, recursive = false) => {
    const outcome = await run('mkdir', { path: w('d') }, { ...(mode === undefined ? {} : { mode }), recursive });
    expectOk(outcome);
    expect((await fs.lstat(w('d'))).isDirectory()).toBe(true);
    expect(await modeOf(w('d'))).toBe(expected & ~umask);
  });

  it.each([
    ['a directory', false, async () => fs.mkdir(w('d'), { mode: 0o700 })],
    ['a file', false, async () => fs.writeFile(w('d'), 'file')],
    ['a file, with recursive', true, async () => fs.writeFile(w('d'), 'file')],
    ['a symlink to a file, with recursive', true, async () => fs.symlink(w('f'), w('d')).then(() => fs.writeFile(w('f'), 'f'))],
  ])('fails with EEXIST on %s', async (_label, recursive, make) => {
    await make();
    const before = await snapshot(work);
    expectErrno(await run('mkdir', { path: w('d') }, { recursive, mode: 0o755 }), 'EEXIST');
    expect(await snapshot(work)).toEqual(before);
    expect(await snapshot(other)).toEqual({});
  });

  it('with recursive accepts a symlink to a directory (mkdir -p) and changes nothing', async () => {
    await fs.symlink(other, w('d'));
    const outcome = await run('mkdir', { path: w('d') }, { recursive: true });
    expectOk(outcome);
    expect(outcome.targets[0]).toMatchObject({ resolved: w('d'), kind: 'symlink' });
    expect(await fs.readlink(w('d'))).toBe(other);
    expect(await snapshot(other)).toEqual({});
  });

  it('with recursive accepts an existing directory and leaves it alone', async () => {
    await fs.mkdir(w('d'));
    await fs.chmod(w('d'), 0o700);
    await fs.writeFile(w('d', 'inside'), 'x');
    expectOk(await run('mkdir', { path: w('d') }, { recursive: true, mode: 0o777 }));
    expect(await modeOf(w('d'))).toBe(0o700);
    expect(await fs.readdir(w('d'))).toEqual(['inside']);
  });
});

describe('rename', () => {
  it('replaces an existing file: its old bytes are gone, and so is the source', async () => {
    await fs.writeFile(w('new.txt'), 'new bytes');
    await fs.writeFile(w('old.txt'), 'old bytes that are longer');
    const inode = (await fs.stat(w('new.txt'))).ino;
    expectOk(await run('rename', { from: w('new.txt'), to: w('old.txt') }));
    expect(await exists(w('new.txt'))).toBe(false);
    expect(await fs.readFile(w('old.txt'), 'utf8')).toBe('new bytes');
    expect((await fs.stat(w('old.txt'))).ino).toBe(inode);
    expect(await fs.readdir(work)).toEqual(['old.txt']);
  });

  it('moves a directory with its contents', async () => {
    await makeTree(w('tree'));
    const before = await snapshot(w('tree'));
    await fs.mkdir(w('dest'));
    expectOk(await run('rename', { from: w('tree'), to: w('dest', 'moved') }));
    expect(await exists(w('tree'))).toBe(false);
    expect(await snapshot(w('dest', 'moved'))).toEqual(before);
  });

  it('fails with EXDEV across devices and leaves both sides untouched', async () => {
    const shm = await fs.realpath(await fs.mkdtemp('/dev/shm/bsh-hostops-'));
    try {
      expect(statSync(shm).dev).not.toBe(statSync(work).dev);
      await fs.writeFile(w('a.txt'), 'stays here');
      await fs.writeFile(path.join(shm, 'a.txt'), 'stays there');
      expectErrno(await run('rename', { from: w('a.txt'), to: path.join(shm, 'a.txt') }), 'EXDEV');
      expect(await fs.readFile(w('a.txt'), 'utf8')).toBe('stays here');
      expect(await fs.readFile(path.join(shm, 'a.txt'), 'utf8')).toBe('stays there');
      expect(await fs.readdir(shm)).toEqual(['a.txt']);
    } finally {
      await fs.rm(shm, { recursive: true, force: true });
    }
  });

  it('renames a symlink as the link itself', async () => {
    await fs.writeFile(w('target.txt'), 'target');
    await fs.symlink('target.txt', w('link'));
    const outcome = await run('rename', { from: w('link'), to: w('renamed') });
    expectOk(outcome);
    expect(outcome.targets.map((t) => [t.role, t.kind])).toEqual([
      ['from', 'symlink'],
      ['to', 'absent'],
    ]);
    expect(await fs.readlink(w('renamed'))).toBe('target.txt');
    expect(await exists(w('link'))).toBe(false);
    expect(await fs.readFile(w('target.txt'), 'utf8')).toBe('target');
  });

  it('fails with ENOENT for a missing source', async () => {
    expectErrno(await run('rename', { from: w('missing'), to: w('b') }), 'ENOENT');
    expect(await fs.readdir(work)).toEqual([]);
  });
});

describe('copy', () => {
  // Set-uid and set-gid are left out, as cp without -p does: the copy would be a privileged program.
  it.each(
    ([[0o644, 0o644], [0o600, 0o600], [0o755, 0o755], [0o777, 0o777], [0o666, 0o666], [0o1755, 0o1755], [0o4750, 0o750], [0o2755, 0o755], [0o6711, 0o711]] as const).map(
      ([mode, copied]) => [mode.toString(8), mode, copied] as const,
    ),
  )(
    'copies a file with its bytes and mode %s (set-id bits left out)',
    async (_label, mode, copied) => {
    const bytes = Buffer.from(Array.from({ length: 300_000 }, (_v, i) => (i * 31) % 256));
    await fs.writeFile(w('src.bin'), bytes);
    await fs.chmod(w('src.bin'), mode);
    expectOk(await run('copy', { from: w('src.bin'), to: w('dst.bin') }));
    expect((await fs.readFile(w('dst.bin'))).equals(bytes)).toBe(true);
    expect(await modeOf(w('dst.bin'))).toBe(copied);
    expect(await modeOf(w('src.bin'))).toBe(mode);
    expect((await fs.readFile(w('src.bin'))).equals(bytes)).toBe(true);
    },
  );

  it('copies an empty file', async () => {
    await fs.writeFile(w('src'), '');
    expectOk(await run('copy', { from: w('src'), to: w('dst') }));
    expect((await fs.lstat(w('dst'))).size).toBe(0);
  });

  it('overwrites an existing file in place: new bytes, nothing left of the old, its own mode kept', async () => {
    await fs.writeFile(w('src'), 'short');
    await fs.writeFile(w('dst'), 'a much longer old content');
    await fs.chmod(w('dst'), 0o600);
    const inode = (await fs.stat(w('dst'))).ino;
    expectOk(await run('copy', { from: w('src'), to: w('dst') }));
    expect(await fs.readFile(w('dst'), 'utf8')).toBe('short');
    expect((await fs.stat(w('dst'))).ino).toBe(inode);
    expect(await modeOf(w('dst'))).toBe(0o600);
  });

  it('with recursive copies a tree, links as links and modes as they were', async () => {
    await makeTree(w('tree'));
    await fs.chmod(w('tree'), 0o705);
    const outcome = await run('copy', { from: w('tree'), to: w('copy') }, { recursive: true });
    expectOk(outcome);
    const copied = await snapshot(w('copy'));
    expect(copied).toEqual(await snapshot(w('tree')));
    expect(copied).toMatchObject({ 'link-to-mid': '-> sub/mid.txt', dangling: '-> /nowhere/at/all', 'sub/': '751' });
    expect(await modeOf(w('copy'))).toBe(0o705);
    expect((await fs.lstat(w('copy', 'link-to-mid'))).isSymbolicLink()).toBe(true);
    // Distinct files, not links to the originals.
    expect((await fs.stat(w('copy', 'top.txt'))).ino).not.toBe((await fs.stat(w('tree', 'top.txt'))).ino);
  });

  it('with recursive keeps a set-gid directory set-gid, and leaves out a set-uid bit and the set-gid of a file', async () => {
    await fs.mkdir(w('tree', 'shared'), { recursive: true });
    await fs.chmod(w('tree', 'shared'), 0o2775);
    await fs.mkdir(w('tree', 'odd'));
    await fs.chmod(w('tree', 'odd'), 0o4755);
    await fs.writeFile(w('tree', 'shared', 'prog'), 'x');
    await fs.chmod(w('tree', 'shared', 'prog'), 0o6755);
    expectOk(await run('copy', { from: w('tree'), to: w('copy') }, { recursive: true }));
    expect(await modeOf(w('copy', 'shared'))).toBe(0o2775);
    expect(await modeOf(w('copy', 'odd'))).toBe(0o755);
    expect(await modeOf(w('copy', 'shared', 'prog'))).toBe(0o755);
  });

  it('fails with EISDIR for a directory without recursive and creates nothing', async () => {
    await makeTree(w('tree'));
    expectErrno(await run('copy', { from: w('tree'), to: w('copy') }), 'EISDIR');
    expect(await exists(w('copy'))).toBe(false);
  });

  it('copies the bytes of the file a source symlink names', async () => {
    await fs.writeFile(path.join(other, 'real.txt'), 'real bytes');
    await fs.chmod(path.join(other, 'real.txt'), 0o640);
    await fs.symlink(path.join(other, 'real.txt'), w('link'));
    const outcome = await run('copy', { from: w('link'), to: w('dst') });
    expectOk(outcome);
    expect(outcome.targets[0]).toMatchObject({ role: 'from', resolved: path.join(other, 'real.txt'), kind: 'file' });
    const info = await fs.lstat(w('dst'));
    expect(info.isFile()).toBe(true);
    expect(info.mode & 0o7777).toBe(0o640);
    expect(await fs.readFile(w('dst'), 'utf8')).toBe('real bytes');
  });

  it.each([
    ['the same path', async () => w('a.txt')],
    ['a hard link to it', async () => (await fs.link(w('a.txt'), w('hard')), w('hard'))],
  ])('refuses to copy a file onto %s, which would empty it', async (_label, makeDestination) => {
    await fs.writeFile(w('a.txt'), 'do not truncate');
    const destination = await makeDestination();
    expectErrno(await run('copy', { from: w('a.txt'), to: destination }), 'EINVAL');
    expect(await fs.readFile(w('a.txt'), 'utf8')).toBe('do not truncate');
  });

  it('a tree copy refuses to write over a file that has another name, and leaves that file as it was', async () => {
    await fs.writeFile(w('kept.txt'), 'the other name\n');
    await fs.mkdir(w('dst'));
    await fs.link(w('kept.txt'), w('dst', 'f'));
    await fs.mkdir(w('src'));
    await fs.writeFile(w('src', 'f'), 'EVIL\n');
    expectErrno(await run('copy', { from: w('src'), to: w('dst') }, { recursive: true }), 'EPERM');
    expect(await fs.readFile(w('kept.txt'), 'utf8')).toBe('the other name\n');
  });

  it.each([
    ['with no reader', false],
    ['with a reader', true],
  ])('a tree copy refuses to write over a FIFO %s (EINVAL) instead of waiting on it', async (_label, reader) => {
    await fs.mkdir(w('dst'));
    execFileSync('mkfifo', [w('dst', 'p')]);
    await fs.mkdir(w('src'));
    await fs.writeFile(w('src', 'p'), 'hi\n');
    const held = reader ? openSync(w('dst', 'p'), constants.O_RDONLY | constants.O_NONBLOCK) : undefined;
    try {
      expectErrno(await run('copy', { from: w('src'), to: w('dst') }, { recursive: true }), 'EINVAL');
      expect((await fs.lstat(w('dst', 'p'))).isFIFO()).toBe(true);
    } finally {
      if (held !== undefined) closeSync(held);
    }
  });

  it('refuses to copy a directory into itself', async () => {
    await makeTree(w('tree'));
    const before = await snapshot(w('tree'));
    expectErrno(await run('copy', { from: w('tree'), to: w('tree', 'sub', 'again') }, { recursive: true }), 'EINVAL');
    expect(await snapshot(w('tree'))).toEqual(before);
  });

  it('refuses to write through a symlink at the destination (ELOOP) and leaves its target alone', async () => {
    await fs.writeFile(w('src'), 'new');
    await fs.writeFile(path.join(other, 'victim'), 'victim');
    await fs.symlink(path.join(other, 'victim'), w('dst'));
    expectErrno(await run('copy', { from: w('src'), to: w('dst') }), 'ELOOP');
    expect(await fs.readFile(path.join(other, 'victim'), 'utf8')).toBe('victim');
    expect(await fs.readlink(w('dst'))).toBe(path.join(other, 'victim'));
  });

  it('refuses a source that is neither file, directory nor link (EINVAL)', async () => {
    await fs.mkdir(w('tree'));
    execFileSync('mkfifo', [w('tree', 'fifo')]);
    expectErrno(await run('copy', { from: w('tree', 'fifo'), to: w('copy') }), 'EINVAL');
    expect(await exists(w('copy'))).toBe(false);
  });

  it('a source swapped for a FIFO after it was looked at is refused (EINVAL), never waited on', async () => {
    execFileSync('mkfifo', [w('fifo')]);
    // What the file copy meets when the name was a regular file at the lstat and is a FIFO by the open.
    await expect(copyFile(new FsAt(), w('fifo'), w('copy'))).rejects.toMatchObject({ code: 'EINVAL' });
    expect(await exists(w('copy'))).toBe(false);
  });

  it('refuses a tree holding a name that is not UTF-8 (EILSEQ) rather than misname it', async () => {
    await fs.mkdir(w('tree'));
    await fs.writeFile(Buffer.concat([Buffer.from(`${w('tree')}/`), Buffer.from([0x66, 0xff])]), 'x');
    expectErrno(await run('copy', { from: w('tree'), to: w('copy') }, { recursive: true }), 'EILSEQ');
  });

  it('merges a tree into an existing directory', async () => {
    await makeTree(w('tree'));
    await fs.mkdir(w('copy'), { mode: 0o700 });
    await fs.writeFile(w('copy', 'already.txt'), 'here');
    expectOk(await run('copy', { from: w('tree'), to: w('copy') }, { recursive: true }));
    expect(await fs.readFile(w('copy', 'already.txt'), 'utf8')).toBe('here');
    expect(await fs.readFile(w('copy', 'sub', 'mid.txt'), 'utf8')).toBe('mid');
  });

  it('leaves no file descriptor open, whether copies succeed or fail', async () => {
    const openFds = () => readdirSync('/proc/self/fd').length;
    await makeTree(w('tree'));
    await fs.writeFile(w('big'), Buffer.alloc(1 << 20, 7));
    const broker = makeBroker();
    await run('copy', { from: w('big'), to: w('warm-up') }, {}, broker);
    const before = openFds();
    for (let i = 0; i < 5; i += 1) {
      expectOk(await run('copy', { from: w('big'), to: w(`big-${i}`) }, {}, broker));
      expectOk(await run('copy', { from: w('tree'), to: w(`tree-${i}`) }, { recursive: true }, broker));
      // Source opens fine, destination open fails.
      expectErrno(await run('copy', { from: w('big'), to: w('tree') }, {}, broker), 'EISDIR');
    }
    expect(openFds()).toBe(before);
  });
});

describe('a temp dir the command changes without asking (volatileRoots)', () => {
  it('a rename or a recursive copy out of it fails with EXDEV and changes nothing; one file is copied', async () => {
    const temp = w('temp');
    await fs.mkdir(path.join(temp, 'tree'), { recursive: true });
    await fs.writeFile(path.join(temp, 'tree', 'f'), 'made there');
    await fs.writeFile(path.join(temp, 'one.txt'), 'one file');
    const broker = makeBroker({ volatileRoots: [temp] });
    expectErrno(await run('rename', { from: path.join(temp, 'tree'), to: w('moved') }, {}, broker), 'EXDEV');
    expectErrno(await run('rename', { from: path.join(temp, 'one.txt'), to: w('moved.txt') }, {}, broker), 'EXDEV');
    expectErrno(await run('copy', { from: path.join(temp, 'tree'), to: w('copied') }, { recursive: true }, broker), 'EXDEV');
    // A name that only starts with two dots is inside it too.
    await fs.mkdir(path.join(temp, '..dotted'));
    expectErrno(await run('rename', { from: path.join(temp, '..dotted'), to: w('dotted') }, {}, broker), 'EXDEV');
    expect(await exists(w('moved'))).toBe(false);
    expect(await exists(w('moved.txt'))).toBe(false);
    expect(await exists(w('copied'))).toBe(false);
    expectOk(await run('copy', { from: path.join(temp, 'one.txt'), to: w('copied.txt') }, {}, broker));
    expect(await fs.readFile(w('copied.txt'), 'utf8')).toBe('one file');
    // Elsewhere, and inside it, as before.
    expectOk(await run('rename', { from: path.join(temp, 'one.txt'), to: path.join(temp, 'two.txt') }, {}, broker));
  });

  it('a hard link from elsewhere into it fails with EXDEV: the file could be written there without asking', async () => {
    const temp = w('temp');
    await fs.mkdir(temp);
    await fs.writeFile(w('kept.txt'), 'original');
    const broker = makeBroker({ volatileRoots: [temp] });
    expectErrno(await run('link', { from: w('kept.txt'), to: path.join(temp, 'alias') }, {}, broker), 'EXDEV');
    expect(await exists(path.join(temp, 'alias'))).toBe(false);
    expect((await fs.stat(w('kept.txt'))).nlink).toBe(1);
    await fs.writeFile(path.join(temp, 'own'), 'x');
    expectOk(await run('link', { from: path.join(temp, 'own'), to: path.join(temp, 'own-too') }, {}, broker));
  });
});

describe('chmod', () => {
  it.each([0o600, 0o755, 0o000, 0o4755, 0o1777].map((mode) => [mode.toString(8), mode] as const))('sets mode %s exactly', async (_label, mode) => {
    await fs.writeFile(w('f'), 'x');
    expectOk(await run('chmod', { path: w('f') }, { mode }));
    expect(await modeOf(w('f'))).toBe(mode);
  });

  it('sets the mode of a directory', async () => {
    await fs.mkdir(w('d'));
    expectOk(await run('chmod', { path: w('d') }, { mode: 0o711 }));
    expect(await modeOf(w('d'))).toBe(0o711);
  });

  it('refuses a request without a mode (BAD_REQUEST) and changes nothing', async () => {
    await fs.writeFile(w('f'), 'x', { mode: 0o640 });
    await fs.chmod(w('f'), 0o640);
    const outcome = await run('chmod', { path: w('f') });
    expect(outcome.ok).toBe(false);
    expect(outcome.error).toMatchObject({ code: ErrorCodes.BAD_REQUEST, plugin: HostOperationsPlugin.PLUGIN_NAME });
    expect(await modeOf(w('f'))).toBe(0o640);
  });

  it('on a symlink changes the file it names (resolution follows it) and leaves the link alone', async () => {
    await fs.writeFile(path.join(other, 'real'), 'x');
    await fs.chmod(path.join(other, 'real'), 0o644);
    await fs.symlink(path.join(other, 'real'), w('link'));
    const linkBefore = await fs.lstat(w('link'));
    const outcome = await run('chmod', { path: w('link') }, { mode: 0o600 });
    expectOk(outcome);
    expect(outcome.targets[0]).toMatchObject({ resolved: path.join(other, 'real'), kind: 'file' });
    expect(await modeOf(path.join(other, 'real'))).toBe(0o600);
    const linkAfter = await fs.lstat(w('link'));
    expect(linkAfter.isSymbolicLink()).toBe(true);
    expect(linkAfter.mode).toBe(linkBefore.mode);
    expect(await fs.readlink(w('link'))).toBe(path.join(other, 'real'));
  });

  it('on a symlink judged as the link itself (followSymlinks: false) fails with EOPNOTSUPP and changes nothing', async () => {
    await fs.writeFile(path.join(other, 'real'), 'x');
    await fs.chmod(path.join(other, 'real'), 0o644);
    await fs.symlink(path.join(other, 'real'), w('link'));
    const outcome = await run('chmod', { path: w('link') }, { mode: 0o600, followSymlinks: false });
    expect(outcome.targets[0]).toMatchObject({ resolved: w('link'), kind: 'symlink' });
    expectErrno(outcome, 'EOPNOTSUPP');
    expect(await modeOf(path.join(other, 'real'))).toBe(0o644);
  });
});

describe('link', () => {
  it('makes a hard link: same inode, two links', async () => {
    await fs.writeFile(w('a.txt'), 'shared');
    expectOk(await run('link', { from: w('a.txt'), to: w('b.txt') }));
    const [a, b] = await Promise.all([fs.lstat(w('a.txt')), fs.lstat(w('b.txt'))]);
    expect(b.ino).toBe(a.ino);
    expect(a.nlink).toBe(2);
    expect(await fs.readFile(w('b.txt'), 'utf8')).toBe('shared');
  });

  it.each([
    ['a relative name', '../other/x'],
    ['an absolute path', '/etc/hostname'],
    ['a dangling name', 'does-not-exist'],
    ['text with spaces', 'a b  c'],
  ])('makes a symbolic link to %s, its content exactly as given', async (_label, content) => {
    const outcome = await run('link', { to: w('sym') }, { symbolic: true, linkTarget: content });
    expectOk(outcome);
    expect(outcome.targets).toHaveLength(1);
    expect((await fs.lstat(w('sym'))).isSymbolicLink()).toBe(true);
    expect(await fs.readlink(w('sym'))).toBe(content);
  });

  it('refuses a symbolic link without content (BAD_REQUEST)', async () => {
    const outcome = await run('link', { to: w('sym') }, { symbolic: true });
    expect(outcome.ok).toBe(false);
    expect(outcome.error?.code).toBe(ErrorCodes.BAD_REQUEST);
    expect(await exists(w('sym'))).toBe(false);
  });

  it.each([
    ['hard', { from: 'a.txt' }, {}],
    ['symbolic', {}, { symbolic: true, linkTarget: 'a.txt' }],
  ])('a %s link fails with EEXIST when the new name exists', async (_label, paths, options) => {
    await fs.writeFile(w('a.txt'), 'a');
    await fs.writeFile(w('taken'), 'taken');
    const from = 'from' in paths ? { from: w(paths.from) } : {};
    expectErrno(await run('link', { ...from, to: w('taken') }, options), 'EEXIST');
    expect(await fs.readFile(w('taken'), 'utf8')).toBe('taken');
    expect((await fs.lstat(w('a.txt'))).nlink).toBe(1);
  });
});

describe('touch', () => {
  /** A timestamp from the file system's own clock, which may lag the process's slightly. */
  async function fsNow(): Promise<bigint> {
    await fs.writeFile(path.join(root, 'clock'), '');
    return (await fs.stat(path.join(root, 'clock'), { bigint: true })).mtimeNs;
  }

  it('creates a missing file: empty, mode 0666 less the umask', async () => {
    const outcome = await run('touch', { path: w('new') });
    expectOk(outcome);
    const info = await fs.lstat(w('new'));
    expect(info.isFile()).toBe(true);
    expect(info.size).toBe(0);
    expect(info.mode & 0o7777).toBe(0o666 & ~umask);
  });

  it.each([
    ['whole seconds', 1_000_000_000, 1_100_000_000, 1_000_000_000_000_000_000n, 1_100_000_000_000_000_000n],
    ['fractions', 1_600_000_000.25, 1_600_000_000.5, 1_600_000_000_250_000_000n, 1_600_000_000_500_000_000n],
    ['a fraction that rounds up to the next second', 1.9999999999, 7.0000000001, 2_000_000_000n, 7_000_000_000n],
    ['times before 1970', -86_400.5, -1, -86_400_500_000_000n, -1_000_000_000n],
  ])('sets atime and mtime exactly, given %s', async (_label, atime, mtime, atimeNs, mtimeNs) => {
    await fs.writeFile(w('f'), 'keep');
    expectOk(await run('touch', { path: w('f') }, { atime, mtime }));
    const info: BigIntStats = await fs.stat(w('f'), { bigint: true });
    expect([info.atimeNs, info.mtimeNs]).toEqual([atimeNs, mtimeNs]);
    expect(await fs.readFile(w('f'), 'utf8')).toBe('keep');
  });

  it('without times sets both to now', async () => {
    await fs.writeFile(w('f'), 'keep');
    await fs.utimes(w('f'), 1_000_000_000, 1_000_000_000);
    const before = await fsNow();
    expectOk(await run('touch', { path: w('f') }));
    const info = await fs.stat(w('f'), { bigint: true });
    expect(info.mtimeNs >= before).toBe(true);
    expect(info.atimeNs >= before).toBe(true);
    expect(await fs.readFile(w('f'), 'utf8')).toBe('keep');
  });

  it('through a symlink touches the file it names', async () => {
    await fs.writeFile(path.join(other, 'real'), 'x');
    await fs.symlink(path.join(other, 'real'), w('link'));
    expectOk(await run('touch', { path: w('link') }, { atime: 1_234_567_890, mtime: 1_234_567_890 }));
    expect((await fs.stat(path.join(other, 'real'))).mtimeMs).toBe(1_234_567_890_000);
    expect((await fs.lstat(w('link'))).mtimeMs).not.toBe(1_234_567_890_000);
  });
});

describe('race freedom: a directory swapped for a symlink after resolution', () => {
  /**
   * Between resolution and execution (in pre-modify-backup), `work/dir` is moved aside and
   * a symlink to `other` put in its place; `other` holds the same names. The operation
   * must fail with ELOOP and `other` stay as it was.
   */
  const swapper = (dir: string): BrokerPlugin => ({
    name: 'test-swap',
    apply(broker) {
      broker.hooks.preModifyBackup.tapPromise('test-swap', async () => {
        await fs.rename(dir, `${dir}.moved`);
        await fs.symlink(other, dir);
      });
    },
  });

  async function prepare(): Promise<void> {
    for (const base of [w('dir'), other]) {
      await fs.mkdir(path.join(base, 'tree', 'sub'), { recursive: true });
      await fs.writeFile(path.join(base, 'file'), base === other ? 'secret' : 'mine');
      await fs.writeFile(path.join(base, 'tree', 'sub', 'f'), base === other ? 'secret' : 'mine');
      await fs.symlink('/secret/link/text', path.join(base, 'tree', 'a-link'));
    }
    await fs.mkdir(w('out'));
  }

  it.each<[string, HostOperation, () => OperationPaths, RequestOptions]>([
    ['rename (source)', 'rename', () => ({ from: w('dir', 'file'), to: w('out', 'file') }), {}],
    ['rename (destination)', 'rename', () => ({ from: w('out', 'mine'), to: w('dir', 'file') }), {}],
    ['delete (unlink)', 'delete', () => ({ path: w('dir', 'file') }), { deleteMode: 'unlink' }],
    ['delete (unlink, recursive)', 'delete', () => ({ path: w('dir', 'tree') }), { deleteMode: 'unlink', recursive: true }],
    ['delete (trash)', 'delete', () => ({ path: w('dir', 'file') }), {}],
    ['copy (source file)', 'copy', () => ({ from: w('dir', 'file'), to: w('out', 'copy') }), {}],
    ['copy (source tree)', 'copy', () => ({ from: w('dir', 'tree'), to: w('out', 'copy') }), { recursive: true }],
    ['copy (destination)', 'copy', () => ({ from: w('out', 'mine'), to: w('dir', 'file') }), {}],
    ['chmod', 'chmod', () => ({ path: w('dir', 'file') }), { mode: 0o600 }],
    ['touch', 'touch', () => ({ path: w('dir', 'file') }), { mtime: 1, atime: 1 }],
    ['mkdir', 'mkdir', () => ({ path: w('dir', 'new') }), {}],
    ['mkdir (recursive)', 'mkdir', () => ({ path: w('dir', 'new') }), { recursive: true }],
    ['hard link (source)', 'link', () => ({ from: w('dir', 'file'), to: w('out', 'l') }), {}],
    ['symbolic link', 'link', () => ({ to: w('dir', 'l') }), { symbolic: true, linkTarget: 'x' }],
  ])('%s fails with ELOOP and leaves the other directory alone', async (_label, operation, paths, options) => {
    await prepare();
    await fs.writeFile(w('out', 'mine'), 'mine');
    const before = await snapshot(other);
    const beforeMine = await snapshot(w('dir'));
    const beforeOut = await snapshot(w('out'));
    const outcome = await run(operation, paths(), options, makeBroker({}, swapper(w('dir'))));
    expectErrno(outcome, 'ELOOP');
    expect(await snapshot(other)).toEqual(before);
    expect(await snapshot(w('dir.moved'))).toEqual(beforeMine);
    expect(await snapshot(w('out'))).toEqual(beforeOut);
    expect(await trashContents()).toEqual({ files: [], info: [] });
  });
});

describe('hook behaviour', () => {
  const recorder = (order: string[], operation: HostOperation, stage: number, answer?: { detail: Record<string, unknown> }): BrokerPlugin => ({
    name: `test-${stage}`,
    apply(broker) {
      broker.hooks.executeHostOp.for(operation).tapPromise({ name: `test-${stage}`, stage }, async () => {
        order.push(`test@${stage}`);
        return answer;
      });
    },
  });

  it.each<[HostOperation, () => OperationPaths, RequestOptions]>([
    ['delete', () => ({ path: w('a.txt') }), { deleteMode: 'unlink' }],
    ['rename', () => ({ from: w('a.txt'), to: w('b.txt') }), {}],
    ['copy', () => ({ from: w('a.txt'), to: w('b.txt') }), {}],
    ['chmod', () => ({ path: w('a.txt') }), { mode: 0o600 }],
    ['touch', () => ({ path: w('a.txt') }), { mtime: 5, atime: 5 }],
    ['link', () => ({ from: w('a.txt'), to: w('b.txt') }), {}],
    ['mkdir', () => ({ path: w('d') }), {}],
  ])('an earlier tap on %s takes the operation over; this plugin does nothing', async (operation, paths, options) => {
    await fs.writeFile(w('a.txt'), 'untouched');
    await fs.chmod(w('a.txt'), 0o644);
    const before = await snapshot(work);
    const order: string[] = [];
    const broker = makeBroker({}, recorder(order, operation, Stage.NORMAL, { detail: { by: 'organisation' } }));
    const outcome = await run(operation, paths(), options, broker);
    expectOk(outcome);
    expect(outcome.result).toEqual({ detail: { by: 'organisation' } });
    expect(order).toEqual([`test@${Stage.NORMAL}`]);
    expect(await snapshot(work)).toEqual(before);
  });

  it('runs after an earlier tap without an answer and stops a later one', async () => {
    await fs.writeFile(w('a.txt'), 'x');
    const order: string[] = [];
    const broker = makeBroker({}, recorder(order, 'rename', Stage.EARLY), recorder(order, 'rename', Stage.LAST, { detail: {} }));
    const outcome = await run('rename', { from: w('a.txt'), to: w('b.txt') }, {}, broker);
    expectOk(outcome);
    expect(outcome.result).toEqual({});
    expect(order).toEqual([`test@${Stage.EARLY}`]);
    expect(await fs.readdir(work)).toEqual(['b.txt']);
  });

  it('names itself and the hook when an operation fails', async () => {
    const outcome = await run('rename', { from: w('missing'), to: w('b') });
    expect(outcome.error).toMatchObject({
      code: ErrorCodes.HOST_OP_FAILED,
      errno: 'ENOENT',
      plugin: 'host-operations',
      hook: 'executeHostOp(rename)',
    });
  });

  it('does not run when policy denies', async () => {
    await fs.writeFile(w('a.txt'), 'x');
    const deny: BrokerPlugin = {
      name: 'test-deny',
      apply(broker) {
        broker.hooks.evaluatePolicy.tap({ name: 'test-deny', stage: Stage.FIRST }, () => ({ verdict: 'deny', source: 'test' }));
      },
    };
    const outcome = await run('delete', { path: w('a.txt') }, { deleteMode: 'unlink' }, makeBroker({}, deny));
    expect(outcome).toMatchObject({ ok: false, wireDecision: 'deny', error: { code: ErrorCodes.POLICY_DENIED } });
    expect(await fs.readFile(w('a.txt'), 'utf8')).toBe('x');
  });
});
