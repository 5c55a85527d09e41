import { describe, expect, it } from 'vitest';
import { Broker, type BrokerRequestInput } from '../../src/core/index.js';
import { ToolCallBindingPlugin, procParentOf } from '../../src/plugins/tool-call-binding.js';
import { allowAll, identityResolver, writeRequest } from '../helpers/bare-broker.js';

/**
 * 1 ← 100 (call A's launcher) ← 101 ← 102;  1 ← 200 (call B's launcher) ← 201;
 * 1 ← 300 (a process outside every call); 400 is gone.
 */
const PARENTS = new Map([
  [100, 1],
  [101, 100],
  [102, 101],
  [200, 1],
  [201, 200],
  [300, 1],
  [1, 0],
]);

function setUp() {
  const binding = new ToolCallBindingPlugin({ parentOf: (pid) => PARENTS.get(pid) });
  const broker = new Broker({ sessionId: 's1' }).use(identityResolver(), allowAll(), binding);
  const unbindA = binding.bind(100, 'A');
  binding.bind(200, 'B');
  const ask = (pid: number | undefined, toolCallId?: string) => {
    const overrides: Partial<BrokerRequestInput> = { action: 'check', ...(toolCallId ? { toolCallId } : {}), ...(pid === undefined ? {} : { peer: { pid, uid: 0, gid: 0 } }) };
    return broker.handle(writeRequest('/w/a', overrides)).then((outcome) => outcome.decision.verdict);
  };
  return { binding, ask, unbindA };
}

describe('ToolCallBindingPlugin', () => {
  it.each([
    ['its own call', 102, 'A', 'sandbox'],
    ['no call', 102, undefined, 'sandbox'],
    ["another running call's id", 102, 'B', 'deny'],
    ['an id no call runs under', 102, 'finished', 'deny'],
    ['the launcher itself, its call', 100, 'A', 'sandbox'],
    ['outside every call, a running call', 300, 'B', 'deny'],
    ['outside every call, an unbound id', 300, 'other', 'sandbox'],
    ['outside every call, no id', 300, undefined, 'sandbox'],
    ['a process that is gone', 400, 'A', 'deny'],
    ['no peer (kernel, in-process), any id', undefined, 'B', 'sandbox'],
  ] as const)('a socket request from %s → %s', async (_label, pid, toolCallId, verdict) => {
    const { ask } = setUp();
    expect(await ask(pid, toolCallId)).toBe(verdict);
  });

  it('places processes by their ancestry', () => {
    const { binding } = setUp();
    expect([binding.ownerOf(102), binding.ownerOf(201), binding.ownerOf(300), binding.ownerOf(400)]).toEqual(['A', 'B', undefined, null]);
  });

  it('after a call ends, its processes (if any remain) may not name the calls still running', async () => {
    const { ask, unbindA } = setUp();
    unbindA();
    expect(await ask(102, 'B')).toBe('deny');
    expect(await ask(102, 'A')).toBe('sandbox');
  });

  it('with nothing bound (serve), every peer is left alone', async () => {
    const binding = new ToolCallBindingPlugin({ parentOf: () => undefined });
    const broker = new Broker({ sessionId: 's1' }).use(identityResolver(), allowAll(), binding);
    const outcome = await broker.handle(writeRequest('/w/a', { action: 'check', toolCallId: 'B', peer: { pid: 400, uid: 0, gid: 0 } }));
    expect(outcome.decision.verdict).toBe('sandbox');
  });

  it('a refusal names the plugin and the reason, and stops before the policy', async () => {
    const binding = new ToolCallBindingPlugin({ parentOf: (pid) => PARENTS.get(pid) });
    let policyAsked = false;
    const broker = new Broker({ sessionId: 's1' }).use(identityResolver(), binding, {
      name: 'spy-policy',
      apply: (b) => b.hooks.evaluatePolicy.tap('spy-policy', () => void (policyAsked = true)),
    });
    binding.bind(100, 'A');
    binding.bind(200, 'B');
    const outcome = await broker.handle(writeRequest('/w/a', { action: 'check', toolCallId: 'B', peer: { pid: 102, uid: 0, gid: 0 } }));
    expect(outcome).toMatchObject({ ok: false, decision: { verdict: 'deny', source: 'tool-call-binding' }, error: { code: 'BSH_SESSION_MISMATCH' } });
    expect(outcome.decision.reason).toMatch(/other than the one its process belongs to/);
    expect(policyAsked).toBe(false);
  });

  it('reads real parents from /proc', () => {
    expect(procParentOf(process.pid)).toBe(process.ppid);
    expect(procParentOf(2 ** 30)).toBeUndefined();
  });
});
