/**
 * `fileBackup.oversize: skip` lets a file over the size cap change in place without a
 * backup of its content (a file a change removes is kept whole instead, whatever its
 * size: run-kept-whole.test.ts). The person is told so when it happens, and a restore
 * that cannot bring it back says so and does not exit 0.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { brokeredShell, describeRun, makeWorld, onlyTurn, removeWorld, run, type CliRun, type World } from './run-helpers.js';

let world: World;
let removed: CliRun;

beforeAll(async () => {
  world = await makeWorld('oversize-skip');
  await fs.writeFile(path.join(world.ws, 'big'), Buffer.alloc(2 * 1024 * 1024, 7));
  await fs.writeFile(path.join(world.ws, 'small'), 'small\n');
  const policy = path.join(world.base, 'policy.json');
  await fs.writeFile(policy, JSON.stringify({ backup: { fileBackupMaxSizeMB: 1, oversize: 'skip' } }));
  removed = await run(world, ': > big && rm small', { session: 'skip', policy });
});

afterAll(() => removeWorld(world));

describe('oversize: skip', () => {
  it('run counts only what it saved and names what it could not', () => {
    expect(removed.status, describeRun(removed)).toBe(0);
    expect(removed.stderr).toMatch(/turn \S+ backed up 1 file /);
    expect(removed.stderr).toContain(`changed without a backup (over the size cap, fileBackup.oversize is skip; restoring cannot bring it back): ${path.join(world.ws, 'big')}`);
  });

  it('restore brings back what was saved, says what it could not, and exits 1', async () => {
    const turn = await onlyTurn(world, 'skip');
    const restored = await brokeredShell(world, ['backups', 'restore', turn.id]);
    expect(restored.status, describeRun(restored)).toBe(1);
    expect(restored.stderr).toContain('1 file(s) not restored: the turn saved no content for them (over the size cap)');
    expect(await fs.readFile(path.join(world.ws, 'small'), 'utf8')).toBe('small\n');
    expect((await fs.stat(path.join(world.ws, 'big'))).size).toBe(0);
  });
});
