import fs from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { native } from '../../src/native/index.js';
import { catchErrno, makeTempDir, modeOf, removeDir } from './helpers.js';

const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL } = fs.constants;
/** Linux's O_CLOEXEC (x86_64 and aarch64); Node's fs.constants does not export it. */
const O_CLOEXEC = 0o2000000;

describe('openNoSymlinks', () => {
  let root: string;
  let real: string;

  beforeEach(() => {
    root = makeTempDir('open');
    real = path.join(root, 'real');
    fs.mkdirSync(real);
    fs.writeFileSync(path.join(real, 'file'), 'backup me');
    fs.symlinkSync(real, path.join(root, 'dirlink'));
    fs.symlinkSync(path.join(real, 'file'), path.join(real, 'filelink'));
  });

  afterEach(() => removeDir(root));

  it('reads a file through its real path, with close-on-exec set', () => {
    const fd = native().openNoSymlinks(path.join(real, 'file'), O_RDONLY);
    try {
      expect(fs.readFileSync(fd, 'utf8')).toBe('backup me');
      const fdinfo = fs.readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8');
      const flags = Number.parseInt(/flags:\s*([0-7]+)/.exec(fdinfo)?.[1] ?? '0', 8);
      expect(flags & O_CLOEXEC).toBe(O_CLOEXEC);
    } finally {
      fs.closeSync(fd);
    }
  });

  it('creates a copy target with the given mode', () => {
    const target = path.join(real, 'copy');
    const fd = native().openNoSymlinks(target, O_WRONLY | O_CREAT | O_EXCL, 0o600);
    try {
      fs.writeSync(fd, 'copied');
    } finally {
      fs.closeSync(fd);
    }
    expect(fs.readFileSync(target, 'utf8')).toBe('copied');
    expect(modeOf(target)).toBe(0o600);
    expect(catchErrno(() => native().openNoSymlinks(target, O_WRONLY | O_CREAT | O_EXCL, 0o600)).code).toBe('EEXIST');
  });

  it('refuses a path through a symlinked directory with ELOOP', () => {
    const through = path.join(root, 'dirlink', 'file');
    const error = catchErrno(() => native().openNoSymlinks(through, O_RDONLY));
    expect(error).toMatchObject({ code: 'ELOOP', syscall: 'openat2', path: through });
  });

  it('refuses a final symlink and does not create through it', () => {
    expect(catchErrno(() => native().openNoSymlinks(path.join(real, 'filelink'), O_RDONLY)).code).toBe('ELOOP');
    fs.symlinkSync(path.join(real, 'absent'), path.join(real, 'dangling'));
    expect(catchErrno(() => native().openNoSymlinks(path.join(real, 'dangling'), O_WRONLY | O_CREAT, 0o644)).code).toBe(
      'ELOOP',
    );
    expect(fs.existsSync(path.join(real, 'absent'))).toBe(false);
  });

  it('refuses magic links under /proc', () => {
    expect(catchErrno(() => native().openNoSymlinks('/proc/self/cwd', O_RDONLY)).code).toBe('ELOOP');
  });

  it('refuses a relative path with EINVAL', () => {
    expect(catchErrno(() => native().openNoSymlinks('real/file', O_RDONLY)).code).toBe('EINVAL');
  });
});
