/**
 * fd grants end to end: a policy rule `grant-token` for writes below a directory outside
 * the writable roots lets a command of the preload runtime write there, although
 * Landlock keeps that directory read-only to it — the broker opens the file (after
 * backing it up) and passes the descriptor with the `FD` answer; the library uses it.
 * Without the rule the same write is denied and nothing changes.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TurnManifest } from '../../src/backup/index.js';
import { PRELOAD_MARK, SHOW_RUNTIME, runPreload } from './preload-helpers.js';
import { ST, blobOf, caseStatuses, deniedLines, describeRun, entryFor, makeWorld, onlyTurn, removeWorld, restoreTurn, turnsOf, writeOld, type CliRun, type World } from './run-helpers.js';

const OLD = 'old outside bytes\n';
const KEEP = 'kept as it was\n';

let world: World;
const out = (name: string) => path.join(world.outside, name);
const read = (file: string) => fs.readFile(file, 'utf8');

beforeAll(async () => {
  world = await makeWorld('preload-fd-grant');
});
afterAll(() => removeWorld(world));

describe('preload runtime: a grant-token rule outside the roots', () => {
  const SESSION = 'fd-grant-session';
  let result: CliRun;
  let statuses: Map<string, number>;
  let manifest: TurnManifest;

  beforeAll(async () => {
    await writeOld(out('f'), OLD, 0o640);
    await writeOld(out('log'), 'line 1\n', 0o644);
    await writeOld(out('py'), OLD, 0o600);
    await writeOld(out('sorted'), OLD, 0o644);
    await writeOld(out('mode'), OLD, 0o644);
    await writeOld(out('times'), OLD, 0o644, 1_000_000_000);
    const policy = path.join(world.tools, 'grant.json');
    await fs.writeFile(policy, JSON.stringify({ rules: [{ pattern: `${world.outside}/**`, decision: 'grant-token', access: ['write'] }] }));
    const script = [
      ST,
      SHOW_RUNTIME,
      'umask 022',
      'echo x > "$OUT/f"; st redirect',
      'echo "line 2" >> "$OUT/log"; st append',
      'echo new > "$OUT/new"; st create',
      `python3 -c "import os; open(os.environ['OUT'] + '/py', 'w').write('from python')"; st python`,
      // fopen(3) (sort -o) gets the fd as a FILE; chmod and utimes act on the fd the broker opened.
      `printf 'b\\na\\n' | sort -o "$OUT/sorted"; st fopen`,
      'chmod 600 "$OUT/mode"; st chmod',
      'touch -d 2001-02-03 "$OUT/times"; st touch',
      // Landlock is on: a write that does not go through the broker's fd is refused there.
      `busybox sh -c 'echo direct > "$OUT/f"' 2>/dev/null; st direct`,
    ].join('\n');
    result = await runPreload(world, script, { session: SESSION, policy });
    statuses = caseStatuses(result.out);
    manifest = await onlyTurn(world, SESSION);
  });

  it('ran in the preload runtime without a denial', () => {
    expect(result.status, describeRun(result)).toBe(0);
    expect(result.out.split('\n')[0]).toBe(PRELOAD_MARK);
    expect(deniedLines(result.stderr)).toEqual([]);
  });

  it('the write through the granted fd happens: truncated, appended, created, from python', async () => {
    for (const name of ['redirect', 'append', 'create', 'python', 'fopen']) expect(statuses.get(name), `${name}\n${describeRun(result)}`).toBe(0);
    expect(await read(out('f'))).toBe('x\n');
    expect(await read(out('log'))).toBe('line 1\nline 2\n');
    expect(await read(out('new'))).toBe('new\n');
    expect(await read(out('py'))).toBe('from python');
    expect(await read(out('sorted'))).toBe('a\nb\n');
  });

  it('metadata changes outside the roots go through the granted fd too', async () => {
    expect(statuses.get('chmod'), describeRun(result)).toBe(0);
    expect((await fs.stat(out('mode'))).mode & 0o7777).toBe(0o600);
    expect(statuses.get('touch'), describeRun(result)).toBe(0);
    expect((await fs.stat(out('times'))).mtimeMs).toBe(new Date(2001, 1, 3).getTime());
    expect(await read(out('times'))).toBe(OLD);
    expect(entryFor(manifest, out('mode'))).toMatchObject({ kind: 'file', mode: 0o644 });
    expect(entryFor(manifest, out('times'))).toMatchObject({ kind: 'file', mtimeNs: '1000000000000000000' });
  });

  it('keeps the modes: the existing file its own, the new one what the umask gives', async () => {
    expect((await fs.stat(out('f'))).mode & 0o7777).toBe(0o640);
    expect((await fs.stat(out('new'))).mode & 0o7777).toBe(0o644);
  });

  it('the fd came from the broker: the same write without it is refused by Landlock', () => {
    expect(statuses.get('direct')).not.toBe(0);
  });

  it('backed up the previous bytes and mode before handing out the fd', async () => {
    const entry = entryFor(manifest, out('f'));
    if (!entry) throw new Error(`${out('f')} is not in the manifest`);
    expect({ kind: entry.kind, mode: entry.mode, size: entry.size }).toEqual({ kind: 'file', mode: 0o640, size: OLD.length });
    expect((await blobOf(world, manifest, entry)).toString('utf8')).toBe(OLD);
    expect(entryFor(manifest, out('log'))).toMatchObject({ kind: 'file', size: 'line 1\n'.length });
    // A file the grant created had nothing before it.
    expect(entryFor(manifest, out('new'))).toBeUndefined();
  });

  it('backups restore brings the outside files back', async () => {
    const restored = await restoreTurn(world, manifest.id);
    expect(restored.status, describeRun(restored)).toBe(0);
    expect(await read(out('f'))).toBe(OLD);
    expect(await read(out('log'))).toBe('line 1\n');
    expect(await read(out('py'))).toBe(OLD);
    expect((await fs.stat(out('mode'))).mode & 0o7777).toBe(0o644);
    expect((await fs.stat(out('times'))).mtimeMs).toBe(1_000_000_000_000);
  });
});

describe('preload runtime: the same write without the rule', () => {
  const SESSION = 'no-grant-session';
  let result: CliRun;

  beforeAll(async () => {
    await writeOld(out('kept'), KEEP);
    result = await runPreload(world, [ST, 'echo x > "$OUT/kept"; st redirect', 'echo y > "$OUT/nothing"; st create'].join('\n'), { session: SESSION });
  });

  it('is denied: EACCES for the program, nothing changed, nothing created, the denial reported', async () => {
    const statuses = caseStatuses(result.out);
    expect(statuses.get('redirect'), describeRun(result)).toBe(1);
    expect(statuses.get('create')).toBe(1);
    expect(result.stderr).toContain(`${out('kept')}: Permission denied`);
    expect(await read(out('kept'))).toBe(KEEP);
    await expect(fs.lstat(out('nothing'))).rejects.toThrow();
    expect(deniedLines(result.stderr)).toEqual([`write ${out('kept')}`, `write ${out('nothing')}`]);
    expect((await turnsOf(world, SESSION)).flatMap((turn) => turn.files)).toEqual([]);
  });
});
