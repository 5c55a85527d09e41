/**
 * `brokered-shell run` started with a descriptor its caller left open (a shell's
 * `240>>file`, an embedding app's fd without FD_CLOEXEC): the command gets stdin,
 * stdout and stderr only, since that fd was opened outside the sandbox and a write
 * through it would reach the file with no broker and no backup.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeRun, makeWorld, removeWorld, run, writeOld, type CliRun, type World } from './run-helpers.js';

let world: World;
let result: CliRun;

beforeAll(async () => {
  world = await makeWorld('inherited-fds');
  await writeOld(path.join(world.outside, 'open-by-caller'), 'original\n', 0o644);
  const wrapper = ['bash', '-c', 'exec "$@" 240>>"$OUT/open-by-caller" 9<>"$OUT/open-by-caller"', 'wrap'];
  result = await run(world, 'echo through-240 >&240; echo through-9 >&9; ls /proc/self/fd | tr "\\n" " "', {}, { wrapper });
});

afterAll(() => removeWorld(world));

describe('run: descriptors the caller left open', () => {
  it('do not reach the command: writing to them fails', () => {
    expect(result.stderr, describeRun(result)).toMatch(/240: Bad file descriptor/);
    expect(result.stderr).toMatch(/9: Bad file descriptor/);
    // ls's own directory fd is the only one past stderr.
    expect(result.out).toBe('0 1 2 3 ');
  });

  it('leave the file they name untouched', async () => {
    expect(await fs.readFile(path.join(world.outside, 'open-by-caller'), 'utf8')).toBe('original\n');
  });
});
