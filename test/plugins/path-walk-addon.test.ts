import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeStats } from '../../src/plugins/path-resolution/resolve.js';
import { native } from '../../src/native/loader.js';
import { walkByComponents, walkPlain, walkSync, type WalkResult } from '../../src/plugins/path-resolution/walk.js';

// The addon's one-call walk (native/addon/plain-walk.cc) answers only paths without links,
// dots or /proc, and answers them exactly as the walk by components does; the rest it
// hands back. Real files, the real addon.

let base: string;

beforeAll(async () => {
  base = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'bsh-plain-walk-')));
  await fs.mkdir(path.join(base, 'dir', 'deep'), { recursive: true });
  await fs.writeFile(path.join(base, 'dir', 'file.txt'), 'x');
  await fs.link(path.join(base, 'dir', 'file.txt'), path.join(base, 'dir', 'second-name.txt'));
  await fs.symlink('dir', path.join(base, 'link-dir'));
  await fs.symlink('dir/file.txt', path.join(base, 'link-file'));
  await fs.symlink('nowhere', path.join(base, 'dangling'));
});

afterAll(async () => {
  await fs.rm(base, { recursive: true, force: true });
});

const at = (relative: string) => `${base}/${relative}`;
const brief = (result: WalkResult | undefined) => result && { path: result.path, ...describeStats(result.stats) };

describe('paths the addon answers, as the walk by components does', () => {
  it.each<[string, boolean, { path: string; kind: string; links?: number }]>([
    ['dir/file.txt', false, { path: 'dir/file.txt', kind: 'file', links: 2 }],
    ['dir/deep', false, { path: 'dir/deep', kind: 'directory' }],
    ['dir/new.txt', true, { path: 'dir/new.txt', kind: 'absent' }],
    ['dir//deep/', false, { path: 'dir/deep', kind: 'directory' }],
  ])('%s (missing final allowed: %s)', (relative, allowMissingFinal, expected) => {
    const fast = walkPlain(at(relative), allowMissingFinal);
    const slow = walkByComponents(at(relative), { followFinal: true, allowMissingFinal });
    expect(brief(fast)).toEqual({ ...expected, path: at(expected.path) });
    expect(brief(fast)).toEqual(brief(slow));
  });

  it('answers the root itself', () => {
    expect(brief(walkPlain('/', false))).toEqual({ path: '/', kind: 'directory' });
    expect(brief(walkPlain('//', false))).toEqual({ path: '/', kind: 'directory' });
  });
});

describe('paths it hands back to the walk by components', () => {
  it.each<[string, string, boolean]>([
    ['a link in the middle', 'link-dir/file.txt', true],
    ['a final link', 'link-file', true],
    ['a dangling final link', 'dangling', true],
    ['a `..`', 'dir/deep/../file.txt', true],
    ['a `.`', 'dir/./file.txt', true],
    ['a missing final name, not allowed', 'dir/new.txt', false],
    ['a missing directory', 'gone/new.txt', true],
    ['a file used as a directory', 'dir/file.txt/x', true],
    ['a name too long for the file system', `dir/${'n'.repeat(300)}`, true],
    ['a NUL byte', 'dir/fi\0le.txt', true],
    ['a lone surrogate', 'dir/\uD800.txt', true],
  ])('%s', (_what, relative, allowMissingFinal) => {
    expect(walkPlain(at(relative), allowMissingFinal)).toBeUndefined();
  });

  it('hands back /proc and relative paths', () => {
    expect(walkPlain(`/proc/${process.pid}/cwd`, false)).toBeUndefined();
    expect(walkPlain('/proc', false)).toBeUndefined();
    expect(walkPlain('dir/file.txt', true)).toBeUndefined();
  });

  it('so walkSync still follows links and refuses what the walk by components refuses', () => {
    expect(walkSync(at('link-dir/file.txt'), { followFinal: true, allowMissingFinal: false }).path).toBe(at('dir/file.txt'));
    expect(() => walkSync(at('gone/new.txt'), { followFinal: true, allowMissingFinal: true })).toThrow(/does not exist/);
    expect(() => walkSync(`/proc/${process.pid}/cwd`, { followFinal: true, allowMissingFinal: false })).toThrow(/broker's own process/);
  });
});

describe('the walk kernels without openat2 get (an lstat per component)', () => {
  // Every path of the tables above, both answers of the addon compared raw.
  const relatives = [
    'dir/file.txt', 'dir/deep', 'dir/new.txt', 'dir//deep/', 'link-dir/file.txt', 'link-file', 'dangling',
    'dir/deep/../file.txt', 'dir/./file.txt', 'gone/new.txt', 'dir/file.txt/x', `dir/${'n'.repeat(300)}`, 'dir/new/', '',
  ];
  it.each(relatives.flatMap((relative) => [[relative, true], [relative, false]] as const))('%s (missing final allowed: %s)', (relative, allowMissingFinal) => {
    const addon = native();
    expect(addon.walkPlainByLstat(at(relative), allowMissingFinal)).toBe(addon.walkPlain(at(relative), allowMissingFinal));
  });

  it('answers the root and hands back /proc the same way', () => {
    const addon = native();
    for (const p of ['/', '//', '/proc', `/proc/${process.pid}/cwd`, 'relative']) {
      expect(addon.walkPlainByLstat(p, true)).toBe(addon.walkPlain(p, true));
    }
    expect(addon.walkPlain('/', false)).toBeGreaterThan(0);
  });
});
