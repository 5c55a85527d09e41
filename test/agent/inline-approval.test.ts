/**
 * Inline approvals through the library (the default): the approver is called while the
 * command's write waits in the real sandbox; a yes lets it through (backed up first), a
 * no or a timeout gives the program EACCES; two processes' prompts are asked one at a
 * time, each once; nothing is ever run twice.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ApprovalRequest } from '../../src/agent/types.js';
import { exists, makeWorld, openSession, read, savedBytes, turnById, type World } from './helpers.js';

const config = { fileSafety: { rules: [{ pattern: 'ask*.txt', decision: 'prompt' as const, reason: 'asks first' }] } };

async function prepare(prefix: string): Promise<World> {
  const world = await makeWorld(prefix);
  await fs.writeFile(path.join(world.ws, 'ask.txt'), 'original\n');
  return world;
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('inline approval', () => {
  it('an async approver is called while the command waits at the write; yes: backed up, written, and the command goes on', async () => {
    const world = await prepare('inline-async');
    const seen: string[] = [];
    const requests: ApprovalRequest[] = [];
    const { session } = await openSession(world, {
      config,
      approver: async (request) => {
        requests.push(request);
        // The command is held: the write has not happened, nor anything after it.
        seen.push(`${await read(path.join(world.ws, 'ask.txt'))}|${await exists(path.join(world.ws, 'after.txt'))}`);
        await pause(200);
        return true;
      },
    });
    const turn = await session.beginTurn({ userMessage: 'inline' });
    const result = await session.execute('echo before >> log.txt; echo changed > ask.txt; echo after > after.txt; echo done', { toolCallId: 'call-async' });
    expect(result).toMatchObject({ exitCode: 0, stdout: 'done\n', promptBlocks: [], approval: { asked: true, approved: true, rerun: false, rounds: 1 } });
    expect(seen).toEqual(['original\n|false']);
    expect(requests).toEqual([
      expect.objectContaining({ kind: 'path', toolCallId: 'call-async', command: expect.stringContaining('echo changed > ask.txt'), block: expect.objectContaining({ normalisedPath: path.join(world.ws, 'ask.txt'), access: 'write' }) }),
    ]);
    expect(await read(path.join(world.ws, 'log.txt'))).toBe('before\n');
    expect(await read(path.join(world.ws, 'ask.txt'))).toBe('changed\n');
    await session.endTurn();
    expect(await savedBytes(world, await turnById(world, session.sessionId, turn.turnId), path.join(world.ws, 'ask.txt'))).toBe('original\n');
  });

  it('no answer within approvalTimeoutSeconds is a no: EACCES there, the command goes on, the file untouched', async () => {
    const world = await prepare('inline-timeout');
    let aborted = false;
    const { session } = await openSession(world, {
      config: { ...config, approvalTimeoutSeconds: 1 },
      approver: (request) =>
        new Promise<boolean>(() => {
          if (request.kind === 'path') request.signal.addEventListener('abort', () => void (aborted = true));
        }),
    });
    const result = await session.execute('echo changed > ask.txt || echo "refused $?"; echo after');
    expect(result).toMatchObject({ exitCode: 0, approval: { asked: true, approved: false } });
    expect(result.stdout).toBe('refused 1\nafter\n');
    expect(result.stderr).toMatch(/ask\.txt: Permission denied/);
    expect(result.approval?.questions?.[0]?.refusal).toMatch(/^no answer within 1 s$/);
    expect(result.promptBlocks.map((b) => b.normalisedPath)).toEqual([path.join(world.ws, 'ask.txt')]);
    expect(aborted).toBe(true);
    expect(await read(path.join(world.ws, 'ask.txt'))).toBe('original\n');
  });

  it('two processes of one command prompting at once: asked one at a time, each once', async () => {
    const world = await prepare('inline-two');
    let open = 0;
    let most = 0;
    const asked: string[] = [];
    const { session } = await openSession(world, {
      config,
      approver: async (request) => {
        open += 1;
        most = Math.max(most, open);
        if (request.kind === 'path') asked.push(path.basename(request.block.normalisedPath));
        await pause(150);
        open -= 1;
        return true;
      },
    });
    const result = await session.execute('(echo 1 > ask-1.txt) & (echo 2 > ask-2.txt) & wait; cat ask-1.txt ask-2.txt');
    expect(result).toMatchObject({ exitCode: 0, stdout: '1\n2\n', approval: { asked: true, approved: true, rounds: 2 } });
    expect(asked.sort()).toEqual(['ask-1.txt', 'ask-2.txt']);
    expect(most).toBe(1);
  });

  it('a no: EACCES at the write, the rest of the command runs once, the status is the command\'s', async () => {
    const world = await prepare('inline-no');
    const { session } = await openSession(world, { config, approver: () => false });
    const result = await session.execute('echo run >> counter.txt; echo changed > ask.txt; echo run >> counter.txt; exit 3');
    expect(result).toMatchObject({ exitCode: 3, approval: { asked: true, approved: false, rerun: false } });
    expect(await read(path.join(world.ws, 'counter.txt'))).toBe('run\nrun\n');
    expect(await read(path.join(world.ws, 'ask.txt'))).toBe('original\n');
  });
});
