/**
 * A reader that goes away early (`brokered-shell … | head`) closes the pipe: the CLI drops
 * what is left to say, does not die on EPIPE, and finishes its work.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI, cli, tempDir } from './helpers.js';

/** Run the CLI with `closed` (stdout or stderr) a pipe whose reader is gone before it writes. */
function withClosedPipe(args: string[], home: string, closed: 'stdout' | 'stderr'): Promise<{ status: number | null; other: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, BROKERED_SHELL_HOME: home, BROKERED_SHELL_LOG_LEVEL: 'warn' }, stdio: ['ignore', 'pipe', 'pipe'] });
    child[closed].destroy();
    let other = '';
    child[closed === 'stdout' ? 'stderr' : 'stdout'].on('data', (chunk: Buffer) => (other += String(chunk)));
    child.once('error', reject);
    child.once('close', (status) => resolve({ status, other }));
  });
}

describe('a closed pipe', () => {
  it('on stdout: the command ends normally, no EPIPE trace', async () => {
    const result = await withClosedPipe(['config', 'schema'], await tempDir('bsh-cli-home-'), 'stdout');
    expect(result.other).toBe('');
    expect(result.status).toBe(0);
  });

  it("on run's stderr: the turn is still committed", async () => {
    const home = await tempDir('bsh-cli-home-');
    const ws = await tempDir('bsh-cli-ws-');
    await fs.writeFile(path.join(ws, 'kept.txt'), 'before\n');
    const result = await withClosedPipe(['run', '--workspace', ws, '--session', 'piped', '--', 'echo after > kept.txt; echo done'], home, 'stderr');
    expect(result).toEqual({ status: 0, other: 'done\n' });
    const { turns } = JSON.parse(cli(['backups', 'list', '--session', 'piped', '--json'], { home }).stdout) as { turns: Array<{ files: unknown[]; committedAt: string | null }> };
    expect(turns).toHaveLength(1);
    expect(turns[0]?.committedAt).not.toBeNull();
    expect(turns[0]?.files).toHaveLength(1);
  });
});
