import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isNativeErrnoError, native } from '../../src/native/index.js';
import { buildDir, catchErrno, makeTempDir, removeDir } from './helpers.js';

/** A temp dir on a file system that takes user.* attributes: the system temp dir or build/. */
function xattrCapableDir(): string {
  for (const parent of [undefined, buildDir()]) {
    const dir = makeTempDir('xattr', parent);
    const probe = path.join(dir, 'probe');
    fs.writeFileSync(probe, '');
    try {
      native().setXattr(probe, 'user.bsh-probe', Buffer.from('1'));
      fs.rmSync(probe);
      return dir;
    } catch (error) {
      removeDir(dir);
      if (!isNativeErrnoError(error) || (error.code !== 'ENOTSUP' && error.code !== 'EOPNOTSUPP')) throw error;
    }
  }
  throw new Error('no directory with user xattr support found (temp dir and build/ both refuse)');
}

describe('extended attributes', () => {
  let dir: string;
  let file: string;
  let link: string;

  beforeAll(() => {
    dir = xattrCapableDir();
    file = path.join(dir, 'file.txt');
    link = path.join(dir, 'link');
    fs.writeFileSync(file, 'content');
    fs.symlinkSync(file, link);
  });

  afterAll(() => removeDir(dir));

  it('round-trips user attributes: set, list, get bytes, remove', () => {
    const binding = native();
    const bytes = Buffer.from([0, 1, 2, 255, 0, 10]);
    binding.setXattr(file, 'user.bsh.one', bytes);
    binding.setXattr(file, 'user.bsh.empty', Buffer.alloc(0));

    expect(binding.listXattrs(file).filter((name) => name.startsWith('user.bsh.')).sort()).toEqual([
      'user.bsh.empty',
      'user.bsh.one',
    ]);
    expect(binding.getXattr(file, 'user.bsh.one').equals(bytes)).toBe(true);
    expect(binding.getXattr(file, 'user.bsh.empty').length).toBe(0);

    binding.setXattr(file, 'user.bsh.one', Buffer.from('replaced'));
    expect(binding.getXattr(file, 'user.bsh.one').toString()).toBe('replaced');

    binding.removeXattr(file, 'user.bsh.one');
    binding.removeXattr(file, 'user.bsh.empty');
    expect(binding.listXattrs(file).filter((name) => name.startsWith('user.bsh.'))).toEqual([]);
    expect(catchErrno(() => binding.getXattr(file, 'user.bsh.one')).code).toBe('ENODATA');
  });

  it('reads a large value whole', () => {
    const binding = native();
    const big = Buffer.alloc(3000, 0x61);
    binding.setXattr(file, 'user.bsh.big', big);
    try {
      expect(binding.getXattr(file, 'user.bsh.big').equals(big)).toBe(true);
    } finally {
      binding.removeXattr(file, 'user.bsh.big');
    }
  });

  it('follows a symlink by default and acts on the link itself with noFollow', () => {
    const binding = native();
    binding.setXattr(link, 'user.bsh.via-link', Buffer.from('target'));
    expect(binding.getXattr(file, 'user.bsh.via-link').toString()).toBe('target');
    expect(binding.listXattrs(link)).toContain('user.bsh.via-link');

    // The kernel allows user.* only on regular files and directories.
    const setError = catchErrno(() => binding.setXattr(link, 'user.bsh.on-link', Buffer.from('x'), true));
    expect(setError.code).toBe('EPERM');
    expect(setError.syscall).toBe('lsetxattr');
    expect(setError.path).toBe(link);
    expect(catchErrno(() => binding.getXattr(link, 'user.bsh.via-link', true)).code).toBe('ENODATA');
    expect(binding.listXattrs(link, true)).not.toContain('user.bsh.via-link');
    expect(catchErrno(() => binding.removeXattr(link, 'user.bsh.via-link', true)).code).toBe('EPERM');

    binding.removeXattr(link, 'user.bsh.via-link');
    expect(binding.listXattrs(file)).not.toContain('user.bsh.via-link');
  });

  it('reports a missing file as ENOENT with the path', () => {
    const missing = path.join(dir, 'missing');
    const error = catchErrno(() => native().listXattrs(missing));
    expect(error).toMatchObject({ code: 'ENOENT', errno: -2, syscall: 'listxattr', path: missing });
  });
});
