/**
 * Restoring a tree a turn removed. One file of it: the directories above it come back
 * with the modes the turn recorded for them, not the default, so a private directory is
 * not reopened to everyone by bringing one file back. A tree the turn replaced by a file:
 * one restore brings the directory and everything in it back.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { brokeredShell, describeRun, makeWorld, onlyTurn, removeWorld, run, type World } from './run-helpers.js';

let world: World;
const mode = async (rel: string) => (await fs.stat(path.join(world.ws, rel))).mode & 0o7777;

beforeAll(async () => {
  world = await makeWorld('partial-restore');
  await fs.mkdir(path.join(world.ws, 'tree', 'priv', 'sub'), { recursive: true });
  await fs.chmod(path.join(world.ws, 'tree'), 0o750);
  await fs.chmod(path.join(world.ws, 'tree', 'priv'), 0o700);
  await fs.writeFile(path.join(world.ws, 'tree', 'priv', 'sub', 'secret'), 'secret\n', { mode: 0o600 });
  const removed = await run(world, 'rm -rf tree', { session: 'partial' });
  if (removed.status !== 0) throw new Error(describeRun(removed));
});

afterAll(() => removeWorld(world));

describe('restore of one file from a removed tree', () => {
  it('brings the file back and its parents with their recorded modes', async () => {
    const turn = await onlyTurn(world, 'partial');
    const restored = await brokeredShell(world, ['backups', 'restore', turn.id, 'tree/priv/sub/secret']);
    expect(restored.status, describeRun(restored)).toBe(0);
    expect(await fs.readFile(path.join(world.ws, 'tree', 'priv', 'sub', 'secret'), 'utf8')).toBe('secret\n');
    expect(await mode('tree')).toBe(0o750);
    expect(await mode('tree/priv')).toBe(0o700);
    expect(await mode('tree/priv/sub/secret')).toBe(0o600);
  });
});

describe('restore of a directory the turn replaced by a file', () => {
  it('brings the directory back with its files in one restore', async () => {
    const other = await makeWorld('dir-to-file');
    try {
      await fs.mkdir(path.join(other.ws, 'd', 'sub'), { recursive: true });
      await fs.writeFile(path.join(other.ws, 'd', 'x'), 'x\n');
      await fs.writeFile(path.join(other.ws, 'd', 'sub', 'y'), 'y\n');
      const replaced = await run(other, 'rm -r d && echo file > d', { session: 'swap' });
      expect(replaced.status, describeRun(replaced)).toBe(0);
      const turn = await onlyTurn(other, 'swap');
      const restored = await brokeredShell(other, ['backups', 'restore', turn.id]);
      expect(restored.status, describeRun(restored)).toBe(0);
      expect(await fs.readFile(path.join(other.ws, 'd', 'x'), 'utf8')).toBe('x\n');
      expect(await fs.readFile(path.join(other.ws, 'd', 'sub', 'y'), 'utf8')).toBe('y\n');
    } finally {
      await removeWorld(other);
    }
  });
});
