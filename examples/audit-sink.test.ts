import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { Broker, openTargets, operationTargets, standardPlugins, type AuditRecord } from 'brokered-shell';
import { AuditSinkPlugin } from './audit-sink/index.js';

let base: string;
let ws: string;
let store: string;
beforeEach(() => {
  base = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'bsh-example-audit-')));
  ws = path.join(base, 'ws');
  store = path.join(base, 'store');
  mkdirSync(ws);
});
afterEach(() => rmSync(base, { recursive: true, force: true }));

function broker(sink: AuditSinkPlugin) {
  return new Broker({ sessionId: 's1' })
    .use(...standardPlugins({ home: store, writableRoots: [ws], audit: { log: false }, trashEnv: { XDG_DATA_HOME: base, HOME: base } }))
    .use(sink);
}
const lines = (file: string) => readFileSync(file, 'utf8').split('\n').filter((line) => line !== '').map((line) => JSON.parse(line) as AuditRecord);

it('writes one JSON line per request, with its decision and paths', async () => {
  const file = path.join(store, 'audit', 's1.jsonl');
  const b = broker(new AuditSinkPlugin({ file }));
  writeFileSync(path.join(ws, 'notes.txt'), 'v1');
  const outcomes = [
    await b.handle({ origin: 'text-token', action: 'token', operation: 'open', targets: openTargets(path.join(ws, 'notes.txt'), true), sessionId: 's1', toolCallId: 'call-1' }),
    await b.handle({ origin: 'host-op', action: 'host-op', operation: 'rename', targets: operationTargets('rename', { from: path.join(ws, 'notes.txt'), to: path.join(ws, 'notes.md') }), sessionId: 's1' }),
    await b.handle({ origin: 'kernel', action: 'check', operation: 'open', targets: openTargets(path.join(base, 'outside.txt'), true), sessionId: 's1' }),
  ];
  expect(outcomes.map((o) => o.ok)).toEqual([true, true, false]);
  expect(readFileSync(path.join(ws, 'notes.md'), 'utf8')).toBe('v1');
  await b.close();

  const records = lines(file);
  expect(records).toHaveLength(3);
  expect(records.map((r) => r.requestId)).toEqual(outcomes.map((o) => o.requestId));
  expect(records[0]).toMatchObject({
    sessionId: 's1',
    origin: 'text-token',
    operation: 'open',
    toolCallId: 'call-1',
    verdict: 'sandbox',
    decision: 'sandbox',
    ok: true,
    paths: [{ role: 'path', path: path.join(ws, 'notes.txt'), normalisedPath: path.join(ws, 'notes.txt'), access: 'write' }],
  });
  expect(records[1]).toMatchObject({
    operation: 'rename',
    decision: 'host-op',
    ok: true,
    paths: [
      { role: 'from', path: path.join(ws, 'notes.txt'), access: 'delete' },
      { role: 'to', path: path.join(ws, 'notes.md'), access: 'write' },
    ],
  });
  expect(records[2]).toMatchObject({ origin: 'kernel', verdict: 'deny', decision: 'deny', ok: false, decidedBy: 'file-safety:roots', paths: [{ path: path.join(base, 'outside.txt') }] });
  expect(statSync(file).mode & 0o777).toBe(0o600);
});

it('appends to an existing file and keeps only what the filter lets through', async () => {
  const file = path.join(base, 'audit.jsonl');
  writeFileSync(file, `${JSON.stringify({ earlier: true })}\n`);
  const b = broker(new AuditSinkPlugin({ file, filter: (record) => !record.ok }));
  await b.handle({ origin: 'api', action: 'token', operation: 'open', targets: openTargets(path.join(ws, 'a.txt'), true), sessionId: 's1' });
  await b.handle({ origin: 'api', action: 'token', operation: 'open', targets: openTargets('/etc/passwd', true), sessionId: 's1' });
  await b.close();
  const all = readFileSync(file, 'utf8').trimEnd().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
  expect(all).toEqual([{ earlier: true }, expect.objectContaining({ ok: false, paths: [expect.objectContaining({ path: '/etc/passwd' })] })]);
});

it('refuses a relative file, naming the key', () => {
  expect(() => new AuditSinkPlugin({ file: 'audit.jsonl' })).toThrow(/file: must be an absolute path/);
});
