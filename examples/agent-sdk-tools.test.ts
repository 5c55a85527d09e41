import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createSandboxSession, type SandboxSession } from 'brokered-shell';
import { aiSdkTools, openAiAgentsTools } from './agent-sdk-tools.js';

const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

async function session(): Promise<{ session: SandboxSession; ws: string }> {
  const base = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'bsh-agent-sdk-')));
  cleanup.push(() => fs.rm(base, { recursive: true, force: true }));
  const ws = path.join(base, 'ws');
  await fs.mkdir(ws);
  const opened = await createSandboxSession({ workspace: ws, home: path.join(base, 'home'), env: { ...process.env, XDG_DATA_HOME: path.join(base, 'xdg') } });
  cleanup.push(() => opened.close());
  return { session: opened, ws };
}

describe('agent framework tools on a session', () => {
  it("the AI SDK's shape: a zod inputSchema the model's input parses with; bash runs a turn, undo restores it", async () => {
    const { session: s, ws } = await session();
    await fs.writeFile(path.join(ws, 'a.txt'), 'before\n');
    const tools = aiSdkTools(s);
    expect(Object.keys(tools.bash).sort()).toEqual(['description', 'execute', 'inputSchema']);
    // What a model sends is checked by the schema the SDK is given.
    expect(tools.bash.inputSchema.safeParse({}).success).toBe(false);
    expect(z.toJSONSchema(tools.bash.inputSchema)).toMatchObject({ type: 'object', required: ['command'] });
    const result = await tools.bash.execute(tools.bash.inputSchema.parse({ command: 'echo after > a.txt; echo x > /etc/bsh-agent-sdk; cat a.txt' }));
    expect(result).toMatchObject({ exitCode: 0, stdout: 'after\n', backedUp: 1 });
    expect(result.refusals).toEqual([expect.objectContaining({ kind: 'denied', path: '/etc/bsh-agent-sdk', reason: expect.stringContaining('outside the writable roots') })]);
    expect(existsSync('/etc/bsh-agent-sdk')).toBe(false);
    const undone = await tools.undo.execute({ turn: result.turnId ?? 'latest' });
    expect(undone.conflicts).toEqual([]);
    expect(await fs.readFile(path.join(ws, 'a.txt'), 'utf8')).toBe('before\n');
  });

  it("the OpenAI Agents SDK's shape: name, parameters (strict: every field required), execute", async () => {
    const { session: s, ws } = await session();
    const [bash, undo] = openAiAgentsTools(s);
    expect([bash.name, undo.name]).toEqual(['bash', 'undo']);
    expect(z.toJSONSchema(undo.parameters)).toMatchObject({ required: ['turn'] });
    const result = await bash.execute({ command: 'echo made > new.txt' });
    expect(result).toMatchObject({ exitCode: 0, refusals: [] });
    await undo.execute({ turn: 'latest' });
    expect(existsSync(path.join(ws, 'new.txt'))).toBe(false);
  });

  it('an abort signal stops the command', async () => {
    const { session: s } = await session();
    const controller = new AbortController();
    const running = aiSdkTools(s).bash.execute({ command: 'sleep 30; echo late' }, { abortSignal: controller.signal });
    setTimeout(() => controller.abort(), 300);
    const result = await running;
    expect(result.stdout).toBe('');
    expect(result.exitCode).toBe(143);
  });
});
