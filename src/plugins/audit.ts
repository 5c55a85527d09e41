import { SyncHook } from 'tapable';
import { z } from 'zod';
import { Stage, type Broker, type BrokerPlugin, type Outcome, type RequestContext } from '../core/index.js';
import { isHookMap } from '../core/intercept.js';
import { parseOptions } from './options.js';

/** One record per request: what was asked, what was decided, how long it took. */
export interface AuditRecord {
  requestId: string;
  sessionId: string;
  origin: string;
  operation: string;
  toolCallId?: string;
  traceId?: string;
  peer?: { pid: number; uid: number; gid: number };
  paths: Array<{ role: string; path: string; normalisedPath?: string; access: string }>;
  verdict: string;
  decision: string;
  decidedBy?: string;
  reason?: string;
  ok: boolean;
  error?: { code: string; message: string; errno?: string };
  durationMs: number;
  /** Per-tap timings, when `traceTaps` is on. */
  taps?: Array<{ hook: string; plugin: string; ms: number }>;
}

export interface AuditHooks {
  /** Every audit record, for sinks (files, SIEM forwarders) that other plugins add. */
  readonly record: SyncHook<[AuditRecord]>;
}

const auditHooks = new WeakMap<Broker, AuditHooks>();

/** The audit hooks of a broker; created on first use so sinks may register before or after. */
export function getAuditHooks(broker: Broker): AuditHooks {
  let hooks = auditHooks.get(broker);
  if (!hooks) {
    hooks = Object.freeze({ record: new SyncHook<[AuditRecord]>(['record']) });
    auditHooks.set(broker, hooks);
  }
  return hooks;
}

export const auditOptionsSchema = z.strictObject({
  /** Also log each record through the broker's logger (phase `audit`). */
  log: z.boolean().default(true),
  /** Time every tap of every request hook (costs a little per request). */
  traceTaps: z.boolean().default(false),
});
export type AuditOptions = z.input<typeof auditOptionsSchema>;

const TRACE = Symbol('audit-trace');
type Trace = Array<{ hook: string; plugin: string; ms: number }>;

function contextOf(args: unknown[]): RequestContext | undefined {
  const last = args.at(-1);
  return typeof last === 'object' && last !== null && 'requestId' in last && 'state' in last ? (last as RequestContext) : undefined;
}

/**
 * Audit through interceptors: no plugin writes audit code of its own. The per-request
 * record is built from the outcome; tap timings come from a `register` interceptor.
 */
export class AuditPlugin implements BrokerPlugin {
  static readonly PLUGIN_NAME = 'audit';
  readonly name = AuditPlugin.PLUGIN_NAME;
  readonly #options: z.infer<typeof auditOptionsSchema>;

  constructor(options: AuditOptions = {}) {
    this.#options = parseOptions(this.name, auditOptionsSchema, options);
  }

  apply(broker: Broker): void {
    const hooks = getAuditHooks(broker);
    if (this.#options.traceTaps) this.#traceTaps(broker);
    broker.hooks.requestDone.tap({ name: this.name, stage: Stage.LAST }, (outcome, context) => {
      const record = toRecord(outcome, context.state.get(TRACE) as Trace | undefined);
      if (this.#options.log) {
        const level = outcome.ok ? 'info' : 'warn';
        context.log[level]({ phase: 'audit', audit: record }, `${record.operation} ${record.verdict}`);
      }
      hooks.record.call(record);
    });
  }

  #traceTaps(broker: Broker): void {
    const register = (hookName: string) => ({
      register(tap: { name: string; type: string; fn: (...args: unknown[]) => unknown }) {
        if (tap.type !== 'sync' && tap.type !== 'promise') return tap;
        const original = tap.fn;
        tap.fn = (...args: unknown[]) => {
          const context = contextOf(args);
          if (!context) return original(...args);
          const started = performance.now();
          const note = () => {
            const trace = (context.state.get(TRACE) as Trace | undefined) ?? [];
            trace.push({ hook: hookName, plugin: tap.name, ms: performance.now() - started });
            context.state.set(TRACE, trace);
          };
          const value = original(...args);
          if (value instanceof Promise) return value.finally(note);
          note();
          return value;
        };
        return tap;
      },
    });
    for (const [name, hook] of Object.entries(broker.hooks)) {
      if (name === 'requestDone') continue;
      if (isHookMap(hook)) {
        hook.intercept({
          factory: (key: unknown, created: { intercept(i: unknown): void }) => {
            created.intercept(register(`${name}(${String(key)})`));
            return created;
          },
        } as never);
      } else {
        (hook as { intercept(i: unknown): void }).intercept(register(name));
      }
    }
  }
}

function toRecord(outcome: Outcome, taps: Trace | undefined): AuditRecord {
  const { request } = outcome;
  const resolved = new Map(outcome.targets.map((t) => [t.role, t.resolved]));
  const record: AuditRecord = {
    requestId: outcome.requestId,
    sessionId: request?.sessionId ?? '',
    origin: request?.origin ?? 'unknown',
    operation: request?.operation ?? 'unknown',
    paths: (request?.targets ?? []).map((t) => ({
      role: t.role,
      path: t.path,
      ...(resolved.has(t.role) ? { normalisedPath: resolved.get(t.role) } : {}),
      access: t.access,
    })),
    verdict: outcome.decision.verdict,
    decision: outcome.wireDecision,
    ok: outcome.ok,
    durationMs: Math.round(outcome.durationMs * 1000) / 1000,
  };
  if (request?.toolCallId) record.toolCallId = request.toolCallId;
  if (request?.traceId) record.traceId = request.traceId;
  if (request?.peer) record.peer = request.peer;
  if (outcome.decision.source) record.decidedBy = outcome.decision.source;
  if (outcome.decision.reason) record.reason = outcome.decision.reason;
  if (outcome.error) record.error = { code: outcome.error.code, message: outcome.error.message, ...(outcome.error.errno ? { errno: outcome.error.errno } : {}) };
  if (taps) record.taps = taps;
  return record;
}
