import { Stage, type Broker, type BrokerPlugin } from '../core/index.js';

/**
 * Linux answer to a token request. The kernel sandbox already lets the client read
 * everywhere, and its writes inside the writable roots are carried out by the
 * supervisor, so an allowed request is answered `SANDBOX`. A `grant-token` for a write
 * (a grant outside the roots) has no Linux token yet: no grant, so the answer is deny.
 */
export class SandboxTokenPlugin implements BrokerPlugin {
  static readonly PLUGIN_NAME = 'sandbox-token';
  readonly name = SandboxTokenPlugin.PLUGIN_NAME;

  apply(broker: Broker): void {
    broker.hooks.issueToken.tap({ name: this.name, stage: Stage.LATE }, (resolved, decision) => {
      const writes = resolved.targets.some((t) => t.access !== 'read');
      if (decision.verdict === 'sandbox' || !writes) return { kind: 'sandbox' };
      return undefined;
    });
  }
}
