import type { Broker, BrokerPlugin } from '../../src/core/index.js';
import { loadProduct } from './sandbox-runner.js';
import { REPO_ROOT } from './serve.js';

/** The session the core-only server serves; its requests must name it. */
export const CORE_SESSION = 'bench-core';

/** The plugin of the core-only server: every path resolves to itself, every request is allowed. */
export const ALLOW_AT_ONCE: BrokerPlugin = {
  name: 'bench-allow-at-once',
  apply(broker: Broker) {
    // One literal with every field, as the path-resolution plugin builds its targets: a spread
    // followed by more fields costs a runtime call per field here, which is not the core's cost.
    broker.hooks.resolvePath.tap('bench-allow-at-once', (resolution) => ({
      targets: resolution.targets.map(({ role, path, access }) => ({ role, path, access, lexical: path, resolved: path, ruleForm: path, kind: 'file' as const })),
    }));
    broker.hooks.evaluatePolicy.tap('bench-allow-at-once', () => ({ verdict: 'sandbox' as const, source: 'bench' }));
    broker.hooks.issueToken.tap('bench-allow-at-once', () => ({ kind: 'sandbox' as const }));
  },
};

/**
 * The socket row's floor: the product's own socket server and broker core, from `dist/`
 * as `serve` runs them, with one plugin that decides at once instead of the standard set.
 * What it costs over the echo server is the line protocol and the core's hooks, which no
 * change to the plugins can take away. Never for anything but the bench: it allows all.
 */
export async function serveCore(socketPath: string, sessionId: string): Promise<{ close(): Promise<void> }> {
  const { index } = await loadProduct(REPO_ROOT);
  const broker = new index.Broker({ sessionId });
  broker.use(ALLOW_AT_ONCE);
  const server = new index.BrokerServer({ broker, socketPath });
  await server.listen();
  return {
    async close() {
      await server.close();
      await broker.close();
    },
  };
}
