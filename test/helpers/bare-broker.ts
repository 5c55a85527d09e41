import { Writable } from 'node:stream';
import { pino } from 'pino';
import type { BrokerPlugin, BrokerRequestInput, Decision, Logger, PathKind, TargetDraft } from '../../src/core/index.js';
import { phaseMixin } from '../../src/core/logger.js';

/** Resolves every path to itself, so a plugin's unit test needs no file system. */
export const identityResolver = (kind: PathKind = 'file'): BrokerPlugin => ({
  name: 'test-identity-resolver',
  apply(broker) {
    broker.hooks.resolvePath.tap('test-identity-resolver', (resolution) => ({
      targets: resolution.targets.map((t: TargetDraft) => ({ ...t, lexical: t.path, resolved: t.path, ruleForm: t.path, kind })),
    }));
  },
});

/** A policy that answers by path, at the stage given. */
export const fixedPolicy = (decide: (path: string) => Decision | undefined, stage = 0): BrokerPlugin => ({
  name: 'test-fixed-policy',
  apply(broker) {
    broker.hooks.evaluatePolicy.tap({ name: 'test-fixed-policy', stage }, (target) => decide(target.resolved));
  },
});

export const allowAll = () => fixedPolicy(() => ({ verdict: 'sandbox', source: 'test' }));

export function writeRequest(path: string, overrides: Partial<BrokerRequestInput> = {}): BrokerRequestInput {
  return {
    origin: 'api',
    action: 'token',
    operation: 'open',
    targets: [{ role: 'path', path, access: 'write' }],
    sessionId: 's1',
    ...overrides,
  };
}

/** A pino logger whose JSON lines are kept for assertions. */
export function capturingLogger(): { logger: Logger; lines: () => Array<Record<string, unknown>> } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk, _encoding, callback) {
      chunks.push(String(chunk));
      callback();
    },
  });
  const logger = pino({ level: 'debug', mixin: phaseMixin }, stream);
  return {
    logger,
    lines: () =>
      chunks
        .join('')
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as Record<string, unknown>),
  };
}
