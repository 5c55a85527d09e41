import { describe, expect, it } from 'vitest';
import { Broker, ErrorCodes } from '../../src/core/index.js';
import { SessionGuardPlugin } from '../../src/plugins/session-guard.js';
import { allowAll, identityResolver, writeRequest } from '../helpers/bare-broker.js';

describe('SessionGuardPlugin', () => {
  const broker = () => new Broker({ sessionId: 's1' }).use(new SessionGuardPlugin({ alsoAccept: ['sibling'] }), identityResolver(), allowAll());

  it.each([
    ['its own session', 's1', true],
    ['an accepted sibling session', 'sibling', true],
    ['a foreign session', 's2', false],
    ['an empty session id', '', false],
    ['a prefix of its session', 's', false],
  ])('with %s answers ok=%s', async (_label, sessionId, ok) => {
    const outcome = await broker().handle(writeRequest('/w/f', { sessionId, action: 'check' }));
    expect(outcome.ok).toBe(ok);
    if (!ok) {
      expect(outcome.error?.code).toBe(ErrorCodes.SESSION_MISMATCH);
      expect(outcome.decision).toMatchObject({ verdict: 'deny', source: 'session-guard' });
    }
  });

  it('stops the pipeline before any path is resolved', async () => {
    let resolved = false;
    const b = new Broker({ sessionId: 's1' }).use(new SessionGuardPlugin(), {
      name: 'spy',
      apply(inner) {
        inner.hooks.resolvePath.tap('spy', (resolution) => {
          resolved = true;
          return resolution;
        });
      },
    });
    await b.handle(writeRequest('/w/f', { sessionId: 'other' }));
    expect(resolved).toBe(false);
  });

  it('rejects unknown options', () => {
    expect(() => new SessionGuardPlugin({ bogus: true } as never)).toThrow(/bogus/);
  });
});
