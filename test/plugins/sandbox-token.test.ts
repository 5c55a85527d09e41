import { describe, expect, it } from 'vitest';
import { Broker, ErrorCodes, type Access, type Verdict } from '../../src/core/index.js';
import { SandboxTokenPlugin } from '../../src/plugins/sandbox-token.js';
import { fixedPolicy, identityResolver, writeRequest } from '../helpers/bare-broker.js';

describe('SandboxTokenPlugin', () => {
  it.each<[Verdict, Access, boolean]>([
    ['sandbox', 'write', true],
    ['sandbox', 'read', true],
    ['grant-token', 'read', true],
    // A write grant outside the roots needs a real token (an fd), which this plugin cannot give.
    ['grant-token', 'write', false],
  ])('verdict %s for %s → SANDBOX=%s', async (verdict, access, granted) => {
    const broker = new Broker({ sessionId: 's1' }).use(identityResolver(), fixedPolicy(() => ({ verdict })), new SandboxTokenPlugin());
    const outcome = await broker.handle(writeRequest('/w/f', { targets: [{ role: 'path', path: '/w/f', access }] }));
    if (granted) expect(outcome).toMatchObject({ ok: true, wireDecision: 'sandbox', grant: { kind: 'sandbox' } });
    else expect(outcome).toMatchObject({ ok: false, wireDecision: 'deny', error: { code: ErrorCodes.NO_TOKEN } });
  });

  it('lets an earlier issuer answer first', async () => {
    const broker = new Broker({ sessionId: 's1' }).use(identityResolver(), fixedPolicy(() => ({ verdict: 'grant-token' })), new SandboxTokenPlugin(), {
      name: 'real-tokens',
      apply(b) {
        b.hooks.issueToken.tap({ name: 'real-tokens', stage: 0 }, () => ({ kind: 'token', token: 'tok-1' }));
      },
    });
    const outcome = await broker.handle(writeRequest('/w/f'));
    expect(outcome).toMatchObject({ ok: true, wireDecision: 'grant-token', grant: { kind: 'token', token: 'tok-1' } });
  });
});
