import type { Broker } from './broker.js';

/**
 * A plugin is an object with a stable name and `apply(broker)`, which taps the broker's
 * hooks. The name is used as the tap name so errors and traces say who did what.
 */
export interface BrokerPlugin {
  readonly name: string;
  apply(broker: Broker): void;
}
