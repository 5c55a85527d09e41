import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import {
  Broker,
  createLogger,
  ErrorCodes,
  PolicyStage,
  ResolveStage,
  type BrokerPlugin,
  type BrokerRequestInput,
  type Decision,
  type TargetDraft,
} from '../../src/core/index.js';

const request = (overrides: Partial<BrokerRequestInput> = {}): BrokerRequestInput => ({
  origin: 'api',
  action: 'check',
  operation: 'open',
  targets: [{ role: 'path', path: '/project/a.txt', access: 'write' }],
  sessionId: 's1',
  ...overrides,
});

/** Resolves every path to itself, so core tests need no file system. */
const identityResolver: BrokerPlugin = {
  name: 'identity-resolver',
  apply(broker) {
    broker.hooks.resolvePath.tap('identity-resolver', (resolution) => ({
      targets: resolution.targets.map((t: TargetDraft) => ({ ...t, lexical: t.path, resolved: t.path, ruleForm: t.path, kind: 'file' as const })),
    }));
  },
};

const policy = (name: string, stage: number, decide: (path: string) => Decision | undefined): BrokerPlugin => ({
  name,
  apply(broker) {
    broker.hooks.evaluatePolicy.tap({ name, stage }, (target) => decide(target.resolved));
  },
});

describe('Broker pipeline', () => {
  it('denies when no policy plugin has an opinion', async () => {
    const broker = new Broker({ sessionId: 's1' }).use(identityResolver);
    const outcome = await broker.handle(request());
    expect(outcome.ok).toBe(false);
    expect(outcome.decision.verdict).toBe('deny');
    expect(outcome.error?.code).toBe(ErrorCodes.POLICY_DENIED);
  });

  it('denies when no plugin resolves the path', async () => {
    const broker = new Broker({ sessionId: 's1' }).use(policy('allow', 0, () => ({ verdict: 'sandbox' })));
    const outcome = await broker.handle(request());
    expect(outcome.ok).toBe(false);
    expect(outcome.error?.code).toBe(ErrorCodes.PATH_UNRESOLVED);
  });

  it.each([
    ['earlier stage wins', [-100, 0], 'deny'],
    ['stage, not registration order, decides', [0, -100], 'sandbox'],
  ] as const)('orders policy taps by stage: %s', async (_label, [denyStage, allowStage], expected) => {
    const broker = new Broker({ sessionId: 's1' }).use(
      identityResolver,
      policy('deny-all', denyStage, () => ({ verdict: 'deny' })),
      policy('allow-all', allowStage, () => ({ verdict: 'sandbox' })),
    );
    const outcome = await broker.handle(request());
    expect(outcome.decision.verdict).toBe(expected);
  });

  it('combines per-target decisions with the most restrictive verdict', async () => {
    const broker = new Broker({ sessionId: 's1' }).use(
      identityResolver,
      policy('split', PolicyStage.RULES, (path) => (path.endsWith('.pem') ? { verdict: 'prompt' } : { verdict: 'sandbox' })),
    );
    const outcome = await broker.handle(
      request({
        operation: 'rename',
        targets: [
          { role: 'from', path: '/project/a.txt', access: 'delete' },
          { role: 'to', path: '/project/key.pem', access: 'write' },
        ],
      }),
    );
    expect(outcome.decision.verdict).toBe('prompt');
    expect(outcome.error?.code).toBe(ErrorCodes.APPROVAL_REQUIRED);
  });

  it('rejects malformed requests with BAD_REQUEST instead of throwing', async () => {
    const broker = new Broker({ sessionId: 's1' });
    const outcome = await broker.handle({ ...request(), targets: [{ role: 'path', path: 'relative', access: 'write' }] });
    expect(outcome.ok).toBe(false);
    expect(outcome.error?.code).toBe(ErrorCodes.BAD_REQUEST);
    expect(outcome.error?.message).toMatch(/absolute/);
  });

  it('wraps plugin errors with the plugin and hook names', async () => {
    const broker = new Broker({ sessionId: 's1' }).use(identityResolver, {
      name: 'exploding-policy',
      apply(b) {
        b.hooks.evaluatePolicy.tapPromise('exploding-policy', async () => {
          throw new Error('boom');
        });
      },
    });
    const outcome = await broker.handle(request());
    expect(outcome.ok).toBe(false);
    expect(outcome.error).toMatchObject({ plugin: 'exploding-policy', hook: 'evaluatePolicy', code: ErrorCodes.PLUGIN_FAILED });
  });

  it('runs backup before the token and denies when the backup throws', async () => {
    const order: string[] = [];
    const broker = new Broker({ sessionId: 's1' }).use(identityResolver, policy('allow', 0, () => ({ verdict: 'sandbox' })), {
      name: 'recorder',
      apply(b) {
        b.hooks.preModifyBackup.tap('recorder', () => {
          order.push('backup');
          if (order.length > 1) throw new Error('disk full');
        });
        b.hooks.issueToken.tap('recorder', () => {
          order.push('token');
          return { kind: 'sandbox' };
        });
      },
    });
    const first = await broker.handle(request({ action: 'token' }));
    expect(first).toMatchObject({ ok: true, wireDecision: 'sandbox' });
    const second = await broker.handle(request({ action: 'token' }));
    expect(second).toMatchObject({ ok: false, wireDecision: 'deny', error: { code: ErrorCodes.BACKUP_FAILED } });
    expect(order).toEqual(['backup', 'token', 'backup']);
  });

  it('answers unsupported host operations without performing anything', async () => {
    const broker = new Broker({ sessionId: 's1' }).use(identityResolver, policy('allow', 0, () => ({ verdict: 'sandbox' })));
    const outcome = await broker.handle(request({ action: 'host-op', operation: 'mkdir' }));
    expect(outcome.error?.code).toBe(ErrorCodes.UNSUPPORTED_OPERATION);
  });

  it('holds the changes of its names (the same, below, above) and a commit until a held request\'s caller is done; others go on', async () => {
    const order: string[] = [];
    const broker = new Broker({ sessionId: 's1' }).use(identityResolver, policy('allow', 0, () => ({ verdict: 'sandbox' })), {
      name: 'recorder',
      apply(b) {
        b.hooks.preModifyBackup.tap('recorder', (resolved) => {
          const target = resolved.targets[0]?.resolved ?? '';
          if (target !== '/project/read') order.push(`decide ${target}`);
        });
      },
    });
    let done: () => void = () => undefined;
    const performed = new Promise<void>((resolve) => (done = resolve));
    const write = (file: string) => broker.handle(request({ targets: [{ role: 'path', path: file, access: 'write' }] })).then(() => order.push(`${file} answered`));
    const held = await broker.handle(request({ targets: [{ role: 'path', path: '/project/held', access: 'write' }] }), { holdUntil: performed });
    expect(held.ok).toBe(true);
    const same = write('/project/held');
    const below = write('/project/held/inside');
    const above = write('/project');
    // A change elsewhere does not wait.
    await write('/other/file');
    // A commit waits for every change before it, and holds back every change after it.
    const commit = broker.commitTurn('t').then(() => order.push('committed'));
    const after = write('/other/later');
    const read = broker.handle(request({ targets: [{ role: 'path', path: '/project/read', access: 'read' }] })).then(() => order.push('read answered'));
    await read;
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(order).toEqual(['decide /project/held', 'decide /other/file', '/other/file answered', 'read answered']);
    order.push('performed');
    done();
    await Promise.all([same, below, above, commit, after]);
    // In the order they came: the ones on its names, the commit, then what came after it.
    expect(order.slice(4)).toEqual([
      'performed',
      'decide /project/held',
      '/project/held answered',
      'decide /project/held/inside',
      '/project/held/inside answered',
      'decide /project',
      '/project answered',
      'committed',
      'decide /other/later',
      '/other/later answered',
    ]);
  });

  it('a request whose names resolve elsewhere than they read runs holding every path', async () => {
    const order: string[] = [];
    const linked: BrokerPlugin = {
      name: 'link-resolver',
      apply(b) {
        b.hooks.resolvePath.tap({ name: 'link-resolver', stage: ResolveStage.RESOLVE }, (resolution) => ({
          targets: resolution.targets.map((t: TargetDraft) => ({ ...t, lexical: t.path, resolved: t.path.replace('/link/', '/real/'), ruleForm: t.path, kind: 'file' as const })),
        }));
      },
    };
    const broker = new Broker({ sessionId: 's1' }).use(linked, policy('allow', 0, () => ({ verdict: 'sandbox' })), {
      name: 'recorder',
      apply(b) {
        b.hooks.preModifyBackup.tap('recorder', (resolved) => void order.push(`decide ${resolved.targets[0]?.resolved ?? ''}`));
      },
    });
    let done: () => void = () => undefined;
    const performed = new Promise<void>((resolve) => (done = resolve));
    await broker.handle(request({ targets: [{ role: 'path', path: '/real/f', access: 'write' }] }), { holdUntil: performed });
    const viaLink = broker.handle(request({ targets: [{ role: 'path', path: '/link/f', access: 'write' }] })).then(() => order.push('via link answered'));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(order).toEqual(['decide /real/f']);
    done();
    await viaLink;
    expect(order).toEqual(['decide /real/f', 'decide /real/f', 'via link answered']);
  });

  it('commits turns through lifecycle hooks and opens a fresh one afterwards', async () => {
    const seen: string[] = [];
    const broker = new Broker({ sessionId: 's1' }).use({
      name: 'lifecycle',
      apply(b) {
        b.hooks.turnStarted.tap('lifecycle', (turn) => void seen.push(`start ${turn.id}`));
        b.hooks.turnCommitting.tap('lifecycle', (turn) => {
          turn.facts.files = 0;
          seen.push(`commit ${turn.message}`);
        });
      },
    });
    const first = await broker.beginTurn();
    const committed = await broker.commitTurn('did things');
    expect(committed.id).toBe(first.id);
    expect(committed.committedAt).toBeDefined();
    expect(broker.currentTurn).toBeUndefined();
    const second = await broker.beginTurn();
    expect(second.id).not.toBe(first.id);
    expect(seen).toEqual([`start ${first.id}`, 'commit did things', `start ${second.id}`]);
  });

  it('refuses unknown control commands with a stable code', async () => {
    const broker = new Broker({ sessionId: 's1' });
    await expect(broker.control('Nope')).resolves.toMatchObject({ ok: false, errorCode: ErrorCodes.UNKNOWN_COMMAND });
  });

  it('refuses a plugin registered twice', () => {
    const broker = new Broker({ sessionId: 's1' }).use(identityResolver);
    expect(() => broker.use(identityResolver)).toThrow(/twice/);
  });
});

describe('client commands', () => {
  it('are answered by the plugin that taps their name, and unknown ones are refused', async () => {
    const broker = new Broker({ sessionId: 's1' }).use({
      name: 'echo-command',
      apply(b) {
        b.hooks.clientCommand.for('Echo').tap('echo-command', (payload, context) => ({ ok: true, said: payload.say, pid: context.peer?.pid }));
      },
    });
    await expect(broker.clientCommand('Echo', { say: 'hi' }, { pid: 7, uid: 0, gid: 0 })).resolves.toEqual({ ok: true, said: 'hi', pid: 7 });
    await expect(broker.clientCommand('Nope')).resolves.toMatchObject({ ok: false, errorCode: ErrorCodes.UNKNOWN_COMMAND });
  });

  it('turn a throwing tap into an error answer', async () => {
    const broker = new Broker({ sessionId: 's1' }).use({
      name: 'bad-command',
      apply(b) {
        b.hooks.clientCommand.for('Bad').tapPromise('bad-command', async () => {
          throw new Error('kaput');
        });
      },
    });
    await expect(broker.clientCommand('Bad')).resolves.toMatchObject({ ok: false, error: expect.stringContaining('kaput') });
  });
});

describe('request logging', () => {
  function capture(level: string) {
    const lines: Array<Record<string, unknown>> = [];
    const destination = new Writable({
      write(chunk: Buffer, _encoding, done) {
        for (const line of chunk.toString('utf8').split('\n').filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
        done();
      },
    });
    return { lines, logger: createLogger({ destination, level }) };
  }
  const allowAll = policy('allow-all', PolicyStage.DEFAULTS, () => ({ verdict: 'sandbox' }));

  it("binds the request's id and tool call to what a tap logs", async () => {
    const { lines, logger } = capture('info');
    const broker = new Broker({ sessionId: 's1', logger }).use(identityResolver, allowAll, {
      name: 'talker',
      apply(b) {
        b.hooks.decided.tap('talker', (_decision, _resolved, context) => context.log.info({ phase: 'policy' }, 'decided'));
      },
    });
    const outcome = await broker.handle(request({ toolCallId: 'call-7', traceId: 'trace-7' }));
    await new Promise((resolve) => setImmediate(resolve));
    expect(lines.find((line) => line.msg === 'decided')).toMatchObject({ requestId: outcome.requestId, toolCallId: 'call-7', traceId: 'trace-7', phase: 'policy' });
  });

  it('makes no child logger for a request nothing logs about', async () => {
    const { logger } = capture('error');
    const broker = new Broker({ sessionId: 's1', logger }).use(identityResolver, allowAll);
    let children = 0;
    const child = logger.child.bind(logger);
    logger.child = ((...args: Parameters<typeof logger.child>) => {
      children += 1;
      return child(...args);
    }) as typeof logger.child;
    const outcome = await broker.handle(request());
    expect(outcome.ok).toBe(true);
    expect(children).toBe(0);
  });
});
