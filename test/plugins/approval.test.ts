import { describe, expect, it } from 'vitest';
import { Broker, ErrorCodes } from '../../src/core/index.js';
import { ApprovalPlugin } from '../../src/plugins/approval.js';
import { fixedPolicy, identityResolver, writeRequest } from '../helpers/bare-broker.js';

const pemNeedsApproval = fixedPolicy((path) => (path.endsWith('.pem') ? { verdict: 'prompt', reason: 'keys need approval' } : { verdict: 'sandbox' }));

function setup() {
  const approval = new ApprovalPlugin();
  let backups = 0;
  const broker = new Broker({ sessionId: 's1' }).use(identityResolver(), pemNeedsApproval, approval, {
    name: 'count-backups',
    apply(b) {
      b.hooks.preModifyBackup.tap('count-backups', () => void (backups += 1));
      b.hooks.issueToken.tap('count-backups', () => ({ kind: 'sandbox' }));
    },
  });
  return { approval, broker, backups: () => backups };
}

describe('ApprovalPlugin', () => {
  it('records a block for a prompt, answers deny, and nothing is backed up', async () => {
    const { approval, broker, backups } = setup();
    const outcome = await broker.handle(writeRequest('/w/key.pem', { toolCallId: 't1' }));
    expect(outcome).toMatchObject({ ok: false, wireDecision: 'deny', error: { code: ErrorCodes.APPROVAL_REQUIRED } });
    expect(backups()).toBe(0);
    expect(approval.blocks()).toEqual([
      expect.objectContaining({ path: '/w/key.pem', normalisedPath: '/w/key.pem', access: 'write', operation: 'open', toolCallIds: ['t1'], count: 1, reason: 'keys need approval' }),
    ]);
  });

  it('merges repeated prompts per path and access, keeping every tool call', async () => {
    const { approval, broker } = setup();
    await broker.handle(writeRequest('/w/key.pem', { toolCallId: 't1' }));
    await broker.handle(writeRequest('/w/key.pem', { toolCallId: 't2' }));
    await broker.handle(writeRequest('/w/other.pem', { toolCallId: 't2' }));
    const blocks = approval.blocks();
    expect(blocks).toHaveLength(2);
    expect(blocks[0]).toMatchObject({ count: 2, toolCallIds: ['t1', 't2'] });
    expect(approval.blocks({ toolCallId: 't1' }).map((b) => b.path)).toEqual(['/w/key.pem']);
  });

  it('names the target that needed approval, not the first one', async () => {
    const { approval, broker } = setup();
    await broker.handle(
      writeRequest('/w/a.txt', {
        action: 'host-op',
        operation: 'rename',
        targets: [
          { role: 'from', path: '/w/a.txt', access: 'delete' },
          { role: 'to', path: '/w/b.pem', access: 'write' },
        ],
      }),
    );
    expect(approval.blocks().map((b) => [b.path, b.access, b.operation])).toEqual([['/w/b.pem', 'write', 'rename']]);
  });

  it('takeBlocks hands blocks over once', async () => {
    const { approval, broker } = setup();
    await broker.handle(writeRequest('/w/key.pem', { toolCallId: 't1' }));
    expect(approval.takeBlocks({ toolCallId: 't1' })).toHaveLength(1);
    expect(approval.blocks()).toHaveLength(0);
  });

  it('keeps no block for allowed requests', async () => {
    const { approval, broker } = setup();
    const outcome = await broker.handle(writeRequest('/w/notes.txt'));
    expect(outcome.ok).toBe(true);
    expect(approval.blocks()).toEqual([]);
  });

  it('bounds the number of blocks it keeps', async () => {
    const approval = new ApprovalPlugin({ maxBlocks: 2 });
    const broker = new Broker({ sessionId: 's1' }).use(identityResolver(), pemNeedsApproval, approval);
    for (const name of ['a', 'b', 'c']) await broker.handle(writeRequest(`/w/${name}.pem`));
    expect(approval.blocks().map((b) => b.path)).toEqual(['/w/b.pem', '/w/c.pem']);
  });
});
