import { describe, expect, it } from 'vitest';
import { Broker, ErrorCodes, type BrokerPlugin, type BrokerRequestInput, type TargetDraft } from '../../src/core/index.js';
import { ApprovalPlugin, type ApprovalOptions, type ApprovalPrompt, type PromptApprover } from '../../src/plugins/approval/index.js';
import { SessionGrantsPlugin } from '../../src/plugins/session-grants.js';
import { fixedPolicy, identityResolver, writeRequest } from '../helpers/bare-broker.js';

const pemNeedsApproval = fixedPolicy((path) => (path.endsWith('.pem') ? { verdict: 'prompt', reason: 'keys need approval' } : { verdict: 'sandbox' }));

function setup() {
  const approval = new ApprovalPlugin({ mode: 'after' });
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

describe('ApprovalPlugin, after', () => {
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
    const approval = new ApprovalPlugin({ mode: 'after', maxBlocks: 2 });
    const broker = new Broker({ sessionId: 's1' }).use(identityResolver(), pemNeedsApproval, approval);
    for (const name of ['a', 'b', 'c']) await broker.handle(writeRequest(`/w/${name}.pem`));
    expect(approval.blocks().map((b) => b.path)).toEqual(['/w/b.pem', '/w/c.pem']);
  });
});

/** A resolver whose paths are absent unless listed as existing (a directory made by a mkdir is then there). */
function fakeDisk(existing: Set<string>): BrokerPlugin {
  return {
    name: 'test-fake-disk',
    apply(broker) {
      broker.hooks.resolvePath.tap('test-fake-disk', (resolution) => ({
        targets: resolution.targets.map((t: TargetDraft) => ({ ...t, lexical: t.path, resolved: t.path, ruleForm: t.path, kind: existing.has(t.path) ? 'directory' : 'absent' })),
      }));
      broker.hooks.requestDone.tap('test-fake-disk', (outcome) => {
        if (outcome.ok && outcome.request?.operation === 'mkdir') for (const t of outcome.targets) existing.add(t.resolved);
      });
    },
  };
}

/** Everything under a `.git` (and the .git itself) is a prompt; the rest is allowed. */
const gitNeedsApproval = fixedPolicy((p) => (p.endsWith('/.git') || p.includes('/.git/') ? { verdict: 'prompt', reason: 'git' } : { verdict: 'sandbox' }));

function inline(approver: PromptApprover | undefined, options: ApprovalOptions = {}, existing = new Set<string>(['/w'])) {
  const approval = new ApprovalPlugin(options);
  approval.setApprover(approver);
  const grants = new SessionGrantsPlugin();
  const broker = new Broker({ sessionId: 's1' }).use(fakeDisk(existing), gitNeedsApproval, grants, approval, {
    name: 'perform',
    apply(b) {
      b.hooks.issueToken.tap('perform', () => ({ kind: 'sandbox' }));
    },
  });
  return { approval, broker, grants };
}

const mkdir = (p: string, toolCallId = 't1'): BrokerRequestInput => ({ origin: 'api', action: 'check', operation: 'mkdir', targets: [{ role: 'path', path: p, access: 'write' }], sessionId: 's1', toolCallId });
const write = (p: string, toolCallId = 't1') => writeRequest(p, { toolCallId });

describe('ApprovalPlugin, inline', () => {
  it('asks while the request waits; a yes lets it through, once', async () => {
    const asked: ApprovalPrompt[] = [];
    const { broker, approval } = inline((prompt) => {
      asked.push(prompt);
      return true;
    });
    const outcome = await broker.handle(write('/w/.git/config'));
    expect(outcome).toMatchObject({ ok: true, decision: { verdict: 'grant-token', source: 'approval' } });
    expect(asked.map((p) => [p.block.normalisedPath, p.block.reason, p.round, p.choices.map((c) => c.scope)])).toEqual([['/w/.git/config', 'git', 1, ['once', 'session']]]);
    // Once: the next write there is asked again.
    await broker.handle(write('/w/.git/config'));
    expect(asked).toHaveLength(2);
    expect(approval.takeAsked({ toolCallId: 't1' }).map((q) => q.choice?.scope)).toEqual(['once', 'once']);
    expect(approval.takeBlocks()).toEqual([]);
  });

  it('other changes go on while a question is open', async () => {
    let answer: (value: boolean) => void = () => undefined;
    const { broker } = inline(() => new Promise<boolean>((resolve) => (answer = resolve)));
    const held = broker.handle(write('/w/.git/config'));
    await new Promise((resolve) => setTimeout(resolve, 20));
    // Not queued behind the question: answered while it is still open.
    const other = await broker.handle(write('/w/notes.txt'));
    expect(other.ok).toBe(true);
    answer(false);
    expect(await held).toMatchObject({ ok: false, error: { code: ErrorCodes.APPROVAL_REQUIRED } });
  });

  it('asks one question at a time, and each once', async () => {
    let open = 0;
    let most = 0;
    const asked: string[] = [];
    const { broker } = inline(async ({ block }) => {
      open += 1;
      most = Math.max(most, open);
      asked.push(block.normalisedPath);
      await new Promise((resolve) => setTimeout(resolve, 20));
      open -= 1;
      return block.normalisedPath.endsWith('a');
    });
    const [a, b] = await Promise.all([broker.handle(write('/w/.git/a', 'p1')), broker.handle(write('/w/.git/b', 'p2'))]);
    expect(most).toBe(1);
    expect(asked.sort()).toEqual(['/w/.git/a', '/w/.git/b']);
    expect([a.ok, b.ok]).toEqual([true, false]);
  });

  it('a yes for the session becomes a session grant: asked no more', async () => {
    const asked: string[] = [];
    const { broker, grants } = inline(({ block, choices }) => {
      asked.push(block.normalisedPath);
      return choices.find((c) => c.scope === 'session');
    });
    await broker.handle(write('/w/.git/config'));
    await broker.handle(write('/w/.git/config'));
    expect(asked).toEqual(['/w/.git/config']);
    expect(grants.list().map((g) => [g.path, g.operation])).toEqual([['/w/.git/config', 'open']]);
  });

  it('offers the directory the command makes (a mkdir of it, or anything inside one made in this turn)', async () => {
    const prompts: ApprovalPrompt[] = [];
    const { broker } = inline((prompt) => {
      prompts.push(prompt);
      return prompt.choices.find((c) => c.scope === 'directory' && c.lasts === 'turn') ?? false;
    });
    expect((await broker.handle(mkdir('/w/repo/.git'))).ok).toBe(true);
    expect(prompts[0]?.choices.map((c) => c.scope)).toEqual(['once', 'session', 'directory', 'directory']);
    expect(prompts[0]?.choices[2]).toMatchObject({ directory: '/w/repo/.git', lasts: 'turn', repository: true });
    expect(prompts[0]?.choices[3]).toMatchObject({ directory: '/w/repo/.git', lasts: 'session' });
    // A write in a directory that was there before the turn offers no directory.
    const before = inline((prompt) => {
      prompts.push(prompt);
      return false;
    }, {}, new Set(['/w', '/w/.git']));
    await before.broker.handle(write('/w/.git/config'));
    expect(prompts.at(-1)?.choices.map((c) => c.scope)).toEqual(['once', 'session']);
  });

  it('a directory yes: what the command puts in the new directory passes unasked; older paths are still asked; the next turn asks again', async () => {
    const asked: string[] = [];
    const { broker, approval } = inline((prompt) => {
      asked.push(prompt.block.normalisedPath);
      return prompt.choices.find((c) => c.scope === 'directory' && c.lasts === 'turn') ?? false;
    }, {}, new Set(['/w', '/w/old/.git']));
    expect((await broker.handle(mkdir('/w/.git'))).ok).toBe(true);
    expect((await broker.handle(mkdir('/w/.git/hooks'))).ok).toBe(true);
    expect((await broker.handle(write('/w/.git/hooks/pre-commit'))).ok).toBe(true);
    expect(asked).toEqual(['/w/.git']);
    expect(approval.takeAsked().map((q) => q.byScope)).toEqual([undefined, '/w/.git', '/w/.git']);
    // A repository that was there before: no directory to offer, so the answer here is no.
    expect((await broker.handle(write('/w/old/.git/config'))).ok).toBe(false);
    expect(asked).toEqual(['/w/.git', '/w/old/.git/config']);
    await broker.commitTurn('done');
    expect((await broker.handle(write('/w/.git/config'))).ok).toBe(false);
    expect(asked.at(-1)).toBe('/w/.git/config');
  });

  it('what the command moves into an approved directory is covered like what it writes there; its old place is judged as usual', async () => {
    const asked: string[] = [];
    const { broker } = inline((prompt) => {
      asked.push(prompt.block.normalisedPath);
      return prompt.choices.find((c) => c.scope === 'directory') ?? false;
    }, {}, new Set(['/w', '/w/keep', '/w/old/.git/hooks']));
    await broker.handle(mkdir('/w/.git'));
    const rename = (from: string, to: string): BrokerRequestInput => ({
      origin: 'api',
      action: 'check',
      operation: 'rename',
      targets: [
        { role: 'from', path: from, access: 'delete' },
        { role: 'to', path: to, access: 'write' },
      ],
      sessionId: 's1',
      toolCallId: 't1',
    });
    expect((await broker.handle(rename('/w/keep', '/w/.git/hooks'))).ok).toBe(true);
    expect((await broker.handle(write('/w/.git/hooks/pre-commit'))).ok).toBe(true);
    expect(asked).toEqual(['/w/.git']);
    // Taking an older repository's hooks along is asked at their old place, and refused here.
    expect((await broker.handle(rename('/w/old/.git/hooks', '/w/.git/hooks2'))).ok).toBe(false);
    expect(asked).toEqual(['/w/.git', '/w/old/.git/hooks']);
  });

  it('an answer that is none of the choices is a no', async () => {
    const { broker, approval } = inline(() => ({ scope: 'directory', directory: '/', lasts: 'session', repository: false }));
    expect((await broker.handle(write('/w/.git/config'))).ok).toBe(false);
    expect(approval.takeAsked()[0]?.refusal).toBe('the answer was none of the choices offered');
  });

  it('no approver: refused, kept as a block, nobody asked', async () => {
    const { broker, approval } = inline(undefined);
    const outcome = await broker.handle(write('/w/.git/config'));
    expect(outcome).toMatchObject({ ok: false, error: { code: ErrorCodes.APPROVAL_REQUIRED } });
    expect(approval.takeBlocks().map((b) => b.normalisedPath)).toEqual(['/w/.git/config']);
  });

  it('a timeout is a no, and tells the approver to stop', async () => {
    let aborted = false;
    const { broker, approval } = inline(({ signal }) => new Promise<boolean>(() => signal.addEventListener('abort', () => void (aborted = true))), { timeoutMs: 30 });
    expect((await broker.handle(write('/w/.git/config'))).ok).toBe(false);
    expect(aborted).toBe(true);
    expect(approval.takeAsked()[0]?.refusal).toMatch(/^no answer within/);
  });
});
