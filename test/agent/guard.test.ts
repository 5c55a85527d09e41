/**
 * Guards for the agent's own file tools: the same pipeline as a command's write or
 * delete, backing up into the same turn as shell edits; a denied path stays denied; a
 * prompt goes to the approver and, granted, is checked again.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { makeWorld, openSession, read, recordingApprover, savedBytes, turnById } from './helpers.js';

const rules = [
  { pattern: 'secret.txt', decision: 'deny' as const },
  { pattern: 'ask.txt', decision: 'prompt' as const },
];

describe('guardWrite / guardDelete', () => {
  it('an allowed write backs up the existing file into the same turn as a shell edit', async () => {
    const world = await makeWorld('guard-turn');
    const shell = path.join(world.ws, 'shell.txt');
    const tool = path.join(world.ws, 'tool.txt');
    await fs.writeFile(shell, 'shell before\n');
    await fs.writeFile(tool, 'tool before\n');
    const { session } = await openSession(world);
    const turn = await session.beginTurn({ userMessage: 'edit both' });
    await session.execute('echo shell after > shell.txt');

    const guard = await session.guardWrite('tool.txt', { tool: 'Edit', toolCallId: 'edit-1' });
    expect(guard).toMatchObject({ allowed: true, decision: 'sandbox', backedUp: true, promptBlocks: [], toolCallId: 'edit-1', path: tool });
    expect(guard.backups).toEqual([expect.objectContaining({ path: tool, operation: 'open', toolCallId: 'edit-1', turnId: turn.turnId })]);
    await fs.writeFile(tool, 'tool after\n');

    // A second edit in the same turn: allowed, the first version is the one kept.
    const again = await session.guardWrite(tool, { tool: 'MultiEdit' });
    expect(again).toMatchObject({ allowed: true, backedUp: false });

    expect(await session.endTurn()).toMatchObject({ ok: true, files: 2 });
    const manifest = await turnById(world, session.sessionId, turn.turnId);
    expect(await savedBytes(world, manifest, shell)).toBe('shell before\n');
    expect(await savedBytes(world, manifest, tool)).toBe('tool before\n');
  });

  it('a new file is allowed with nothing to back up; a delete backs up what it removes', async () => {
    const world = await makeWorld('guard-new');
    const doomed = path.join(world.ws, 'doomed.txt');
    await fs.writeFile(doomed, 'doomed\n');
    const { session } = await openSession(world);
    await session.beginTurn({ userMessage: 'new and delete' });
    expect(await session.guardWrite('fresh.txt', { tool: 'Write' })).toMatchObject({ allowed: true, backedUp: false });
    const deletion = await session.guardDelete(doomed);
    expect(deletion).toMatchObject({ allowed: true, backedUp: true });
    expect(deletion.backups).toEqual([expect.objectContaining({ path: doomed, operation: 'delete' })]);
  });

  it('a denied path: not allowed, nothing backed up', async () => {
    const world = await makeWorld('guard-deny');
    await fs.writeFile(path.join(world.ws, 'secret.txt'), 'secret\n');
    const { session } = await openSession(world, { config: { fileSafety: { rules } } });
    const secret = await session.guardWrite('secret.txt', { tool: 'Write' });
    expect(secret).toMatchObject({ allowed: false, decision: 'deny', backedUp: false, backups: [], promptBlocks: [] });
    expect(secret.reason).toMatch(/secret\.txt/);
    const outside = await session.guardWrite(path.join(world.outside, 'x.txt'), { tool: 'Write' });
    expect(outside).toMatchObject({ allowed: false, decision: 'deny' });
    const deletion = await session.guardDelete('secret.txt');
    expect(deletion).toMatchObject({ allowed: false, decision: 'deny', backedUp: false });
  });

  it('a prompt: the approver is asked, the path granted and checked again (and backed up)', async () => {
    const world = await makeWorld('guard-prompt');
    const ask = path.join(world.ws, 'ask.txt');
    await fs.writeFile(ask, 'ask before\n');
    const approver = recordingApprover('session');
    const { session } = await openSession(world, { config: { fileSafety: { rules } }, approver });
    const turn = await session.beginTurn({ userMessage: 'guarded' });
    const result = await session.guardWrite('ask.txt', { tool: 'NotebookEdit', toolCallId: 'nb-1' });
    expect(result).toMatchObject({ allowed: true, decision: 'grant-token', backedUp: true, promptBlocks: [], approval: { asked: true, approved: true, rerun: false } });
    expect(approver.requests).toEqual([
      expect.objectContaining({ kind: 'path', tool: 'NotebookEdit', toolCallId: 'nb-1', block: expect.objectContaining({ normalisedPath: ask, access: 'write' }) }),
    ]);
    // Granted for the session: a shell write to it asks nobody.
    const shell = await session.execute('echo from shell > ask.txt');
    expect(shell).toMatchObject({ exitCode: 0, promptBlocks: [] });
    expect(approver.requests).toHaveLength(1);
    await session.endTurn();
    expect(await savedBytes(world, await turnById(world, session.sessionId, turn.turnId), ask)).toBe('ask before\n');
  });

  it('a prompt without an approver, or denied: not allowed, the blocks returned', async () => {
    const world = await makeWorld('guard-prompt-no');
    await fs.writeFile(path.join(world.ws, 'ask.txt'), 'ask\n');
    const none = await openSession(world, { config: { fileSafety: { rules } } });
    const result = await none.session.guardWrite('ask.txt', { tool: 'Write' });
    expect(result).toMatchObject({ allowed: false, decision: 'prompt', backedUp: false, approval: { asked: false, approved: false } });
    expect(result.promptBlocks.map((b) => b.access)).toEqual(['write']);
    const denier = recordingApprover(false);
    const denied = await openSession(world, { config: { fileSafety: { rules } }, approver: denier });
    const refused = await denied.session.guardDelete('ask.txt');
    expect(refused).toMatchObject({ allowed: false, decision: 'prompt', approval: { asked: true, approved: false, rerun: false } });
    expect(denier.requests).toEqual([expect.objectContaining({ kind: 'path', tool: 'delete' })]);
    expect(await read(path.join(world.ws, 'ask.txt'))).toBe('ask\n');
  });

  it('with the sandbox disabled the tool is not guarded', async () => {
    const world = await makeWorld('guard-disabled');
    const { session } = await openSession(world, { config: { sandbox: { enabled: false }, fileSafety: { rules } } });
    expect(await session.guardWrite('secret.txt', { tool: 'Write' })).toMatchObject({ allowed: true, decision: 'unguarded', backedUp: false });
  });
});
