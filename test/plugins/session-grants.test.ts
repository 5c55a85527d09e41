import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Broker, ErrorCodes, PolicyStage, type BrokerPlugin, type PathKind } from '../../src/core/index.js';
import { ApprovalPlugin } from '../../src/plugins/approval/index.js';
import { SessionGrantsPlugin } from '../../src/plugins/session-grants.js';
import { fixedPolicy, identityResolver, writeRequest } from '../helpers/bare-broker.js';

/** *.pem needs approval (rules stage); /w/locked is refused before grants (protected stage); the rest is allowed. */
const policy = (): BrokerPlugin[] => [
  fixedPolicy((p) => (p.endsWith('.pem') ? { verdict: 'prompt', reason: 'keys need approval', source: 'rules' } : { verdict: 'sandbox', source: 'rules' }), PolicyStage.RULES),
  {
    name: 'protected',
    apply(broker) {
      broker.hooks.evaluatePolicy.tap({ name: 'protected', stage: PolicyStage.PROTECTED }, (target) =>
        target.resolved.startsWith('/w/locked') ? { verdict: 'deny', reason: 'never', source: 'protected' } : undefined,
      );
    },
  },
];

function setup(kind: PathKind = 'file', sessionId = 's1') {
  const grants = new SessionGrantsPlugin();
  const approval = new ApprovalPlugin();
  const broker = new Broker({ sessionId }).use(identityResolver(kind), ...policy(), approval, grants);
  return { broker, grants, approval };
}

const deleteRequest = (p: string, sessionId = 's1') =>
  writeRequest(p, { action: 'check', operation: 'delete', targets: [{ role: 'path', path: p, access: 'delete' }], sessionId });

let temp: string | undefined;
afterEach(() => {
  if (temp) rmSync(temp, { recursive: true, force: true });
  temp = undefined;
});

describe('SessionGrantsPlugin', () => {
  it('has no opinion without grants: the prompt stands', async () => {
    const { broker, grants } = setup();
    const outcome = await broker.handle(writeRequest('/w/key.pem', { action: 'check' }));
    expect(outcome).toMatchObject({ ok: false, decision: { verdict: 'prompt' }, error: { code: ErrorCodes.APPROVAL_REQUIRED } });
    expect(grants.list()).toEqual([]);
    expect(grants.has('/w/key.pem', 'write')).toBe(false);
  });

  it('answers grant-token for exactly the granted (path, access) pairs', async () => {
    const { broker, grants, approval } = setup();
    await broker.handle(writeRequest('/w/key.pem', { action: 'check', toolCallId: 't1' }));
    const blocks = approval.takeBlocks({ toolCallId: 't1' });
    expect(blocks).toHaveLength(1);
    const added = grants.grant(blocks);
    expect(added).toEqual([expect.objectContaining({ path: '/w/key.pem', access: 'write', toolCallIds: ['t1'] })]);
    expect(grants.has('/w/key.pem', 'write')).toBe(true);

    const again = await broker.handle(writeRequest('/w/key.pem', { action: 'check' }));
    expect(again).toMatchObject({ ok: true, decision: { verdict: 'grant-token', source: 'session-grants' } });
    // Another access of the same path, another path: still asked.
    expect((await broker.handle(deleteRequest('/w/key.pem'))).decision.verdict).toBe('prompt');
    expect((await broker.handle(writeRequest('/w/other.pem', { action: 'check' }))).decision.verdict).toBe('prompt');
    expect(grants.has('/w/key.pem', 'delete')).toBe(false);
  });

  it('never lifts a denial of an earlier stage', async () => {
    const { broker, grants } = setup();
    grants.grant([{ normalisedPath: '/w/locked.pem', access: 'write' }]);
    const outcome = await broker.handle(writeRequest('/w/locked.pem', { action: 'check' }));
    expect(outcome).toMatchObject({ ok: false, decision: { verdict: 'deny', source: 'protected' } });
  });

  it('granting twice adds nothing new and keeps every tool call', () => {
    const { grants } = setup();
    expect(grants.grant([{ normalisedPath: '/w/a.pem', access: 'write', toolCallIds: ['t1'] }])).toHaveLength(1);
    expect(grants.grant([{ normalisedPath: '/w/a.pem', access: 'write', toolCallIds: ['t2'] }])).toEqual([]);
    expect(grants.list()).toEqual([expect.objectContaining({ path: '/w/a.pem', access: 'write', toolCallIds: ['t1', 't2'] })]);
  });

  it('ignores blocks of another session and relative paths', () => {
    const { grants } = setup();
    expect(grants.grant([{ normalisedPath: '/w/a.pem', access: 'write', sessionId: 'other' }])).toEqual([]);
    expect(grants.grant([{ normalisedPath: 'a.pem', access: 'write' }])).toEqual([]);
    expect(grants.list()).toEqual([]);
  });

  it('serves one broker: another session has none of its grants, and one instance cannot serve two', async () => {
    const first = setup('file', 's1');
    first.grants.grant([{ normalisedPath: '/w/key.pem', access: 'write' }]);
    const second = setup('file', 's2');
    const outcome = await second.broker.handle(writeRequest('/w/key.pem', { action: 'check', sessionId: 's2' }));
    expect(outcome.decision.verdict).toBe('prompt');
    expect(() => new Broker({ sessionId: 's3' }).use(identityResolver(), first.grants)).toThrow(/one broker/);
  });

  it('does not lift a whole-directory delete of a directory with contents; an empty one is lifted', async () => {
    temp = mkdtempSync(path.join(os.tmpdir(), 'bsh-grants-'));
    const full = path.join(temp, 'full.pem');
    const empty = path.join(temp, 'empty.pem');
    mkdirSync(full);
    mkdirSync(empty);
    writeFileSync(path.join(full, 'inside'), 'x');
    const { broker, grants } = setup('directory');
    grants.grant([
      { normalisedPath: full, access: 'delete' },
      { normalisedPath: empty, access: 'delete' },
    ]);
    expect((await broker.handle(deleteRequest(full))).decision.verdict).toBe('prompt');
    expect((await broker.handle(deleteRequest(empty))).decision).toMatchObject({ verdict: 'grant-token', source: 'session-grants' });
  });
  it('a grant covers its operation only, and never a directory with contents moved onto the path', async () => {
    temp = mkdtempSync(path.join(os.tmpdir(), 'bsh-grants-'));
    const full = path.join(temp, 'full');
    const empty = path.join(temp, 'empty');
    mkdirSync(full);
    mkdirSync(empty);
    writeFileSync(path.join(full, 'pre-commit'), 'x');
    const target = path.join(temp, 'hooks.pem');
    const { broker, grants } = setup('directory');
    grants.grant([{ normalisedPath: target, access: 'write', operation: 'rename', sourceKind: 'directory' }]);
    const moveOnto = (from: string) =>
      writeRequest(target, {
        action: 'check',
        operation: 'rename',
        targets: [
          { role: 'from', path: from, access: 'delete' },
          { role: 'to', path: target, access: 'write' },
        ],
      });
    expect((await broker.handle(moveOnto(full))).decision.verdict).toBe('prompt');
    expect((await broker.handle(moveOnto(empty))).decision).toMatchObject({ verdict: 'grant-token', source: 'session-grants' });
    expect((await broker.handle(writeRequest(target, { action: 'check', operation: 'mkdir' }))).decision.verdict).toBe('prompt');
    expect(grants.has(target, 'write', 'rename')).toBe(true);
    expect(grants.has(target, 'write', 'mkdir')).toBe(false);
  });
});
