/**
 * HeldWritesPlugin on a bare broker with the real backup plugin and real processes that
 * hold files: what a process of the session can still write when a turn commits, and the
 * broker let it open for writing, is in the next turn's backups as it was at the commit;
 * nothing else is, and no turn opens when nothing is held or after `stop`.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SessionBackupStore } from '../../src/backup/index.js';
import { Broker } from '../../src/core/index.js';
import { HeldWritesPlugin, heldWritableFiles } from '../../src/plugins/held-writes/index.js';
import { ModifyBackupPlugin } from '../../src/plugins/modify-backup/index.js';
import { allowAll, identityResolver, writeRequest } from '../helpers/bare-broker.js';

const base = mkdtempSync(path.join(os.tmpdir(), 'bsh-held-'));
afterAll(() => rmSync(base, { recursive: true, force: true }));

/** Holds `file` as `how` says until killed: an fd for writing or reading, or a shared writable mapping of a closed file. */
const HOLDER_PY = `
import mmap, os, sys
how, file = sys.argv[1], sys.argv[2]
if how == 'write':
    held = open(file, 'a')
elif how == 'read':
    held = open(file, 'r')
else:
    fd = os.open(file, os.O_RDWR)
    held = mmap.mmap(fd, os.fstat(fd).st_size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    os.close(fd)
print('ready', flush=True)
sys.stdin.readline()
`;

const holders: ChildProcessWithoutNullStreams[] = [];
afterEach(() => {
  for (const holder of holders.splice(0)) holder.kill('SIGKILL');
});

async function hold(how: 'write' | 'read' | 'map', file: string, session = 's1'): Promise<ChildProcessWithoutNullStreams> {
  const child = spawn('python3', ['-c', HOLDER_PY, how, file], { env: { ...process.env, BROKERED_SHELL_SESSION_ID: session, BROKERED_SHELL_TOOL_CALL_ID: 'call-7' } });
  holders.push(child);
  await new Promise<void>((resolve, reject) => {
    createInterface({ input: child.stdout }).once('line', () => resolve());
    child.once('exit', (code) => reject(new Error(`holder exited ${String(code)}`)));
  });
  return child;
}

let home: string;
let ws: string;
let broker: Broker;
let heldWrites: HeldWritesPlugin;

beforeEach(() => {
  home = mkdtempSync(path.join(base, 'home-'));
  ws = mkdtempSync(path.join(base, 'ws-'));
  heldWrites = new HeldWritesPlugin();
  broker = new Broker({ sessionId: 's1' }).use(identityResolver(), allowAll(), new ModifyBackupPlugin({ home }), heldWrites);
});

/** What the turn backed up of `file`, or undefined. */
async function backedUp(turnId: string, file: string): Promise<string | undefined> {
  const store = await SessionBackupStore.open({ home, sessionId: 's1' });
  const turn = await store.readTurn(turnId);
  const entry = turn.files.find((f) => f.path === file);
  return entry?.sha256 ? (await store.readBlob(entry.sha256)).toString() : undefined;
}

/** A file in the workspace, opened for writing through the broker in turn 1 (unless told otherwise). */
async function fileOfTurn1(name: string, content: string, asked = true): Promise<string> {
  const file = path.join(ws, name);
  writeFileSync(file, content);
  if (asked) expect((await broker.handle(writeRequest(file, { action: 'check' }))).ok).toBe(true);
  return file;
}

describe('HeldWritesPlugin', () => {
  it.each([
    ['held open for writing', 'write'],
    ['mapped shared and writable after its descriptor was closed', 'map'],
  ] as const)('a file %s is in the next turn, as it was at the commit; undoing that turn brings it back', async (_label, how) => {
    const file = await fileOfTurn1(`${how}.txt`, 'turn 1 left this\n');
    await hold(how, file);
    const turn1 = await broker.commitTurn('turn 1');
    // The next turn is open, with the file in it, by the time the commit returns.
    const turn2 = broker.currentTurn;
    expect(turn2).toBeDefined();
    writeFileSync(file, 'turn 2 wrote this\n');
    await broker.commitTurn('turn 2');
    expect(await backedUp(turn1.id, file)).toBe('turn 1 left this\n');
    expect(await backedUp(turn2?.id ?? '', file)).toBe('turn 1 left this\n');
    const store = await SessionBackupStore.open({ home, sessionId: 's1' });
    const report = await store.restore(turn2?.id ?? '');
    expect(report.conflicts).toEqual([]);
    expect(readFileSync(file, 'utf8')).toBe('turn 1 left this\n');
  });

  it.each([
    ['held for reading only', 'read', 's1', true],
    ['held by a process of another session', 'write', 'other-session', true],
    ['held, but never opened for writing through the broker', 'write', 's1', false],
  ] as const)('a file %s is not carried, and no turn opens', async (_label, how, session, asked) => {
    const file = await fileOfTurn1(`${how}-${session}-${String(asked)}.txt`, 'x\n', asked);
    await hold(how, file, session);
    await broker.commitTurn('turn 1');
    expect(broker.currentTurn).toBeUndefined();
  });

  it('follows a held file renamed through the broker', async () => {
    const file = await fileOfTurn1('old-name.txt', 'kept\n');
    await hold('write', file);
    const moved = path.join(ws, 'new-name.txt');
    const rename = await broker.handle({ origin: 'kernel', action: 'check', operation: 'rename', sessionId: 's1', targets: [{ role: 'from', path: file, access: 'delete' }, { role: 'to', path: moved, access: 'write' }] });
    expect(rename.ok).toBe(true);
    renameSync(file, moved);
    await broker.commitTurn('turn 1');
    const turn2 = broker.currentTurn?.id ?? '';
    await broker.commitTurn('turn 2');
    expect(await backedUp(turn2, moved)).toBe('kept\n');
  });

  it('opens no turn after the commit that follows stop', async () => {
    const file = await fileOfTurn1('last.txt', 'x\n');
    await hold('write', file);
    heldWrites.stop();
    await broker.commitTurn('the last one');
    expect(broker.currentTurn).toBeUndefined();
  });
});

describe('heldWritableFiles', () => {
  it('names each file a process of the session can write, with the process and its tool call', async () => {
    const written = await fileOfTurn1('w.txt', 'w\n', false);
    const mapped = await fileOfTurn1('m.txt', 'm\n', false);
    const read = await fileOfTurn1('r.txt', 'r\n', false);
    const writer = await hold('write', written);
    const mapper = await hold('map', mapped);
    await hold('read', read);
    const found = heldWritableFiles('s1').filter((file) => file.path.startsWith(ws));
    expect(found.sort((a, b) => a.path.localeCompare(b.path))).toEqual([
      { path: mapped, pid: mapper.pid, uid: process.getuid?.(), gid: process.getgid?.(), toolCallId: 'call-7' },
      { path: written, pid: writer.pid, uid: process.getuid?.(), gid: process.getgid?.(), toolCallId: 'call-7' },
    ]);
  });
});
