/**
 * What a session checks before it starts anything (src/agent/preflight.ts), on real files:
 * the store's location and whether it can be made and written, the launcher's answer to
 * its kernel check. `run`'s use of them is in test/cli/run-preflight.test.ts.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { SandboxUnavailableError } from '../../src/agent/errors.js';
import { checkLauncher, checkStore, storeLocationProblem } from '../../src/agent/preflight.js';
import { ErrorCodes } from '../../src/core/errors.js';
import { makeWorld, openSession } from './helpers.js';

const storeError = (message: RegExp) => expect.objectContaining({ code: ErrorCodes.STORE_UNAVAILABLE, message: expect.stringMatching(message) as string });

describe('a session refuses a store a mkdir would hang on', () => {
  it.each(['/proc/no-such-dir/store', '/proc/self/cwd/store', '/proc'])('%s: STORE_UNAVAILABLE at creation, whatever storeUnavailable says', async (home) => {
    const world = await makeWorld('proc-home');
    await expect(openSession(world, { home })).rejects.toThrow(storeError(/cannot hold the backup store: it is under \/proc$/));
  });

  it('procfs reached through a link is refused too', async () => {
    const world = await makeWorld('proc-link');
    await fs.symlink('/proc/self', path.join(world.base, 'proc-link'));
    await expect(openSession(world, { home: path.join(world.base, 'proc-link', 'store') })).rejects.toThrow(storeError(/proc-link is on procfs$/));
  });

  it('a home that is a file is left to the turn (backups off, or changes refused), as before', async () => {
    const world = await makeWorld('file-home');
    const file = path.join(world.base, 'a-file');
    await fs.writeFile(file, '');
    const { session } = await openSession(world, { home: file });
    const turn = await session.beginTurn({ userMessage: 'x' });
    expect(turn.backup.enabled).toBe(false);
  });
});

describe('checkStore', () => {
  it("'possible' looks and makes nothing; 'usable' makes the store 0700 and leaves no probe behind", async () => {
    const world = await makeWorld('store-check');
    const home = path.join(world.base, 'a', 'b', 'store');
    await checkStore(home, 'possible');
    await expect(fs.stat(path.join(world.base, 'a'))).rejects.toThrow(/ENOENT/);
    await checkStore(home, 'usable');
    expect((await fs.stat(home)).mode & 0o777).toBe(0o700);
    // Probed where the store makes its sessions, which it makes anyway; nothing is left there.
    expect(await fs.readdir(home)).toEqual(['workspace']);
    expect(await fs.readdir(path.join(home, 'workspace', 'sessions'))).toEqual([]);
  });

  it('a link to a directory is a usable store', async () => {
    const world = await makeWorld('store-link');
    await fs.mkdir(path.join(world.base, 'real'));
    await fs.symlink(path.join(world.base, 'real'), path.join(world.base, 'link'));
    await checkStore(path.join(world.base, 'link'), 'usable');
  });

  it('says which part of the path is in the way', async () => {
    const world = await makeWorld('store-file');
    await fs.writeFile(path.join(world.base, 'file'), '');
    await expect(checkStore(path.join(world.base, 'file'))).rejects.toThrow(storeError(/file cannot hold the backup store: it is not a directory$/));
    await expect(checkStore(path.join(world.base, 'file', 'store'))).rejects.toThrow(storeError(/: ENOTDIR$/));
  });

  it('only a lexical /proc is refused by its name', () => {
    expect(storeLocationProblem('/proc/1')).toBe('it is under /proc');
    expect(storeLocationProblem('/procedures/store')).toBeUndefined();
    expect(storeLocationProblem('/home/me/.brokered-shell')).toBeUndefined();
  });
});

describe('checkLauncher: the --check contract', () => {
  async function launcher(script: string): Promise<string> {
    const world = await makeWorld('launcher');
    const file = path.join(world.base, 'brokered-sandbox');
    await fs.writeFile(file, `#!/bin/sh\n${script}\n`, { mode: 0o755 });
    return file;
  }

  it('the real launcher: ok here', () => {
    expect(checkLauncher()).toEqual({ ok: true, message: 'ok' });
  });

  it('126 and a reason: this kernel cannot sandbox, said as the launcher says it', async () => {
    expect(checkLauncher(await launcher('echo "brokered-sandbox: no Landlock ABI 6" >&2; exit 126'))).toEqual({ ok: false, message: 'brokered-sandbox: no Landlock ABI 6' });
  });

  it.each([
    ['0 without "ok"', 'exit 0', /\(exit 0\)/],
    ['126 without a reason', 'exit 126', /\(exit 126\)/],
    ['an unknown option (a launcher older than --check)', 'echo "brokered-sandbox: unknown or incomplete option $1" >&2; exit 126', /\(exit 126: brokered-sandbox: unknown or incomplete option --check\)/],
    ['another status', 'exit 2', /\(exit 2\)/],
  ])('%s: SandboxUnavailableError, a stale build', async (_what, script, answer) => {
    const file = await launcher(script);
    expect(() => checkLauncher(file)).toThrow(SandboxUnavailableError);
    expect(() => checkLauncher(file)).toThrow(answer);
  });
});
