import { execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { expect, it } from 'vitest';

it('the MCP client example runs, diffs and restores a turn, answering the approval question', async () => {
  const base = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'bsh-mcp-client-')));
  try {
    const ws = path.join(base, 'ws');
    await fs.mkdir(ws);
    await fs.writeFile(path.join(ws, 'notes.txt'), 'original\n');
    const example = new URL('./mcp-client.ts', import.meta.url).pathname;
    const out = execFileSync(process.execPath, ['--import', 'tsx', example, ws], {
      encoding: 'utf8',
      env: { ...process.env, BROKERED_SHELL_HOME: path.join(base, 'home'), BROKERED_SHELL_LOG_LEVEL: 'warn' },
    });
    expect(out).toContain('tools: run, list_turns, show_turn, diff_turn, restore_turn');
    expect(out).toContain(`asked: The command waits for approval: write ${path.join(ws, '.brokered-shell.json')}`);
    expect(out).toMatch(/^run: exit 0, stdout "changed\\n", turn \S+$/m);
    expect(out).toContain('diff: -original +changed');
    expect(out).toContain('restore: remove .brokered-shell.json, replace notes.txt');
    expect(await fs.readFile(path.join(ws, 'notes.txt'), 'utf8')).toBe('original\n');
  } finally {
    await fs.rm(base, { recursive: true, force: true });
  }
});
