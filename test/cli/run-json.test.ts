import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { cli, tempDir } from './helpers.js';

/** `run --json` in a fresh workspace; its stdout parsed (it must be one JSON object and nothing else). */
async function runJson(command: string, setUp: (ws: string, home: string) => Promise<void> = async () => undefined) {
  const home = await tempDir('bsh-run-json-home-');
  const ws = await tempDir('bsh-run-json-ws-');
  await setUp(ws, home);
  const result = cli(['run', '--json', '--workspace', ws, '--', command], { home, env: { XDG_DATA_HOME: path.join(home, 'xdg') } });
  const lines = result.stdout.split('\n').filter((line) => line !== '');
  expect(lines, result.stdout).toHaveLength(1);
  return { ...result, home, ws, json: JSON.parse(lines[0] ?? '') as Record<string, unknown> };
}

describe('run --json', () => {
  it('one object after the command: its status, the turn, the summary, the refusals with reasons, its output', async () => {
    const outside = await tempDir('bsh-run-json-out-');
    const { status, stderr, ws, home, json } = await runJson(`echo hi; echo changed > notes.txt; rm gone.txt; echo x > ${outside}/f; echo err >&2; exit 3`, async (ws) => {
      await fs.writeFile(path.join(ws, 'notes.txt'), 'original\n');
      await fs.writeFile(path.join(ws, 'gone.txt'), 'bye\n');
    });
    expect(status).toBe(3);
    expect(json).toMatchObject({ exitCode: 3, signal: null, stdout: 'hi\n', sandboxed: true, mode: 'sandboxed', prompts: [], unlistedRefusals: 0 });
    expect(json.stderr).toContain('err\n');
    const turnId = json.turnId as string;
    expect(turnId).toMatch(/^\S+$/);
    expect(json.summary).toEqual({
      committed: true,
      turnId,
      files: 2,
      exempted: {},
      unsaved: [],
      notices: [],
      text: `turn ${turnId} backed up 2 files (brokered-shell backups show ${turnId})`,
    });
    expect(json.refusals).toEqual([
      {
        kind: 'denied',
        access: 'write',
        path: path.join(outside, 'f'),
        operation: 'open',
        reason: `${path.join(outside, 'f')} is outside the writable roots; writableRoots, or cacheRoots.add for a tool's cache, in ${path.join(home, 'config.json')} would allow it`,
      },
    ]);
    // brokered-shell's own lines stay on stderr, as without --json.
    expect(stderr).toContain(`brokered-shell: denied write ${path.join(outside, 'f')}`);
    expect(stderr).toContain(`brokered-shell: turn ${turnId} backed up 2 files`);
    expect(await fs.readFile(path.join(ws, 'notes.txt'), 'utf8')).toBe('changed\n');
    const list = cli(['backups', 'list', '--json'], { home });
    expect((JSON.parse(list.stdout) as { turns: Array<{ id: string }> }).turns.map((t) => t.id)).toEqual([turnId]);
  });

  it('a change nobody could approve: refused with its reason, and run exits 77', async () => {
    const { status, json, ws } = await runJson('echo x > ask.txt', async (_ws, home) => {
      await fs.writeFile(path.join(home, 'config.json'), JSON.stringify({ fileSafety: { rules: [{ pattern: 'ask.txt', decision: 'prompt', reason: 'asks first' }] } }));
    });
    expect(status).toBe(77);
    expect(json.exitCode).toBe(1);
    expect(json.refusals).toEqual([{ kind: 'needs-approval', access: 'write', path: path.join(ws, 'ask.txt'), operation: 'open', reason: 'asks first' }]);
    expect(json.prompts).toEqual([expect.objectContaining({ path: path.join(ws, 'ask.txt'), approved: false, refusal: 'nobody could be asked' })]);
  });

  it('with --yes the prompt is in the report, approved', async () => {
    const home = await tempDir('bsh-run-json-home-');
    const ws = await tempDir('bsh-run-json-ws-');
    await fs.writeFile(path.join(home, 'config.json'), JSON.stringify({ fileSafety: { rules: [{ pattern: 'ask.txt', decision: 'prompt', reason: 'asks first' }] } }));
    const result = cli(['run', '--json', '--yes', '--workspace', ws, '--', 'echo x > ask.txt'], { home });
    const json = JSON.parse(result.stdout) as Record<string, unknown>;
    expect(result.status).toBe(0);
    expect(json).toMatchObject({ exitCode: 0, refusals: [] });
    expect(json.prompts).toEqual([{ access: 'write', path: path.join(ws, 'ask.txt'), operation: 'open', reason: 'asks first', approved: true, scope: 'session' }]);
  });

  it('nothing could start: the object says why, status 126', async () => {
    const { status, json } = await runJson('true', async (_ws, home) => {
      await fs.writeFile(path.join(home, 'config.json'), '{ not json');
    });
    expect(status).toBe(126);
    expect(json).toMatchObject({ exitCode: 126, signal: null, turnId: null, summary: null, refusals: [], mode: 'not-started' });
    expect(json.error).toMatch(/^the configuration is invalid: /);
  });
});
