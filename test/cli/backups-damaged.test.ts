/**
 * A turn whose manifest cannot be read is still a turn that changed files. Listing and
 * stats say so (and exit 1); choosing a turn by `latest`, by a prefix, or what a rewind
 * undoes refuses and names it, instead of quietly picking or skipping another turn.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { cli, cliJson, makeTurn, tempDir, writeOld } from './helpers.js';

const T1 = '20260101-000001-aaaaaa';
const T2 = '20260101-000002-bbbbbb';
const T3 = '20260101-000003-cccccc';

let home: string;
let work: string;
let files: Record<string, string>;

const manifestOf = (turnId: string) => path.join(home, 'workspace', 'sessions', 's', 'modify_backup', 'turns', `${turnId}.json`);
const read = (name: string) => fs.readFile(files[name] as string, 'utf8');

/** Three turns, each changing its own file; then one turn's manifest is cut short. */
async function damage(turnId: string): Promise<void> {
  await fs.truncate(manifestOf(turnId), 40);
}

beforeEach(async () => {
  home = await tempDir('bsh-cli-damaged-home-');
  work = await tempDir('bsh-cli-damaged-work-');
  files = {};
  for (const [i, turnId] of [T1, T2, T3].entries()) {
    const name = `f${i + 1}`;
    files[name] = await writeOld(path.join(work, name), `${name} before\n`);
    await makeTurn({
      home,
      sessionId: 's',
      turnId,
      message: `change ${name}`,
      at: `2026-01-01T00:00:0${i + 1}.000Z`,
      backups: [{ path: files[name], operation: 'open' }],
      change: () => fs.writeFile(files[name] as string, `${name} after\n`),
    });
  }
});

describe('a damaged turn', () => {
  it('is named by list, which still lists the others and exits 1', async () => {
    await damage(T2);
    const listed = cli(['backups', 'list'], { home });
    expect(listed.status).toBe(1);
    expect(listed.stderr).toContain(`brokered-shell: turn ${T2} of session s cannot be read, left out: `);
    expect(listed.stdout).toContain(T1);
    expect(listed.stdout).toContain(T3);
    const json = cliJson<{ turns: Array<{ id: string }>; damaged: Array<{ sessionId: string; name: string }> }>(['backups', 'list', '--json'], { home });
    expect(json.status).toBe(1);
    expect(json.json.turns.map((t) => t.id)).toEqual([T1, T3]);
    expect(json.json.damaged).toEqual([expect.objectContaining({ sessionId: 's', name: T2 })]);
  });

  it('is named by stats, which counts the others and exits 1', async () => {
    await damage(T2);
    const stats = cli(['backups', 'stats'], { home });
    expect(stats.status).toBe(1);
    expect(stats.stderr).toContain(`brokered-shell: turn ${T2} of session s cannot be read, left out: `);
    expect(stats.stdout).toContain('turns that cannot be read are not counted');
    const json = cliJson<{ total: { turns: number }; damaged: Array<{ sessionId: string; name: string }> }>(['backups', 'stats', '--json'], { home });
    expect(json.status).toBe(1);
    expect(json.json.total.turns).toBe(2);
    expect(json.json.damaged).toEqual([expect.objectContaining({ sessionId: 's', name: T2 })]);
  });

  it('stops a rewind past it, which changes nothing', async () => {
    await damage(T2);
    const rewind = cli(['backups', 'restore', '--to', T1, '--session', 's'], { home, cwd: work });
    expect(rewind.status).toBe(1);
    expect(rewind.stderr).toContain(`cannot tell what rewinding to ${T1} undoes: a turn cannot be read`);
    expect(rewind.stderr).toContain(T2);
    for (const name of ['f1', 'f2', 'f3']) expect(await read(name)).toBe(`${name} after\n`);
  });

  it('when it is the newest, latest is refused instead of undoing the turn before it', async () => {
    await damage(T3);
    const restore = cli(['backups', 'restore', 'latest'], { home, cwd: work });
    expect(restore.status).toBe(1);
    expect(restore.stderr).toContain('cannot tell which turn is the latest');
    expect(await read('f2')).toBe('f2 after\n');
  });

  it('a prefix naming it says it cannot be read, not that no turn matches', async () => {
    await damage(T2);
    const shown = cli(['backups', 'show', T2.slice(0, 18)], { home });
    expect(shown.status).toBe(1);
    expect(shown.stderr).toContain(`cannot tell which turn "${T2.slice(0, 18)}" names: a turn cannot be read`);
  });

  it('leaves the other turns reachable by their full id', async () => {
    await damage(T2);
    const restore = cli(['backups', 'restore', T3], { home, cwd: work });
    expect(restore.status, restore.stderr).toBe(0);
    expect(await read('f3')).toBe('f3 before\n');
    expect(await read('f2')).toBe('f2 after\n');
  });

  it('a rewind to a turn after it is not stopped by it', async () => {
    await damage(T1);
    const rewind = cli(['backups', 'restore', '--to', T3, '--session', 's'], { home, cwd: work });
    expect(rewind.status, rewind.stderr).toBe(0);
    expect(await read('f3')).toBe('f3 before\n');
  });
});
