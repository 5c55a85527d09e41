import { z } from 'zod';
import { Stage, type Broker, type BrokerPlugin } from '../core/index.js';
import { parseOptions } from './options.js';
import { getLeaseHooks } from './lease/hooks.js';

export const sessionGuardOptionsSchema = z.strictObject({
  /** Further sessions this broker answers for (rare: a broker shared by sibling sessions). */
  alsoAccept: z.array(z.string().min(1)).default([]),
});
export type SessionGuardOptions = z.input<typeof sessionGuardOptionsSchema>;

/** Requests must name this broker's session; an empty or foreign session id is denied. */
export class SessionGuardPlugin implements BrokerPlugin {
  static readonly PLUGIN_NAME = 'session-guard';
  readonly name = SessionGuardPlugin.PLUGIN_NAME;
  readonly #extra: readonly string[];

  constructor(options: SessionGuardOptions = {}) {
    this.#extra = parseOptions(this.name, sessionGuardOptionsSchema, options).alsoAccept;
  }

  apply(broker: Broker): void {
    // A kernel request always names the session it runs in: nothing to add to a lease.
    getLeaseHooks(broker).contribute.tap(this.name, () => undefined);
    const accepted = new Set([broker.sessionId, ...this.#extra]);
    broker.hooks.validateSession.tap({ name: this.name, stage: Stage.FIRST }, (request, context) => {
      if (!request.sessionId) return { verdict: 'deny', reason: 'request names no session', source: this.name };
      if (accepted.has(request.sessionId)) return undefined;
      context.log.warn({ phase: 'session', input: { sessionId: request.sessionId } }, 'request for a foreign session');
      return { verdict: 'deny', reason: 'request names another session', source: this.name };
    });
  }
}
