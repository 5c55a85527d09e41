/**
 * `brokered-shell run` against a command that changes a name between the broker's check
 * and the supervisor's operation: a thread hard-links another file onto a name whose
 * create was just checked (seen absent, so nothing was backed up). The write must never
 * reach the linked file, in the workspace or outside it (a package store's hard link).
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTools, describeRun, makeWorld, removeWorld, run, writeOld, type CliRun, type World } from './run-helpers.js';

const ROUNDS = 1500;
let world: World;
let result: CliRun;

beforeAll(async () => {
  world = await makeWorld('name-races');
  buildTools(world, ['link-racer']);
  await writeOld(path.join(world.ws, 'W'), 'workspace original\n', 0o644);
  // A workspace name for an outside file, as a package manager's store links them.
  await writeOld(path.join(world.outside, 'store'), 'store original\n', 0o644);
  await fs.link(path.join(world.outside, 'store'), path.join(world.ws, 'S'));
  result = await run(world, `"$TOOLS/link-racer" W P ${ROUNDS}; "$TOOLS/link-racer" S Q ${ROUNDS}`, { session: 'races' });
});

afterAll(() => removeWorld(world));

describe('run: a link made onto a name while its create is being checked', () => {
  it('never lets the open reach the linked file', () => {
    expect(result.status, describeRun(result)).toBe(0);
    expect(result.out).toBe(`rounds ${ROUNDS} reached 0\nrounds ${ROUNDS} reached 0\n`);
  });

  it('leaves the workspace file and the outside store file as they were', async () => {
    expect(await fs.readFile(path.join(world.ws, 'W'), 'utf8')).toBe('workspace original\n');
    expect(await fs.readFile(path.join(world.outside, 'store'), 'utf8')).toBe('store original\n');
  });
});
