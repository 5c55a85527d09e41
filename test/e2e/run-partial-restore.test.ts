/**
 * Restoring one file of a tree a turn removed: the directories above it come back with
 * the modes the turn recorded for them, not the default, so a private directory is not
 * reopened to everyone by bringing one file back.
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
