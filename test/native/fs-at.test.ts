import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import util from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { errnoOf } from '../../src/core/errors.js';
import { native, timeSpecFromNs, type NativeBinding } from '../../src/native/index.js';
import { REPO_ROOT } from '../helpers/serve-process.js';
import { catchErrno, makeTempDir, modeOf, removeDir } from './helpers.js';

let root: string;
let real: string;
/** root/link -> real: a directory path through it must be refused. */
let viaLink: string;

beforeEach(() => {
  root = makeTempDir('at');
  real = path.join(root, 'real');
  fs.mkdirSync(path.join(real, 'sub'), { recursive: true });
  fs.symlinkSync(real, path.join(root, 'link'));
  viaLink = path.join(root, 'link');
});

afterEach(() => removeDir(root));

const b = (): NativeBinding => native();

describe('directory arguments and names', () => {
  // Each operation, called with a given directory and name, as the tables below need.
  const operations: Array<[string, (dir: string, name: string) => void]> = [
    ['unlinkAt', (dir, name) => b().unlinkAt(dir, name)],
    ['renameAt (from)', (dir, name) => b().renameAt(dir, name, real, 'to')],
    ['renameAt (to)', (dir, name) => b().renameAt(real, 'file', dir, name)],
    ['mkdirAt', (dir, name) => b().mkdirAt(dir, name, 0o700)],
    ['mknodAt', (dir, name) => b().mknodAt(dir, name, 'fifo', 0o600, 0, -1, -1)],
    ['linkAt (from)', (dir, name) => b().linkAt(dir, name, real, 'to')],
    ['linkAt (to)', (dir, name) => b().linkAt(real, 'file', dir, name)],
    ['symlinkAt', (dir, name) => b().symlinkAt('somewhere', dir, name)],
    ['chmodAt', (dir, name) => b().chmodAt(dir, name, 0o600)],
    ['chownAt', (dir, name) => b().chownAt(dir, name, 0, 0)],
    ['utimesAt', (dir, name) => b().utimesAt(dir, name, null, null)],
  ];

  it.each(operations)('%s refuses a directory reached through a symlink with ELOOP', (_name, run) => {
    fs.writeFileSync(path.join(real, 'file'), 'keep');
    fs.writeFileSync(path.join(real, 'sub', 'file'), 'keep');
    for (const dir of [viaLink, path.join(viaLink, 'sub')]) {
      const error = catchErrno(() => run(dir, 'file'));
      expect(error).toMatchObject({ code: 'ELOOP', syscall: 'openat2', path: dir });
    }
    expect(fs.readdirSync(real).sort()).toEqual(['file', 'sub']);
    expect(fs.readFileSync(path.join(real, 'file'), 'utf8')).toBe('keep');
  });

  it.each(operations)('%s refuses names that are not one component with EINVAL', (_name, run) => {
    fs.writeFileSync(path.join(real, 'file'), 'keep');
    for (const name of ['', '.', '..', 'sub/file', 'a/', '/abs']) {
      expect(catchErrno(() => run(real, name)).code).toBe('EINVAL');
    }
    expect(fs.readdirSync(real).sort()).toEqual(['file', 'sub']);
  });

  it.each(operations)('%s refuses a relative directory with EINVAL', (_name, run) => {
    expect(catchErrno(() => run('relative/dir', 'file')).code).toBe('EINVAL');
  });

  it('errors look like Node fs errors', () => {
    const error = catchErrno(() => b().unlinkAt(real, 'missing'));
    expect(error).toMatchObject({ code: 'ENOENT', syscall: 'unlinkat', path: path.join(real, 'missing') });
    expect(util.getSystemErrorName(error.errno)).toBe('ENOENT');
    expect(error.message).toBe(`ENOENT: no such file or directory, unlinkat '${path.join(real, 'missing')}'`);
    expect(errnoOf(error)).toBe('ENOENT');
  });

  it('rejects arguments of the wrong type with a TypeError', () => {
    // @ts-expect-error: checking the runtime guard against a wrong type
    expect(() => b().mkdirAt(real, 'x', '0700')).toThrow(TypeError);
    expect(() => b().mkdirAt(real, 'x', 0o70000)).toThrow(expect.objectContaining({ code: 'ERR_OUT_OF_RANGE' }));
    expect(() => b().unlinkAt(real, 'a\0b')).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_VALUE' }));
    expect(fs.existsSync(path.join(real, 'x'))).toBe(false);
  });
});

describe('unlinkAt', () => {
  it('removes a file, a symlink (not its target), and an empty directory with directory: true', () => {
    const target = path.join(real, 'target');
    fs.writeFileSync(target, 'data');
    fs.writeFileSync(path.join(real, 'file'), 'gone');
    fs.symlinkSync(target, path.join(real, 'ln'));

    b().unlinkAt(real, 'file');
    b().unlinkAt(real, 'ln');
    expect(fs.readFileSync(target, 'utf8')).toBe('data');

    expect(catchErrno(() => b().unlinkAt(real, 'sub')).code).toBe('EISDIR');
    b().unlinkAt(real, 'sub', { directory: true });
    expect(fs.readdirSync(real)).toEqual(['target']);
  });

  it('directory: true refuses a file with ENOTDIR', () => {
    fs.writeFileSync(path.join(real, 'file'), 'x');
    expect(catchErrno(() => b().unlinkAt(real, 'file', { directory: true })).code).toBe('ENOTDIR');
    expect(fs.existsSync(path.join(real, 'file'))).toBe(true);
  });
});

describe('mkdirAt', () => {
  it('creates a directory with the mode and refuses an existing name', () => {
    b().mkdirAt(real, 'made', 0o700);
    const made = path.join(real, 'made');
    expect(fs.statSync(made).isDirectory()).toBe(true);
    expect(modeOf(made)).toBe(0o700);
    expect(catchErrno(() => b().mkdirAt(real, 'made', 0o700))).toMatchObject({ code: 'EEXIST', syscall: 'mkdirat' });
  });
});

describe('mknodAt', () => {
  it('makes a FIFO and a socket node with their exact modes, whatever the umask', () => {
    const umask = process.umask(0o077);
    try {
      b().mknodAt(real, 'fifo', 'fifo', 0o664, 0, -1, -1);
      b().mknodAt(real, 'sock', 'socket', 0o4755, 0, -1, -1);
    } finally {
      process.umask(umask);
    }
    expect(fs.lstatSync(path.join(real, 'fifo')).isFIFO()).toBe(true);
    expect(modeOf(path.join(real, 'fifo'))).toBe(0o664);
    expect(fs.lstatSync(path.join(real, 'sock')).isSocket()).toBe(true);
    // The mode is set after the owner, so a setuid bit survives the chown.
    expect(modeOf(path.join(real, 'sock'))).toBe(0o4755);
  });

  it('makes a device node with its device number and owner (root)', () => {
    b().mknodAt(real, 'null', 'char-device', 0o640, fs.statSync('/dev/null').rdev, 1234, 5678);
    const made = fs.lstatSync(path.join(real, 'null'));
    expect(made.isCharacterDevice()).toBe(true);
    expect(made).toMatchObject({ rdev: fs.statSync('/dev/null').rdev, uid: 1234, gid: 5678, mode: fs.constants.S_IFCHR | 0o640 });
  });

  it('refuses an existing name, a symlink included, without touching what is there', () => {
    fs.symlinkSync(path.join(real, 'target'), path.join(real, 'ln'));
    expect(catchErrno(() => b().mknodAt(real, 'ln', 'fifo', 0o600, 0, -1, -1))).toMatchObject({ code: 'EEXIST', syscall: 'mknodat' });
    expect(fs.existsSync(path.join(real, 'target'))).toBe(false);
    expect(fs.lstatSync(path.join(real, 'ln')).isSymbolicLink()).toBe(true);
  });

  it('never sets owner or mode on a file swapped in for the node it just made', () => {
    const tools = makeTempDir('shim');
    try {
      const shim = path.join(tools, 'swap-after-mknod.so');
      execFileSync('gcc', ['-O2', '-Wall', '-Werror', '-shared', '-fPIC', '-o', shim, path.join(REPO_ROOT, 'test', 'fixtures', 'sandbox', 'swap-after-mknod.c'), '-ldl']);
      const victim = path.join(real, 'victim');
      fs.writeFileSync(victim, 'not yours\n', { mode: 0o600 });
      const loader = path.join(REPO_ROOT, 'dist', 'native', 'loader.js');
      const script = `import(${JSON.stringify(loader)}).then(({ native }) => {
        try { native().mknodAt(${JSON.stringify(real)}, 'made', 'fifo', 0o4755, 0, 1234, 5678); console.log('made'); }
        catch (error) { console.log(error.code, error.syscall); }
      })`;
      const out = execFileSync(process.execPath, ['-e', script], { env: { ...process.env, LD_PRELOAD: shim, BSH_SWAP_VICTIM: 'victim' }, encoding: 'utf8' });
      expect(out.trim()).toBe('EEXIST mknodat');
      // The victim now stands at the new name, as the attacker left it: nothing of the call reached it.
      const there = fs.lstatSync(path.join(real, 'made'));
      expect({ file: there.isFile(), uid: there.uid, gid: there.gid, mode: there.mode & 0o7777 }).toEqual({ file: true, uid: process.getuid?.(), gid: process.getgid?.(), mode: 0o600 });
      expect(fs.readFileSync(path.join(real, 'made'), 'utf8')).toBe('not yours\n');
    } finally {
      removeDir(tools);
    }
  });

  it('refuses a type it does not know', () => {
    // @ts-expect-error: checking the runtime guard against a wrong type name
    expect(() => b().mknodAt(real, 'x', 'file', 0o600, 0, -1, -1)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_VALUE' }));
    expect(fs.existsSync(path.join(real, 'x'))).toBe(false);
  });
});

describe('linkAt', () => {
  it('makes a hard link to a file', () => {
    const file = path.join(real, 'file');
    fs.writeFileSync(file, 'shared');
    b().linkAt(real, 'file', path.join(real, 'sub'), 'hard');
    const hard = path.join(real, 'sub', 'hard');
    expect(fs.statSync(file).nlink).toBe(2);
    expect(fs.statSync(hard).ino).toBe(fs.statSync(file).ino);
    expect(fs.readFileSync(hard, 'utf8')).toBe('shared');
  });

  it('links a symlink as the symlink itself', () => {
    fs.writeFileSync(path.join(real, 'target'), 'x');
    fs.symlinkSync('target', path.join(real, 'ln'));
    b().linkAt(real, 'ln', real, 'ln2');
    const second = fs.lstatSync(path.join(real, 'ln2'));
    expect(second.isSymbolicLink()).toBe(true);
    expect(second.ino).toBe(fs.lstatSync(path.join(real, 'ln')).ino);
    expect(fs.statSync(path.join(real, 'target')).nlink).toBe(1);
  });

  it('reports EEXIST with both paths', () => {
    fs.writeFileSync(path.join(real, 'a'), 'a');
    fs.writeFileSync(path.join(real, 'b'), 'b');
    const error = catchErrno(() => b().linkAt(real, 'a', real, 'b'));
    expect(error).toMatchObject({ code: 'EEXIST', syscall: 'linkat', path: path.join(real, 'a'), dest: path.join(real, 'b') });
  });
});

describe('symlinkAt', () => {
  it('creates a symlink with the exact target text', () => {
    b().symlinkAt('../elsewhere/x', real, 'ln');
    expect(fs.readlinkSync(path.join(real, 'ln'))).toBe('../elsewhere/x');
    expect(catchErrno(() => b().symlinkAt('y', real, 'ln')).code).toBe('EEXIST');
  });
});

describe('chmodAt', () => {
  it('changes the mode of a file', () => {
    const file = path.join(real, 'file');
    fs.writeFileSync(file, 'x', { mode: 0o644 });
    b().chmodAt(real, 'file', 0o4751);
    expect(modeOf(file)).toBe(0o4751);
  });

  it('never follows a final symlink: the call fails and the target keeps its mode', () => {
    const target = path.join(real, 'target');
    fs.writeFileSync(target, 'x', { mode: 0o644 });
    fs.chmodSync(target, 0o644);
    fs.symlinkSync(target, path.join(real, 'ln'));
    const error = catchErrno(() => b().chmodAt(real, 'ln', 0o777));
    expect(error).toMatchObject({ code: 'EOPNOTSUPP', syscall: 'fchmodat2', path: path.join(real, 'ln') });
    expect(modeOf(target)).toBe(0o644);
  });
});

describe('chownAt', () => {
  it('changes owner and group; -1 keeps one', () => {
    const file = path.join(real, 'file');
    fs.writeFileSync(file, 'x');
    b().chownAt(real, 'file', 1234, 5678);
    expect(fs.statSync(file)).toMatchObject({ uid: 1234, gid: 5678 });
    b().chownAt(real, 'file', -1, 4321);
    expect(fs.statSync(file)).toMatchObject({ uid: 1234, gid: 4321 });
  });

  it('changes a symlink itself, not its target', () => {
    const target = path.join(real, 'target');
    fs.writeFileSync(target, 'x');
    fs.chownSync(target, 0, 0);
    fs.symlinkSync(target, path.join(real, 'ln'));
    b().chownAt(real, 'ln', 2222, 3333);
    expect(fs.lstatSync(path.join(real, 'ln'))).toMatchObject({ uid: 2222, gid: 3333 });
    expect(fs.statSync(target)).toMatchObject({ uid: 0, gid: 0 });
  });
});

describe('utimesAt', () => {
  it('sets exact times, omits one, and sets now', () => {
    const file = path.join(real, 'file');
    fs.writeFileSync(file, 'x');
    b().utimesAt(real, 'file', { sec: 1_000_000_000, nsec: 123_456_789 }, { sec: 1_100_000_000, nsec: 5 });
    let stat = fs.statSync(file, { bigint: true });
    expect(stat.atimeNs).toBe(1_000_000_000_123_456_789n);
    expect(stat.mtimeNs).toBe(1_100_000_000_000_000_005n);

    b().utimesAt(real, 'file', 'omit', { sec: 1_200_000_000, nsec: 0 });
    stat = fs.statSync(file, { bigint: true });
    expect(stat.atimeNs).toBe(1_000_000_000_123_456_789n);
    expect(stat.mtimeNs).toBe(1_200_000_000_000_000_000n);

    b().utimesAt(real, 'file', 'omit', null);
    stat = fs.statSync(file, { bigint: true });
    expect(stat.atimeNs).toBe(1_000_000_000_123_456_789n);
    // UTIME_NOW: the kernel's clock, so only "after 2020" is certain.
    expect(stat.mtimeNs > 1_577_836_800_000_000_000n).toBe(true);
  });

  it('restores a time captured as nanoseconds, before 1970 too', () => {
    const file = path.join(real, 'file');
    fs.writeFileSync(file, 'x');
    for (const ns of [1_234_567_890_987_654_321n, -1_500_000_001n]) {
      b().utimesAt(real, 'file', timeSpecFromNs(ns), timeSpecFromNs(ns));
      expect(fs.statSync(file, { bigint: true }).mtimeNs).toBe(ns);
    }
  });

  it('changes a symlink itself, not its target', () => {
    const target = path.join(real, 'target');
    fs.writeFileSync(target, 'x');
    fs.utimesSync(target, 500, 500);
    fs.symlinkSync(target, path.join(real, 'ln'));
    b().utimesAt(real, 'ln', { sec: 700, nsec: 0 }, { sec: 800, nsec: 0 });
    expect(fs.lstatSync(path.join(real, 'ln'), { bigint: true }).mtimeNs).toBe(800_000_000_000n);
    expect(fs.statSync(target, { bigint: true }).mtimeNs).toBe(500_000_000_000n);
  });

  it('rejects a malformed time', () => {
    fs.writeFileSync(path.join(real, 'file'), 'x');
    expect(() => b().utimesAt(real, 'file', { sec: 1, nsec: 1_000_000_000 }, null)).toThrow(
      expect.objectContaining({ code: 'ERR_OUT_OF_RANGE' }),
    );
  });
});
