import { Broker, type BrokerPlugin, type Logger } from '../core/index.js';

export interface CreateBrokerOptions {
  sessionId: string;
  logger?: Logger;
  plugins: readonly BrokerPlugin[];
  /** See BrokerOptions.policyTimeoutMs. */
  policyTimeoutMs?: number;
}

/** A broker with these plugins registered (e.g. `standardPlugins(…)` plus an organisation's own). */
export function createBroker(options: CreateBrokerOptions): Broker {
  return new Broker({
    sessionId: options.sessionId,
    ...(options.logger ? { logger: options.logger } : {}),
    ...(options.policyTimeoutMs === undefined ? {} : { policyTimeoutMs: options.policyTimeoutMs }),
  }).use(...options.plugins);
}
