/**
 * The toggle matrix, row by row, with the real kernel sandbox and the real broker:
 * sandbox disabled → plain bash; an excluded command → plain bash; dangerouslyDisableSandbox
 * → the approver decides (no → not run, 126); rawCommand → no shell, still in the sandbox;
 * file backup off → the policy still holds, nothing is backed up.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { NOT_RUN_EXIT_CODE } from '../../src/agent/session.js';
import { exists, makeWorld, openSession, read, recordingApprover, turnById } from './helpers.js';

describe('sandbox.enabled false', () => {
  it('runs plain bash without the broker: a write outside every root happens, nothing is backed up', async () => {
    const world = await makeWorld('disabled');
    await fs.writeFile(path.join(world.ws, 'f.txt'), 'before\n');
    const { session } = await openSession(world, { config: { sandbox: { enabled: false } } });
    expect(session.runtime).toBeUndefined();
    expect(session.socketPath).toBeUndefined();
    await session.beginTurn({ userMessage: 'disabled' });
    const result = await session.execute('echo out > "$OUT/made.txt"; echo changed > f.txt; echo "socket=${BROKERED_SHELL_SOCKET:-none}"');
    expect(result).toMatchObject({ exitCode: 0, sandboxed: false, ran: true, mode: 'sandbox-disabled', backups: [], promptBlocks: [] });
    expect(result.stdout).toBe('socket=none\n');
    expect(await read(path.join(world.outside, 'made.txt'))).toBe('out\n');
    expect(await read(path.join(world.ws, 'f.txt'))).toBe('changed\n');
    const ended = await session.endTurn();
    expect(ended).toMatchObject({ ok: true, files: 0 });
  });
});

describe('excludedCommands', () => {
  it('a command whose root word is listed runs locally; a compound or unlisted one stays in the sandbox', async () => {
    const world = await makeWorld('excluded');
    const { session } = await openSession(world, { config: { sandbox: { excludedCommands: ['touch', 'git push'] } } });
    await session.beginTurn({ userMessage: 'excluded' });

    const plain = await session.execute('touch "$OUT/a"');
    expect(plain).toMatchObject({ exitCode: 0, sandboxed: false, mode: 'excluded' });
    expect(await exists(path.join(world.outside, 'a'))).toBe(true);

    // After environment assignments, by the base name of a path.
    const assigned = await session.execute(`LC_ALL=C /usr/bin/touch ${path.join(world.outside, 'b')}`);
    expect(assigned).toMatchObject({ exitCode: 0, mode: 'excluded' });
    expect(await exists(path.join(world.outside, 'b'))).toBe(true);

    // More than one simple command: never excluded, so the write outside is refused.
    const compound = await session.execute('touch "$OUT/c"; true');
    expect(compound).toMatchObject({ sandboxed: true, mode: 'sandboxed' });
    expect(compound.stderr).toMatch(/Permission denied/);
    expect(await exists(path.join(world.outside, 'c'))).toBe(false);

    // A multi-word entry needs all its words.
    const git = await session.execute('git pull');
    expect(git.mode).toBe('sandboxed');
  });
});

describe('dangerouslyDisableSandbox', () => {
  it('approved: asks once, then runs locally', async () => {
    const world = await makeWorld('unsandboxed-yes');
    const approver = recordingApprover(true);
    const { session } = await openSession(world, { approver });
    const result = await session.execute('echo x > "$OUT/yes.txt"', { dangerouslyDisableSandbox: true, reason: 'needs the network', toolCallId: 't1' });
    expect(result).toMatchObject({ exitCode: 0, sandboxed: false, ran: true, mode: 'unsandboxed-approved', approval: { asked: true, approved: true, rerun: false } });
    expect(approver.requests).toEqual([{ kind: 'unsandboxed', command: 'echo x > "$OUT/yes.txt"', reason: 'needs the network', toolCallId: 't1' }]);
    expect(await read(path.join(world.outside, 'yes.txt'))).toBe('x\n');
  });

  it('denied: nothing runs, exit 126 and a message on stderr', async () => {
    const world = await makeWorld('unsandboxed-no');
    const approver = recordingApprover(false);
    const { session } = await openSession(world, { approver });
    const result = await session.execute('echo x > "$OUT/no.txt"', { dangerouslyDisableSandbox: true });
    expect(result).toMatchObject({ exitCode: NOT_RUN_EXIT_CODE, ran: false, sandboxed: false, mode: 'not-run', approval: { asked: true, approved: false } });
    expect(result.stderr).toBe('brokered-shell: the command was not run: running it without the sandbox was not approved\n');
    expect(approver.requests).toHaveLength(1);
    expect(await exists(path.join(world.outside, 'no.txt'))).toBe(false);
  });

  it('without an approver: nothing runs', async () => {
    const world = await makeWorld('unsandboxed-none');
    const { session } = await openSession(world);
    const result = await session.execute('echo x > "$OUT/none.txt"', { dangerouslyDisableSandbox: true });
    expect(result).toMatchObject({ exitCode: NOT_RUN_EXIT_CODE, ran: false, mode: 'not-run', approval: { asked: false, approved: false } });
    expect(await exists(path.join(world.outside, 'none.txt'))).toBe(false);
  });
});

describe('rawCommand', () => {
  it('spawns the argv without a shell: nothing is expanded', async () => {
    const world = await makeWorld('raw-shell');
    const { session } = await openSession(world);
    const split = await session.execute('echo $HOME  *', { rawCommand: true });
    expect(split).toMatchObject({ exitCode: 0, sandboxed: true, mode: 'sandboxed' });
    expect(split.stdout).toBe('$HOME *\n');
    const argv = await session.execute(['printf', '%s|', 'two words', '$X']);
    expect(argv.stdout).toBe('two words|$X|');
  });

  it('is still in the sandbox and brokered: a write outside is refused, a change in the workspace is backed up', async () => {
    const world = await makeWorld('raw-sandbox');
    const kept = path.join(world.ws, 'kept.txt');
    await fs.writeFile(kept, 'original\n');
    await fs.writeFile(path.join(world.ws, 'new.txt'), 'replacement\n');
    const { session } = await openSession(world);
    const turn = await session.beginTurn({ userMessage: 'raw' });
    const outside = await session.execute(['touch', path.join(world.outside, 'raw.txt')]);
    expect(outside.exitCode).not.toBe(0);
    expect(await exists(path.join(world.outside, 'raw.txt'))).toBe(false);
    const copy = await session.execute(['cp', 'new.txt', 'kept.txt'], { toolCallId: 'raw-cp' });
    expect(copy).toMatchObject({ exitCode: 0, sandboxed: true });
    expect(copy.backups).toEqual([expect.objectContaining({ path: kept, toolCallId: 'raw-cp', turnId: turn.turnId })]);
    expect(await read(kept)).toBe('replacement\n');
    expect((await session.endTurn()).ok).toBe(true);
  });
});

describe('file backup off for a turn', () => {
  it('the policy still holds, changes happen, nothing is backed up', async () => {
    const world = await makeWorld('no-backup');
    await fs.writeFile(path.join(world.ws, 'one.txt'), 'one\n');
    await fs.writeFile(path.join(world.ws, 'secret.txt'), 'secret\n');
    const { session } = await openSession(world, { config: { fileSafety: { rules: [{ pattern: 'secret.txt', decision: 'deny' }] } } });
    const turn = await session.beginTurn({ userMessage: 'no backup', fileBackup: { enabled: false } });
    expect(turn.backup).toMatchObject({ enabled: false, reason: 'file backup is disabled' });
    const result = await session.execute('echo 1 > one.txt; echo x > secret.txt');
    expect(result.exitCode).toBe(1);
    expect(result.backups).toEqual([]);
    expect(await read(path.join(world.ws, 'one.txt'))).toBe('1\n');
    expect(await read(path.join(world.ws, 'secret.txt'))).toBe('secret\n');
    const ended = await session.endTurn();
    expect(ended).toMatchObject({ ok: true, files: 0 });
    expect((await turnById(world, session.sessionId, turn.turnId)).files).toEqual([]);

    // The next turn backs up again.
    const next = await session.beginTurn({ userMessage: 'backup again' });
    expect(next.backup.enabled).toBe(true);
    const again = await session.execute('echo 2 > one.txt');
    expect(again.backups.map((b) => b.path)).toEqual([path.join(world.ws, 'one.txt')]);
  });
});
