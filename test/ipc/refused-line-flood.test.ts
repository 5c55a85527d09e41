/**
 * A client that reads its answers but floods the socket with lines it knows are refused
 * (malformed, control commands) cannot grow the audit trail as fast as it sends: the
 * first refusals are recorded one by one, the rest counted in one record that names how
 * many there were and of which kinds. Every line is still answered. Real socket.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Broker } from '../../src/core/index.js';
import { BrokerServer } from '../../src/ipc/server.js';
import { AuditPlugin, getAuditHooks, type AuditRecord } from '../../src/plugins/audit.js';
import { allowAll, identityResolver } from '../helpers/bare-broker.js';
import { exchange } from '../helpers/serve-process.js';

const BURST = 20;
let dir: string;
let broker: Broker;
let server: BrokerServer;
const records: AuditRecord[] = [];

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'bsh-refused-flood-'));
  broker = new Broker({ sessionId: 's1' }).use(identityResolver(), allowAll(), new AuditPlugin({ log: false, refusals: { burst: BURST, perSecond: 0 } }));
  getAuditHooks(broker).record.tap('sink', (record) => void records.push(record));
  server = new BrokerServer({ broker, socketPath: path.join(dir, 'sock', 'broker.sock'), peerCredentials: () => ({ pid: 4444, uid: 0, gid: 0 }) });
  await server.listen();
});

afterAll(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('BrokerServer: a flood of refused lines', () => {
  it('answers every line, records the first ones, and counts the rest in one record', async () => {
    const lines = Array.from({ length: 600 }, (_, i) => (i % 2 === 0 ? '{"command":"Shutdown"}' : '{"command":'));
    // In batches the broker's line bound lets through at once.
    const answers: string[] = [];
    for (let i = 0; i < lines.length; i += 200) answers.push(...(await exchange(server.socketPath, `${lines.slice(i, i + 200).join('\n')}\n`, 200)));
    expect(answers).toHaveLength(600);
    expect(answers.every((answer) => (JSON.parse(answer) as { ok: boolean }).ok === false)).toBe(true);
    expect(records).toHaveLength(BURST);
    await broker.close();
    expect(records).toHaveLength(BURST + 1);
    expect(records[BURST]).toMatchObject({ operation: 'suppressed', decidedBy: 'ipc', suppressed: { count: 600 - BURST, operations: { control: 290, malformed: 290 }, peers: [4444] } });
  });
});
