import { afterEach, describe, expect, it, vi } from 'vitest';
import { Broker } from '../../src/core/index.js';
import { AuditPlugin, auditRefusal, getAuditHooks, type AuditRecord } from '../../src/plugins/audit.js';
import { allowAll, capturingLogger, fixedPolicy, identityResolver, writeRequest } from '../helpers/bare-broker.js';

describe('AuditPlugin', () => {
  it('emits one record per request with decision, paths, tool call, trace id and duration', async () => {
    const { logger, lines } = capturingLogger();
    const broker = new Broker({ sessionId: 's1', logger }).use(identityResolver(), allowAll(), new AuditPlugin());
    const records: AuditRecord[] = [];
    getAuditHooks(broker).record.tap('sink', (record) => void records.push(record));
    await broker.handle(writeRequest('/w/a', { toolCallId: 't1', traceId: 'tr1', action: 'check' }));
    await broker.handle(writeRequest('/w/b', { action: 'check' }));
    expect(records).toHaveLength(2);
    expect(records[0]).toMatchObject({
      sessionId: 's1',
      operation: 'open',
      toolCallId: 't1',
      traceId: 'tr1',
      verdict: 'sandbox',
      decision: 'sandbox',
      ok: true,
      paths: [{ role: 'path', path: '/w/a', normalisedPath: '/w/a', access: 'write' }],
    });
    expect(records[0]?.durationMs).toBeGreaterThanOrEqual(0);
    const logged = lines().filter((line) => line.phase === 'audit');
    expect(logged).toHaveLength(2);
  });

  it('audits denials and malformed requests too', async () => {
    const broker = new Broker({ sessionId: 's1' }).use(identityResolver(), fixedPolicy(() => ({ verdict: 'deny', reason: 'no', source: 'rule:x' })), new AuditPlugin({ log: false }));
    const records: AuditRecord[] = [];
    getAuditHooks(broker).record.tap('sink', (record) => void records.push(record));
    await broker.handle(writeRequest('/w/a'));
    await broker.handle({ ...writeRequest('/w/a'), targets: [] });
    expect(records.map((r) => [r.verdict, r.ok, r.decidedBy, r.error?.code])).toEqual([
      ['deny', false, 'rule:x', 'BSH_POLICY_DENIED'],
      ['deny', false, 'core', 'BSH_BAD_REQUEST'],
    ]);
  });

  it('keeps delivering to every sink when one throws, and logs the failure', async () => {
    const { logger, lines } = capturingLogger();
    const broker = new Broker({ sessionId: 's1', logger }).use(identityResolver(), allowAll(), new AuditPlugin({ log: false }));
    const records: AuditRecord[] = [];
    getAuditHooks(broker).record.tap('broken-sink', () => {
      throw new Error('forwarder down');
    });
    getAuditHooks(broker).record.tap('sink', (record) => void records.push(record));
    const outcome = await broker.handle(writeRequest('/w/a', { action: 'check' }));
    auditRefusal(broker, { origin: 'kernel', decidedBy: 'sandbox:supervisor', reason: 'refused' });
    expect(outcome.ok).toBe(true);
    expect(records.map((r) => r.operation)).toEqual(['open', 'syscall']);
    const failures = lines().filter((line) => line.msg === 'audit sink broken-sink failed');
    expect(failures).toHaveLength(2);
  });

  it('times every tap through interceptors when asked', async () => {
    const broker = new Broker({ sessionId: 's1' }).use(new AuditPlugin({ traceTaps: true, log: false }), identityResolver(), allowAll());
    const records: AuditRecord[] = [];
    getAuditHooks(broker).record.tap('sink', (record) => void records.push(record));
    await broker.handle(writeRequest('/w/a', { action: 'check' }));
    expect(records[0]?.taps?.map((t) => `${t.hook}:${t.plugin}`)).toEqual(['resolvePath:test-identity-resolver', 'evaluatePolicy:test-fixed-policy']);
  });
  it('records a socket refusal that never became a request: its operation, command, code and peer', () => {
    const { logger, lines } = capturingLogger();
    const broker = new Broker({ sessionId: 's1', logger }).use(new AuditPlugin());
    const records: AuditRecord[] = [];
    getAuditHooks(broker).record.tap('sink', (record) => void records.push(record));
    const peer = { pid: 7, uid: 0, gid: 0 };
    auditRefusal(broker, { origin: 'host-op', decidedBy: 'ipc', operation: 'control', command: 'Shutdown', errorCode: 'BSH_CONTROL_REFUSED', reason: 'refused', peer });
    expect(records).toEqual([
      expect.objectContaining({
        requestId: 's1',
        sessionId: 's1',
        origin: 'host-op',
        operation: 'control',
        command: 'Shutdown',
        verdict: 'deny',
        decision: 'deny',
        ok: false,
        peer,
        error: { code: 'BSH_CONTROL_REFUSED', message: 'refused' },
      }),
    ]);
    expect(records[0]?.syscall).toBeUndefined();
    expect(lines().filter((line) => line.phase === 'audit').map((line) => line.msg)).toEqual(['Shutdown deny']);
  });

  describe('a flood of refusals', () => {
    afterEach(() => vi.useRealTimers());
    const socketRefusal = (pid: number) => ({ origin: 'host-op', decidedBy: 'ipc', operation: 'control', command: 'Shutdown', errorCode: 'BSH_CONTROL_REFUSED', reason: 'refused', peer: { pid, uid: 0, gid: 0 } });

    it('records the burst one by one, counts the rest, and says how many in one record; the kernel has its own budget', async () => {
      const broker = new Broker({ sessionId: 's1' }).use(new AuditPlugin({ log: false, refusals: { burst: 3, perSecond: 0 } }));
      const records: AuditRecord[] = [];
      getAuditHooks(broker).record.tap('sink', (record) => void records.push(record));
      const kept = [7, 7, 8, 8, 9].map((pid) => auditRefusal(broker, socketRefusal(pid)));
      expect(kept.map((record) => record !== undefined)).toEqual([true, true, true, false, false]);
      auditRefusal(broker, { origin: 'kernel', decidedBy: 'sandbox:supervisor', reason: 'io_uring_setup refused', syscall: { name: 'io_uring_setup', nr: 425, pid: 5, tid: 5 } });
      expect(records.map((r) => r.operation)).toEqual(['control', 'control', 'control', 'syscall']);
      await broker.close();
      expect(records).toHaveLength(5);
      expect(records[4]).toMatchObject({ origin: 'host-op', operation: 'suppressed', verdict: 'deny', decidedBy: 'ipc', suppressed: { count: 2, operations: { control: 2 }, peers: [8, 9] } });
    });

    it('says how many within summaryMs, without waiting for the close', () => {
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
      const broker = new Broker({ sessionId: 's1' }).use(new AuditPlugin({ log: false, refusals: { burst: 1, perSecond: 0, summaryMs: 5000 } }));
      const records: AuditRecord[] = [];
      getAuditHooks(broker).record.tap('sink', (record) => void records.push(record));
      for (let i = 0; i < 10; i++) auditRefusal(broker, socketRefusal(7));
      expect(records).toHaveLength(1);
      vi.advanceTimersByTime(5000);
      expect(records.map((r) => [r.operation, r.suppressed?.count])).toEqual([['control', undefined], ['suppressed', 9]]);
      // Counting starts again: the next refusal over the budget is in the next summary.
      auditRefusal(broker, socketRefusal(7));
      vi.advanceTimersByTime(5000);
      expect(records.map((r) => r.suppressed?.count)).toEqual([undefined, 9, 1]);
    });

    it('records one by one again as the budget refills', () => {
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
      const broker = new Broker({ sessionId: 's1' }).use(new AuditPlugin({ log: false, refusals: { burst: 2, perSecond: 1 } }));
      const kept = () => auditRefusal(broker, socketRefusal(7)) !== undefined;
      expect([kept(), kept(), kept()]).toEqual([true, true, false]);
      vi.advanceTimersByTime(1000);
      expect([kept(), kept()]).toEqual([true, false]);
    });
  });
});
