/**
 * The socket's own refusals reach the audit trail: a line refused before it became a
 * request (control command, unknown command, malformed or non-UTF-8 line, oversized
 * line, a flood of unanswered lines) and a client command that failed each make one
 * deny record, with the peer, through `getAuditHooks(broker).record`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Broker } from '../../src/core/index.js';
import { BrokerServer } from '../../src/ipc/server.js';
import { AuditPlugin, getAuditHooks, type AuditRecord } from '../../src/plugins/audit.js';
import { allowAll, identityResolver } from '../helpers/bare-broker.js';
import { exchange } from '../helpers/serve-process.js';

const PEER = { pid: 4242, uid: 0, gid: 0 };

let dir: string;
let socket: string;
let server: BrokerServer;
const records: AuditRecord[] = [];

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'bsh-socket-audit-'));
  socket = path.join(dir, 'sock', 'broker.sock');
  const broker = new Broker({ sessionId: 's1' }).use(identityResolver(), allowAll(), new AuditPlugin({ log: false }));
  // A client command that always fails, as a plugin's refusal would.
  broker.hooks.clientCommand.for('AlwaysNo').tap('test', () => ({ ok: false, error: 'no', errorCode: 'BSH_POLICY_DENIED' }));
  getAuditHooks(broker).record.tap('sink', (record) => void records.push(record));
  server = new BrokerServer({ broker, socketPath: socket, maxLineBytes: 1024, maxQueuedLines: 4, partialLineTimeoutMs: 300, peerCredentials: () => PEER });
  await server.listen();
});

afterAll(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Sends `payload` on a fresh connection and returns the records it added. */
async function recordsFor(payload: string | Buffer, answers = 1): Promise<AuditRecord[]> {
  const before = records.length;
  await exchange(socket, payload, answers, 3000).catch(() => []);
  return records.slice(before);
}

describe('BrokerServer: refusals before the pipeline are audited', () => {
  it.each([
    ['EnableModifyBackup', '{"command":"EnableModifyBackup","enabled":false}\n', 'control', 'BSH_CONTROL_REFUSED', 'EnableModifyBackup'],
    ['CommitModifyBackup', '{"command":"CommitModifyBackup","commitMsg":"x"}\n', 'control', 'BSH_CONTROL_REFUSED', 'CommitModifyBackup'],
    ['Shutdown', '{"command":"Shutdown"}\n', 'control', 'BSH_CONTROL_REFUSED', 'Shutdown'],
    ['an unknown command', '{"command":"RestoreTurn","turn":"latest"}\n', 'client-command', 'BSH_UNKNOWN_COMMAND', 'RestoreTurn'],
    ['a failing client command', '{"command":"AlwaysNo"}\n', 'client-command', 'BSH_POLICY_DENIED', 'AlwaysNo'],
    ['a host operation without a session', '{"command":"HostFileOperation","operation":"delete","path":"/w/a"}\n', 'malformed', 'BSH_BAD_REQUEST', 'HostFileOperation'],
    ['malformed JSON', '{"command":\n', 'malformed', 'BSH_BAD_REQUEST', undefined],
    ['a JSON array', '[1,2]\n', 'malformed', 'BSH_BAD_REQUEST', undefined],
    ['a text line with three fields', 'x.read-write\t/w/a\ts1\n', 'malformed', 'BSH_BAD_REQUEST', undefined],
  ])('%s → one deny record', async (_label, line, operation, code, command) => {
    const added = await recordsFor(line);
    expect(added).toHaveLength(1);
    expect(added[0]).toMatchObject({ sessionId: 's1', operation, verdict: 'deny', decision: 'deny', ok: false, decidedBy: 'ipc', peer: PEER, error: { code } });
    expect(added[0]?.command).toBe(command);
    expect(added[0]?.requestId).toMatch(/^s\d+$/);
  });

  it('invalid UTF-8 in a text line → one deny record', async () => {
    const bytes = Buffer.concat([Buffer.from('x.read-write\t/w/'), Buffer.from([0xff, 0xfe]), Buffer.from('\ts1\tt\n')]);
    const added = await recordsFor(bytes);
    expect(added.map((r) => [r.origin, r.operation, r.verdict])).toEqual([['text-token', 'malformed', 'deny']]);
  });

  it('an oversized line → one deny record, and the connection is closed', async () => {
    const added = await recordsFor(`${'a'.repeat(5000)}\n`, 2);
    expect(added.map((r) => [r.operation, r.error?.code])).toEqual([['malformed', 'BSH_LINE_TOO_LONG']]);
  });

  it('too many unanswered lines → one flood record (and no record per line it never answered)', async () => {
    const added = await recordsFor('{"command":"Shutdown"}\n'.repeat(50), 60);
    const floods = added.filter((r) => r.operation === 'flood');
    expect(floods).toHaveLength(1);
    expect(added.length).toBeLessThanOrEqual(5);
  });

  it('a request the pipeline answers is audited once, by the audit plugin, not twice', async () => {
    const added = await recordsFor('x.read-write\t/w/a\ts1\tt\n');
    expect(added.map((r) => [r.origin, r.operation, r.verdict])).toEqual([['text-token', 'open', 'sandbox']]);
  });

  it.each([
    ['keeps sending after an oversized line', Buffer.alloc(4 << 20, 0x61), 'BSH_LINE_TOO_LONG'],
    ['leaves a half-written line', Buffer.from('{"command":"Shut'), 'BSH_BAD_REQUEST'],
  ])('a client that %s and never closes is answered, audited and disconnected', async (_label, payload, code) => {
    const before = records.length;
    // allowHalfOpen: the client does not close when the broker half-closes; only a real close ends this.
    const client = net.createConnection({ path: socket, allowHalfOpen: true });
    let received = '';
    client.on('data', (chunk) => void (received += String(chunk)));
    client.on('error', () => undefined);
    client.write(payload);
    // Keep writing after the broker's answer: only a broker that really closed makes this fail (EPIPE) and close.
    const poke = setInterval(() => client.write('a'), 100);
    await new Promise<void>((resolve) => client.once('close', () => resolve()));
    clearInterval(poke);
    expect(JSON.parse(received.split('\n')[0] ?? '{}')).toMatchObject({ ok: false, errorCode: code });
    expect(records.slice(before).map((r) => r.error?.code)).toEqual([code]);
  }, 20_000);
});
