import fs from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { native } from '../../src/native/index.js';
import { catchErrno, makeTempDir, otherDevice, removeDir } from './helpers.js';

describe('renameAt', () => {
  let root: string;
  let a: string;
  let z: string;

  beforeEach(() => {
    root = makeTempDir('rename');
    a = path.join(root, 'a');
    z = path.join(root, 'z');
    fs.mkdirSync(a);
    fs.mkdirSync(z);
  });

  afterEach(() => removeDir(root));

  it('moves a file between directories, replacing the destination', () => {
    fs.writeFileSync(path.join(a, 'src'), 'new bytes');
    fs.writeFileSync(path.join(z, 'dst'), 'old bytes');
    native().renameAt(a, 'src', z, 'dst');
    expect(fs.existsSync(path.join(a, 'src'))).toBe(false);
    expect(fs.readFileSync(path.join(z, 'dst'), 'utf8')).toBe('new bytes');
  });

  it('renames a symlink itself, not its target', () => {
    fs.writeFileSync(path.join(a, 'target'), 't');
    fs.symlinkSync('target', path.join(a, 'ln'));
    native().renameAt(a, 'ln', a, 'ln2');
    expect(fs.readlinkSync(path.join(a, 'ln2'))).toBe('target');
    expect(fs.readdirSync(a).sort()).toEqual(['ln2', 'target']);
  });

  it('noReplace refuses an existing destination with EEXIST and changes nothing', () => {
    fs.writeFileSync(path.join(a, 'src'), 'src');
    fs.writeFileSync(path.join(z, 'dst'), 'dst');
    const error = catchErrno(() => native().renameAt(a, 'src', z, 'dst', { noReplace: true }));
    expect(error).toMatchObject({
      code: 'EEXIST',
      syscall: 'renameat2',
      path: path.join(a, 'src'),
      dest: path.join(z, 'dst'),
    });
    expect(fs.readFileSync(path.join(a, 'src'), 'utf8')).toBe('src');
    expect(fs.readFileSync(path.join(z, 'dst'), 'utf8')).toBe('dst');

    native().renameAt(a, 'src', z, 'fresh', { noReplace: true });
    expect(fs.readFileSync(path.join(z, 'fresh'), 'utf8')).toBe('src');
  });

  it('exchange swaps two files atomically', () => {
    fs.writeFileSync(path.join(a, 'one'), 'first', { mode: 0o600 });
    fs.writeFileSync(path.join(z, 'two'), 'second');
    native().renameAt(a, 'one', z, 'two', { exchange: true });
    expect(fs.readFileSync(path.join(a, 'one'), 'utf8')).toBe('second');
    expect(fs.readFileSync(path.join(z, 'two'), 'utf8')).toBe('first');
    expect(fs.statSync(path.join(z, 'two')).mode & 0o777).toBe(0o600);
    expect(catchErrno(() => native().renameAt(a, 'one', z, 'missing', { exchange: true })).code).toBe('ENOENT');
  });

  it('noReplace together with exchange is EINVAL from the kernel', () => {
    fs.writeFileSync(path.join(a, 'one'), '1');
    fs.writeFileSync(path.join(z, 'two'), '2');
    expect(catchErrno(() => native().renameAt(a, 'one', z, 'two', { noReplace: true, exchange: true })).code).toBe(
      'EINVAL',
    );
  });

  it('refuses a destination directory reached through a symlink', () => {
    fs.symlinkSync(z, path.join(root, 'zlink'));
    fs.writeFileSync(path.join(a, 'src'), 'stay');
    const error = catchErrno(() => native().renameAt(a, 'src', path.join(root, 'zlink'), 'dst'));
    expect(error).toMatchObject({ code: 'ELOOP', syscall: 'openat2', path: path.join(root, 'zlink') });
    expect(fs.readFileSync(path.join(a, 'src'), 'utf8')).toBe('stay');
    expect(fs.readdirSync(z)).toEqual([]);
  });

  it.each(['if-needed', 'always'] as const)('surfaces a cross-device rename as EXDEV (mount: %s)', (mount) => {
    const other = otherDevice(root, mount);
    try {
      expect(fs.statSync(other.dir).dev).not.toBe(fs.statSync(root).dev);
      fs.writeFileSync(path.join(a, 'src'), 'here');
      const error = catchErrno(() => native().renameAt(a, 'src', other.dir, 'dst'));
      expect(error).toMatchObject({ code: 'EXDEV', syscall: 'renameat2' });
      expect(fs.readFileSync(path.join(a, 'src'), 'utf8')).toBe('here');
      expect(fs.existsSync(path.join(other.dir, 'dst'))).toBe(false);
    } finally {
      other.cleanup();
    }
  });
});
