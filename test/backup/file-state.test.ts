/**
 * What a commit, a restore plan and the viewer see at a path now (`observeState`): a file
 * whose bytes cannot be read as the file its size says it is is compared without a hash,
 * never waited on or read without end.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { observeState } from '../../src/backup/file-state.js';
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
