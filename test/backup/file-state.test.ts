/**
 * What a commit, a restore plan and the viewer see at a path now (`observeState`): a file
 * whose bytes cannot be read as the file its size says it is is compared without a hash,
 * never waited on or read without end.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { observeState, stateDifference } from '../../src/backup/file-state.js';
import { tempDir } from './helpers.js';

describe('observeState', () => {
  it('hashes a regular file', async () => {
    const file = path.join(await tempDir(), 'f');
    await fs.writeFile(file, 'abc');
    expect(await observeState(file)).toMatchObject({ type: 'file', size: 3, sha256: 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad' });
  });

  it.each([
    ['/proc/self/pagemap', 'says it is empty, then gives gigabytes'],
    ['/proc/kmsg', 'says it is empty, then blocks or gives the kernel log'],
    ['/proc/version', 'says it is empty, then gives a line'],
  ])('%s (%s): no hash, and an answer', async (file) => {
    expect(await observeState(file)).toMatchObject({ type: 'file', size: 0, sha256: null });
  });

  it('a file reached through a folder made a symlink to /proc is looked at without a hash', async () => {
    const dir = await tempDir();
    await fs.symlink('/proc', path.join(dir, 'q'));
    expect(await observeState(path.join(dir, 'q', 'self', 'pagemap'))).toMatchObject({ type: 'file', sha256: null });
  });
});

describe('stateDifference of a file recorded without a hash', () => {
  const recorded = { type: 'file', size: 10, sha256: null, mode: 0o644, mtimeNs: '100', ino: '42', btimeNs: '7', ctimeNs: '200', uid: 0, gid: 0 } as const;

  it('the same file with a later status change time was written since', () => {
    expect(stateDifference(recorded, { ...recorded, sha256: 'a'.repeat(64), ctimeNs: '300' })).toMatch(/^written since/);
  });

  it('a file made afresh is no change, even when its inode number is the old one', () => {
    expect(stateDifference(recorded, { ...recorded, ino: '43', ctimeNs: '300' })).toBeUndefined();
    expect(stateDifference(recorded, { ...recorded, btimeNs: '8', ctimeNs: '300' })).toBeUndefined();
  });

  it('without birth times or a recorded ctime (older manifests), the ctime says nothing', () => {
    expect(stateDifference({ ...recorded, btimeNs: '0' }, { ...recorded, btimeNs: '0', ctimeNs: '300' })).toBeUndefined();
    const { ino: _ino, btimeNs: _btime, ctimeNs: _ctime, ...older } = recorded;
    expect(stateDifference(older, { ...recorded, ctimeNs: '300' })).toBeUndefined();
  });

  it('with a hash, content decides and the ctime is not looked at', () => {
    const hashed = { ...recorded, sha256: 'a'.repeat(64) };
    expect(stateDifference(hashed, { ...hashed, ctimeNs: '300' })).toBeUndefined();
  });
});
