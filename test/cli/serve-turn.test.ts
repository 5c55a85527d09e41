import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ask, askJson, startServe, type ServeHandle } from '../helpers/serve-process.js';
import { cli, cliJson, snapshot, writeOld } from './helpers.js';

/**
 * A turn produced the way an agent produces one: requests over the real socket of a
 * `serve` process, committed on its control pipe; then seen and undone with the CLI.
 */
let serve: ServeHandle;
let turnId: string;
const at = (name: string) => path.join(serve.workspace, name);
const before = new Map<string, Awaited<ReturnType<typeof snapshot>>>();

beforeAll(async () => {
  serve = await startServe({ session: 's1' });
  await writeOld(at('edit.txt'), 'version 1\nkept\n', 0o640, 1_100_000_000);
  await writeOld(at('mode.txt'), 'mode only\n', 0o644, 1_100_000_001);
  await writeOld(at('gone.txt'), 'to be deleted\n', 0o600, 1_100_000_002);
  for (const name of ['edit.txt', 'mode.txt', 'gone.txt']) before.set(name, await snapshot(at(name)));

  // The client writes edit.txt itself once the broker has backed it up and said SANDBOX.
  expect(await ask(serve.socket, `dev.brokered-shell.read-write\t${at('edit.txt')}\ts1\ttool-1`)).toBe('SANDBOX');
  await fs.writeFile(at('edit.txt'), 'version 2\nkept\n');
  expect(await askJson(serve.socket, { operation: 'chmod', path: at('mode.txt'), mode: 0o600 })).toMatchObject({ ok: true });
  expect(await askJson(serve.socket, { operation: 'delete', path: at('gone.txt') })).toMatchObject({ ok: true });
  const answer = await serve.control({ command: 'CommitModifyBackup', commitMsg: 'agent turn 1' });
  expect(answer).toMatchObject({ ok: true });
  turnId = String(answer.turnId);
});
afterAll(() => serve?.cleanup());

describe('a turn committed through serve, seen and undone with the CLI', () => {
  it('backups list --session shows it with its three files', () => {
    const { status, json } = cliJson<{ turns: Array<{ id: string; sessionId: string; message: string; committedAt: string; files: Array<{ path: string; operation: string; mode: number; size: number }> }> }>(
      ['backups', 'list', '--session', 's1', '--json'],
      { home: serve.home },
    );
    expect(status).toBe(0);
    const turn = json.turns.find((t) => t.id === turnId);
    expect(turn).toMatchObject({ sessionId: 's1', message: 'agent turn 1' });
    expect(typeof turn?.committedAt).toBe('string');
    const byPath = new Map(turn?.files.map((f) => [f.path, f]));
    expect(byPath.get(at('edit.txt'))).toMatchObject({ operation: 'open', mode: 0o640, size: 15 });
    expect(byPath.get(at('mode.txt'))).toMatchObject({ operation: 'chmod', mode: 0o644 });
    expect(byPath.get(at('gone.txt'))).toMatchObject({ operation: 'delete', mode: 0o600, size: 14 });
  });

  it('backups diff shows the edit and the deletion', () => {
    const result = cli(['backups', 'diff', turnId], { home: serve.home });
    expect(result.status).toBe(0);
    expect(result.stdout).toContain('-version 1\n+version 2\n');
    // A chmod keeps the file's metadata, not its bytes.
    expect(result.stdout).toContain(`${at('mode.txt')}: only its metadata was kept (the turn left its content as it was)\nold mode 0644\nnew mode 0600\n`);
    expect(result.stdout).toContain(`+++ /dev/null\n@@ -1,1 +0,0 @@\n-to be deleted\n`);
  });

  it('backups restore latest puts all three back exactly', async () => {
    const result = cli(['backups', 'restore', 'latest'], { home: serve.home });
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    for (const [name, was] of before) expect(await snapshot(at(name)), name).toEqual(was);
  });
});
