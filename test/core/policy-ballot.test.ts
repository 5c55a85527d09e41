import { describe, expect, it } from 'vitest';
import { Broker, ErrorCodes, PolicyStage, type BrokerPlugin, type BrokerRequestInput, type TargetDraft } from '../../src/core/index.js';
import { combineDecisions } from '../../src/core/broker.js';

const identityResolver: BrokerPlugin = {
  name: 'identity-resolver',
  apply(broker) {
    broker.hooks.resolvePath.tap('identity-resolver', (resolution) => ({
      targets: resolution.targets.map((t: TargetDraft) => ({ ...t, lexical: t.path, resolved: t.path, ruleForm: t.path, kind: 'file' as const })),
    }));
  },
};

type Answer = (path: string) => unknown;
type TapKind = 'sync' | 'promise' | 'async';

/** A policy plugin answering whatever `answer` returns, tapped the way `kind` says. */
function policy(name: string, stage: number, answer: Answer, kind: TapKind = 'sync'): BrokerPlugin {
  return {
    name,
    apply(broker) {
      const hook = broker.hooks.evaluatePolicy as unknown as {
        tap(options: object, fn: (target: { resolved: string }) => unknown): void;
        tapPromise(options: object, fn: (target: { resolved: string }) => Promise<unknown>): void;
        tapAsync(options: object, fn: (target: { resolved: string }, ...rest: unknown[]) => void): void;
      };
      if (kind === 'sync') hook.tap({ name, stage }, (target) => answer(target.resolved));
      if (kind === 'promise') hook.tapPromise({ name, stage }, async (target) => answer(target.resolved));
      if (kind === 'async') {
        hook.tapAsync({ name, stage }, (target, ...rest) => {
          const callback = rest.at(-1) as (error: unknown, value?: unknown) => void;
          setImmediate(() => callback(null, answer(target.resolved)));
        });
      }
    },
  };
}

const write = (path = '/project/a.txt'): BrokerRequestInput => ({
  origin: 'api',
  action: 'check',
  operation: 'open',
  targets: [{ role: 'path', path, access: 'write' }],
  sessionId: 's1',
});

const rename = (from: string, to: string): BrokerRequestInput => ({
  origin: 'api',
  action: 'check',
  operation: 'rename',
  targets: [
    { role: 'from', path: from, access: 'delete' },
    { role: 'to', path: to, access: 'write' },
  ],
  sessionId: 's1',
});

const allowAll = (stage = PolicyStage.DEFAULTS) => policy('allow-all', stage, () => ({ verdict: 'sandbox' }));

describe('evaluate-policy: malformed opinions fail closed', () => {
  it.each<[string, unknown]>([
    ['an unknown verdict', { verdict: 'DENY' }],
    ['a bare word', 'deny'],
    ['null', null],
    ['an extra field', { verdict: 'deny', severity: 9 }],
  ])('%s for one target of a rename denies the whole request and names the plugin', async (_label, garbage) => {
    const broker = new Broker({ sessionId: 's1' }).use(
      identityResolver,
      policy('garbage', PolicyStage.ORGANISATION, (path) => (path.includes('/secrets/') ? garbage : undefined)),
      allowAll(),
    );
    const outcome = await broker.handle(rename('/project/a.txt', '/project/secrets/b.txt'));
    expect(outcome.ok).toBe(false);
    expect(outcome.wireDecision).toBe('deny');
    expect(outcome.error?.code).toBe(ErrorCodes.PLUGIN_FAILED);
    expect(outcome.error?.plugin).toBe('garbage');
    expect(outcome.error?.message).toMatch(/malformed decision/);
  });

  it('counts a verdict it does not know as a denial when combining targets', () => {
    const combined = combineDecisions([{ verdict: 'sandbox' }, { verdict: 'bogus' as 'deny' }]);
    expect(combined.verdict).toBe('bogus');
    expect(combineDecisions([{ verdict: 'bogus' as 'deny' }, { verdict: 'sandbox' }]).verdict).toBe('bogus');
  });
});

describe('evaluate-policy: plugins at one stage', () => {
  it.each<TapKind>(['sync', 'promise', 'async'])('the most restrictive wins in either registration order (%s taps)', async (kind) => {
    const allow = policy('allow-secrets', PolicyStage.ORGANISATION, () => ({ verdict: 'sandbox' }), kind);
    const deny = policy('deny-secrets', PolicyStage.ORGANISATION, () => ({ verdict: 'deny', reason: 'secrets' }), kind);
    for (const order of [
      [allow, deny],
      [deny, allow],
    ]) {
      const broker = new Broker({ sessionId: 's1' }).use(identityResolver, ...order, allowAll());
      const outcome = await broker.handle(write('/project/secrets/a'));
      expect(outcome.decision.verdict).toBe('deny');
      expect(outcome.decision.reason).toBe('secrets');
    }
  });

  it('a prompt beats an allow at the same stage, whichever came first', async () => {
    for (const names of [
      ['a', 'b'],
      ['b', 'a'],
    ]) {
      const plugins = {
        a: policy('a', PolicyStage.RULES, () => ({ verdict: 'sandbox' })),
        b: policy('b', PolicyStage.RULES, () => ({ verdict: 'prompt' })),
      };
      const broker = new Broker({ sessionId: 's1' }).use(identityResolver, ...names.map((n) => plugins[n as 'a' | 'b']));
      expect((await broker.handle(write())).decision.verdict).toBe('prompt');
    }
  });

  it('an earlier stage still decides before a later one is asked', async () => {
    let askedLater = 0;
    const broker = new Broker({ sessionId: 's1' }).use(
      identityResolver,
      policy('grant', PolicyStage.SESSION_GRANTS, () => ({ verdict: 'sandbox' })),
      policy('later', PolicyStage.RULES, () => {
        askedLater += 1;
        return { verdict: 'deny' };
      }),
    );
    expect((await broker.handle(write())).decision.verdict).toBe('sandbox');
    expect(askedLater).toBe(0);
  });
});

describe('evaluate-policy: a prompt never lifts a later denial', () => {
  it('a mandatory prompt followed by an organisation deny is a deny', async () => {
    const broker = new Broker({ sessionId: 's1' }).use(
      identityResolver,
      policy('git-hooks', PolicyStage.MANDATORY, (path) => (path.includes('/.git/hooks/') ? { verdict: 'prompt', reason: 'git hook' } : undefined)),
      policy('no-pem', PolicyStage.ORGANISATION, (path) => (path.endsWith('.pem') ? { verdict: 'deny', reason: 'no keys' } : undefined)),
      allowAll(),
    );
    const pem = await broker.handle(write('/project/.git/hooks/server.pem'));
    expect(pem.decision).toMatchObject({ verdict: 'deny', reason: 'no keys' });
    expect(pem.error?.code).toBe(ErrorCodes.POLICY_DENIED);
    const hook = await broker.handle(write('/project/.git/hooks/pre-commit'));
    expect(hook.decision).toMatchObject({ verdict: 'prompt', reason: 'git hook' });
    expect(hook.error?.code).toBe(ErrorCodes.APPROVAL_REQUIRED);
  });

  it('a prompt stands over a later allow, a later prompt, or no later opinion', async () => {
    for (const later of [{ verdict: 'sandbox' }, { verdict: 'grant-token' }, { verdict: 'prompt', reason: 'second' }, undefined]) {
      const broker = new Broker({ sessionId: 's1' }).use(
        identityResolver,
        policy('first', PolicyStage.MANDATORY, () => ({ verdict: 'prompt', reason: 'first' }), 'promise'),
        policy('later', PolicyStage.RULES, () => later),
      );
      expect((await broker.handle(write())).decision).toMatchObject({ verdict: 'prompt', reason: 'first' });
    }
  });

  it('only the first later stage with an opinion counts', async () => {
    const broker = new Broker({ sessionId: 's1' }).use(
      identityResolver,
      policy('ask', PolicyStage.MANDATORY, () => ({ verdict: 'prompt' })),
      policy('rule-allows', PolicyStage.RULES, () => ({ verdict: 'sandbox' })),
      policy('default-denies', PolicyStage.DEFAULTS, () => ({ verdict: 'deny' })),
    );
    expect((await broker.handle(write())).decision.verdict).toBe('prompt');
  });

  it('a later denial of one target of a rename denies it even when the other was only a prompt', async () => {
    const broker = new Broker({ sessionId: 's1' }).use(
      identityResolver,
      policy('ask', PolicyStage.MANDATORY, () => ({ verdict: 'prompt' }), 'async'),
      policy('outside', PolicyStage.DEFAULTS, (path) => (path.startsWith('/project/') ? { verdict: 'sandbox' } : { verdict: 'deny', reason: 'outside' })),
    );
    const outcome = await broker.handle(rename('/project/a', '/etc/b'));
    expect(outcome.decision).toMatchObject({ verdict: 'deny', reason: 'outside', targetRole: 'to' });
  });
});

describe('evaluate-policy: a plugin that never answers', () => {
  /** A policy plugin that gives its opinion on /project/slow only after `release` (never, unless called). */
  function hanging(kind: 'promise' | 'async'): { plugin: BrokerPlugin; release: () => void } {
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => (release = resolve));
    const answer = { verdict: 'sandbox' };
    const plugin: BrokerPlugin = {
      name: 'remote-policy',
      apply(broker) {
        const hook = broker.hooks.evaluatePolicy as unknown as {
          tapPromise(options: object, fn: (target: { resolved: string }) => Promise<unknown>): void;
          tapAsync(options: object, fn: (target: { resolved: string }, ...rest: unknown[]) => void): void;
        };
        const slow = (target: { resolved: string }) => target.resolved === '/project/slow';
        if (kind === 'promise') hook.tapPromise({ name: 'remote-policy', stage: PolicyStage.ORGANISATION }, async (target) => (slow(target) ? released.then(() => answer) : undefined));
        else
          hook.tapAsync({ name: 'remote-policy', stage: PolicyStage.ORGANISATION }, (target, ...rest) => {
            const callback = rest.at(-1) as (error: unknown, value?: unknown) => void;
            if (slow(target)) void released.then(() => callback(null, answer));
            else callback(null, undefined);
          });
      },
    };
    return { plugin, release };
  }

  it.each(['promise', 'async'] as const)('(%s tap) is refused, naming it, and the next request is answered', async (kind) => {
    const { plugin, release } = hanging(kind);
    const broker = new Broker({ sessionId: 's1', policyTimeoutMs: 20 }).use(identityResolver, plugin, allowAll());
    const refused = await broker.handle(write('/project/slow'));
    expect(refused.ok).toBe(false);
    expect(refused.decision.verdict).toBe('deny');
    expect(refused.error?.message).toMatch(/remote-policy.*gave no opinion within 20 ms/);
    // The lock it held is free: a later change is decided as usual.
    expect((await broker.handle(write('/project/other'))).ok).toBe(true);
    // Its late answer changes nothing about the refused request.
    release();
    await new Promise((resolve) => setImmediate(resolve));
    expect(refused.ok).toBe(false);
  });

  it.each([-1, 1.5, Number.NaN, 2 ** 31])('policyTimeoutMs %s is refused at construction', (policyTimeoutMs) => {
    expect(() => new Broker({ sessionId: 's1', policyTimeoutMs })).toThrow(/policyTimeoutMs/);
  });
});
