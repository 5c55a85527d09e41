/**
 * Escape suite, broker socket: control and client commands from inside the sandbox. The
 * owner's commands (enable/disable backup, commit, shutdown) are refused on the socket;
 * commands that would loosen the policy, add roots, restore turns or read the store are
 * unknown there; smuggled control fields in a host operation change nothing; the
 * dispatcher's CommandPrebackup goes through the policy. Afterwards backups are still on,
 * the turn is committed once with the run's message, no root was added, and the store
 * holds what it held. Each attempt is in the audit trail as a denial.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TurnManifest } from '../../src/backup/index.js';
import { blobOf, describeRun, entryFor, makeWorld, removeWorld, run, turnsOf, writeOld, type World } from '../e2e/run-helpers.js';
import { attack, deniedCommand, deniedPath, hostOp, isDenyRecord, summarise, type AttackRun, type Route } from './socket-helpers.js';

const SESSION = 'sec-control';

let world: World;
let storeFiles: string[];
let result: AttackRun;
let turns: TurnManifest[];

const out = (name: string) => path.join(world.outside, name);
const json = (value: Record<string, unknown>) => JSON.stringify(value);

/** A command the socket must refuse, audited under its name. */
const command = (name: string, line: string, audited = name): Route => ({ name, send: [line], targets: storeFiles, audited: deniedCommand(audited) });

function buildRoutes(): Route[] {
  const prebackup = (sessionId: string, target: string) => json({ command: 'CommandPrebackup', argv: ['dd', 'if=/dev/zero', `of=${target}`], cwd: world.ws, sessionId, toolCallId: '@CALL@' });
  return [
    command('EnableModifyBackup', json({ command: 'EnableModifyBackup', enabled: false })),
    command('ModifyBackup', json({ command: 'ModifyBackup', enabled: false })),
    command('CommitModifyBackup', json({ command: 'CommitModifyBackup', commitMsg: 'from inside' })),
    command('Shutdown', json({ command: 'Shutdown' })),
    command('RestoreTurn', json({ command: 'RestoreTurn', turn: 'latest', force: true })),
    command('AddWritableRoot', json({ command: 'AddWritableRoot', path: world.outside })),
    command('SetPolicy', json({ command: 'SetPolicy', outsideRoots: 'allow', rules: [] })),
    command('GrantPath', json({ command: 'GrantPath', path: out('granted'), access: 'write' })),
    command('Approve', json({ command: 'Approve', toolCallId: '@CALL@', approved: true })),
    command('ListTurns', json({ command: 'ListTurns', sessionId: SESSION })),
    command('ReadBlob', json({ command: 'ReadBlob', sha256: '0'.repeat(64) })),
    command('BeginTurn', json({ command: 'BeginTurn' })),
    command('lowercase-shutdown', json({ command: 'shutdown' }), 'shutdown'),
    command('padded-commit', json({ command: 'CommitModifyBackup ', commitMsg: 'x' }), 'CommitModifyBackup '),
    // JSON.parse keeps the last key: this one is a Shutdown.
    command('duplicate-key', '{"command":"HostFileOperation","command":"Shutdown"}', 'Shutdown'),
    {
      name: 'smuggled-fields',
      send: [hostOp({ operation: 'touch', path: out('smuggled'), sessionId: SESSION, enabled: false, commitMsg: 'x', writableRoots: [world.outside] })],
      targets: [out('smuggled'), ...storeFiles],
      audited: deniedPath(out('smuggled')),
    },
    {
      name: 'prebackup-outside',
      send: [prebackup(SESSION, out('dd-target'))],
      targets: [out('dd-target')],
      audited: (r) => deniedPath(out('dd-target'))(r) && r.error?.code === 'BSH_POLICY_DENIED',
    },
    {
      name: 'prebackup-foreign-session',
      send: [prebackup('another-session', path.join(world.ws, 'g'))],
      targets: [path.join(world.ws, 'g'), ...storeFiles],
      audited: (r) => deniedPath(path.join(world.ws, 'g'))(r) && r.error?.code === 'BSH_SESSION_MISMATCH',
    },
    {
      name: 'prebackup-malformed',
      send: [json({ command: 'CommandPrebackup', argv: [], cwd: 'relative', sessionId: SESSION })],
      targets: storeFiles,
      audited: (r) => deniedCommand('CommandPrebackup')(r) && r.error?.code === 'BSH_BAD_REQUEST',
    },
  ];
}

beforeAll(async () => {
  world = await makeWorld('sec-control');
  await writeOld(path.join(world.ws, 'f'), 'zero\n', 0o640);
  await writeOld(path.join(world.ws, 'g'), 'g stays\n', 0o640);
  // A first turn, so the store holds a manifest and a blob the command could go after.
  const first = await run(world, 'echo one > f', { session: SESSION });
  if (first.status !== 0) throw new Error(describeRun(first));
  storeFiles = [];
  for (const entry of await fs.readdir(world.home, { recursive: true, withFileTypes: true })) {
    if (entry.isFile()) storeFiles.push(path.join(entry.parentPath, entry.name));
  }
  const after = ['echo two > f; st write-after', 'echo x > "$OUT/after-control"; st outside-after'].join('\n');
  result = await attack(world, buildRoutes(), { session: SESSION, after, flags: ['--no', '--message', 'control attempts'] });
  turns = await turnsOf(world, SESSION);
}, 120_000);

afterAll(async () => {
  if (result) summarise('socket-control.test.ts', result.verdicts);
  await removeWorld(world);
});

describe('socket: control and client commands from inside the sandbox', () => {
  it('the run ends with the command status', () => {
    expect(result.run.status, describeRun(result.run)).toBe(0);
  });

  it('every route is refused, changes nothing and is audited as a denial', () => {
    const failures = [...result.verdicts].filter(([, v]) => !v.refused || !v.unchanged || !v.audited);
    expect(failures, JSON.stringify([...result.results.values()])).toEqual([]);
    expect(result.verdicts.size).toBe(buildRoutes().length);
  });

  it('owner commands are refused by name; the others are unknown on the socket', () => {
    const codeOf = (name: string) => (JSON.parse(result.results.get(name)?.answers[0] ?? '{}') as { errorCode?: string }).errorCode;
    for (const name of ['EnableModifyBackup', 'ModifyBackup', 'CommitModifyBackup', 'Shutdown', 'duplicate-key']) expect(codeOf(name), name).toBe('BSH_CONTROL_REFUSED');
    for (const name of ['RestoreTurn', 'AddWritableRoot', 'SetPolicy', 'GrantPath', 'Approve', 'ListTurns', 'ReadBlob', 'BeginTurn', 'lowercase-shutdown', 'padded-commit']) {
      expect(codeOf(name), name).toBe('BSH_UNKNOWN_COMMAND');
    }
  });

  it('control refusals are audited as socket refusals with the peer', () => {
    const records = result.audit.filter((r) => r.operation === 'control');
    expect(records.map((r) => r.command).sort()).toEqual(['CommitModifyBackup', 'EnableModifyBackup', 'ModifyBackup', 'Shutdown', 'Shutdown']);
    for (const record of records) {
      expect(isDenyRecord(record)).toBe(true);
      expect(record.peer?.pid).toBeGreaterThan(0);
    }
  });

  it('backups are still on: the write after the attempts is backed up in the run turn, committed once', async () => {
    expect(result.statuses.get('write-after')).toBe(0);
    expect(turns.map((t) => t.message)).toEqual(['echo one > f', 'control attempts']);
    const turn = turns[1];
    if (!turn) throw new Error('no second turn');
    expect(turn.committedAt).not.toBeNull();
    const entry = entryFor(turn, path.join(world.ws, 'f'));
    expect(entry, 'f was not backed up').toBeDefined();
    if (entry) expect((await blobOf(world, turn, entry)).toString('utf8')).toBe('one\n');
  });

  it('no root was added: a write outside afterwards is still refused', async () => {
    expect(result.statuses.get('outside-after')).not.toBe(0);
    await expect(fs.stat(out('after-control'))).rejects.toThrow();
    expect(result.audit.some(deniedPath(out('after-control')))).toBe(true);
  });
});
