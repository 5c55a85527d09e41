import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { HOME_ENV } from '../../src/backup/layout.js';
import { brokerAnsweredRequests } from '../../src/cli/main.js';
import { runCommand } from '../../src/cli/run.js';
import { silentLogger } from '../../src/core/index.js';
import { tempDir } from './helpers.js';

// What the launcher asks after `main` to decide whether `run` earns a deeper code cache.
describe('code cache hint: whether the broker answered a request', () => {
  it('stays no for a command that changes nothing, and turns yes once a run writes a file', async () => {
    const workspace = await tempDir('bs-code-cache-ws-');
    const env = { ...process.env, [HOME_ENV]: await tempDir('bs-code-cache-home-') };
    const lines: string[] = [];
    const io = { out: (text: string) => void lines.push(text), err: (text: string) => void lines.push(text) };

    expect(await runCommand(io, 'true', { workspace, no: true }, silentLogger(), env)).toBe(0);
    expect(brokerAnsweredRequests()).toBe(false);

    expect(await runCommand(io, 'echo cached > made.txt', { workspace, no: true }, silentLogger(), env), lines.join('\n')).toBe(0);
    expect(await readFile(path.join(workspace, 'made.txt'), 'utf8')).toBe('cached\n');
    expect(brokerAnsweredRequests()).toBe(true);
  });
});
