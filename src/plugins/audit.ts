import { SyncHook } from 'tapable';
import { z } from 'zod';
import { Stage, type Broker, type BrokerPlugin, type Outcome, type RequestContext, type RequestTarget } from '../core/index.js';
import { isHookMap } from '../core/intercept.js';
import { parseOptions } from './options.js';
import { RefusalBucket, refusalBudgetSchema, type Counted } from './refusal-budget.js';

export { refusalBudgetSchema, type RefusalBudgetOptions } from './refusal-budget.js';

/**
 * One record per request: what was asked, what was decided, how long it took. A
 * refusal the sandbox decided without a request (see `auditRefusal`) is one record too,
 * with `operation: 'syscall'` and the syscall in `syscall`.
 */
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
  /** For a refusal the sandbox decided itself: the syscall, and the thread and process that made it. */
  syscall?: { name: string; nr: number; pid: number; tid: number };
  /** For a socket line refused before it became a request: the command it named, if any. */
  command?: string;
  /** For the record that stands for refusals counted but not recorded one by one (see RefusalBudget). */
  suppressed?: { count: number; since: string; operations: Record<string, number>; peers: number[] };
  /** For a connection (operation `connect`, `datagram` or `dns`): where, how, and which process (NetworkPlugin). */
  connection?: { host?: string; address: string; port: number; protocol: string; pid: number; tid: number; count: number };
}

export interface AuditHooks {
  /** Every audit record, for sinks (files, SIEM forwarders) that other plugins add. */
  readonly record: SyncHook<[AuditRecord]>;
}

const auditHooks = new WeakMap<Broker, AuditHooks>();
/** Whether the broker's AuditPlugin logs records (set when it is applied). */
const auditLogging = new WeakMap<Broker, boolean>();
const refusalCount = new WeakMap<Broker, number>();

const refusalBuckets = new WeakMap<Broker, Map<string, RefusalBucket>>();
const refusalBudgets = new WeakMap<Broker, z.infer<typeof refusalBudgetSchema>>();

function bucketFor(broker: Broker, source: string): RefusalBucket {
  let buckets = refusalBuckets.get(broker);
  if (!buckets) {
    buckets = new Map();
    refusalBuckets.set(broker, buckets);
  }
  let bucket = buckets.get(source);
  if (!bucket) {
    bucket = new RefusalBucket(refusalBudgets.get(broker) ?? refusalBudgetSchema.parse({}), (counted) => recordCounted(broker, counted));
    buckets.set(source, bucket);
  }
  return bucket;
}

/** Records the refusals counted, kept only in the summary, at once (the broker is closing). */
function settleRefusals(broker: Broker): void {
  for (const bucket of refusalBuckets.get(broker)?.values() ?? []) bucket.settle();
}

/** The error code of a refusal the sandbox decided without asking the policy. */
export const SANDBOX_REFUSED = 'BSH_SANDBOX_REFUSED';

/**
 * A refusal that never became a broker request: the kernel sandbox refused a syscall
 * itself (io_uring, mount, ptrace, a device node, a signal to a process outside the
 * sandbox, a rename that would bring a file into the command's temp dir, …), or the
 * socket refused a line before the pipeline (a control command, an unknown command, a
 * malformed or oversized line). There was no policy question to ask, so it is not a
 * `BrokerRequest`; it is recorded here so the audit trail holds every refusal the broker
 * heard of.
 */
export interface RefusalReport {
  /** What reported it (`kernel`: the seccomp supervisor; `socket`: the broker's socket). */
  origin: string;
  /** Who decided (`sandbox:supervisor`, `ipc`). */
  decidedBy: string;
  reason: string;
  /** The record's operation (default `syscall`; the socket uses `control`, `client-command`, `malformed`, …). */
  operation?: string;
  /** The error code of the answer (default SANDBOX_REFUSED). */
  errorCode?: string;
  /** The errno the call returned (`EPERM`). */
  errno?: string;
  syscall?: { name: string; nr: number; pid: number; tid: number };
  /** The command a socket line named. */
  command?: string;
  /** The path the call named, when it named one. */
  path?: string;
  toolCallId?: string;
  traceId?: string;
  peer?: { pid: number; uid: number; gid: number };
}

/**
 * Records a refusal the sandbox decided itself: the same record shape and sinks as a
 * request's (`getAuditHooks(broker).record`), and the same log line (`phase: 'audit'`)
 * when the broker's AuditPlugin logs.
 */
export function auditRefusal(broker: Broker, report: RefusalReport): AuditRecord | undefined {
  if (!bucketFor(broker, report.origin === 'kernel' ? 'kernel' : 'socket').take(report)) return undefined;
  const record: AuditRecord = {
    requestId: refusalId(broker, report.origin),
    sessionId: broker.sessionId,
    origin: report.origin,
    operation: report.operation ?? 'syscall',
    paths: report.path === undefined ? [] : [{ role: 'path', path: report.path, access: 'write' }],
    verdict: 'deny',
    decision: 'deny',
    decidedBy: report.decidedBy,
    reason: report.reason,
    ok: false,
    error: { code: report.errorCode ?? SANDBOX_REFUSED, message: report.reason, ...(report.errno ? { errno: report.errno } : {}) },
    durationMs: 0,
  };
  if (report.syscall) record.syscall = report.syscall;
  if (report.command) record.command = report.command;
  if (report.toolCallId) record.toolCallId = report.toolCallId;
  if (report.traceId) record.traceId = report.traceId;
  if (report.peer) record.peer = report.peer;
  deliver(broker, record, `${report.syscall?.name ?? report.command ?? record.operation} ${record.verdict}`, report);
  return record;
}

/**
 * Records a connection the sandbox allowed or refused (NetworkPlugin), with the same
 * sinks and log line as a request's record.
 */
export function auditConnection(broker: Broker, record: Omit<AuditRecord, 'requestId' | 'sessionId'>): AuditRecord {
  const full: AuditRecord = Object.assign({ requestId: refusalId(broker, 'network'), sessionId: broker.sessionId }, record);
  deliver(broker, full, `${record.operation} ${record.verdict}`, record);
  return full;
}

/** `k` and a number for the kernel sandbox's refusals, `s` and a number for the socket's and others. */
function refusalId(broker: Broker, origin: string): string {
  const sequence = (refusalCount.get(broker) ?? 0) + 1;
  refusalCount.set(broker, sequence);
  return `${origin === 'kernel' ? 'k' : origin === 'network' ? 'n' : 's'}${sequence}`;
}

function deliver(broker: Broker, record: AuditRecord, message: string, ids: { toolCallId?: string | undefined; traceId?: string | undefined } = {}): void {
  const level = record.ok ? 'info' : 'warn';
  if (auditLogging.get(broker) === true && broker.log.isLevelEnabled(level)) {
    const log = broker.log.child({ requestId: record.requestId, toolCallId: ids.toolCallId, traceId: ids.traceId });
    log[level]({ phase: 'audit', audit: record }, message);
  }
  getAuditHooks(broker).record.call(record);
}

/** The one record for refusals that were only counted. */
function recordCounted(broker: Broker, counted: Counted): void {
  const reason = `${counted.count} more refusals since ${counted.since}, over the audit's budget, are counted here instead of recorded one by one`;
  const record: AuditRecord = {
    requestId: refusalId(broker, counted.origin),
    sessionId: broker.sessionId,
    origin: counted.origin,
    operation: 'suppressed',
    paths: [],
    verdict: 'deny',
    decision: 'deny',
    decidedBy: counted.decidedBy,
    reason,
    ok: false,
    error: { code: SANDBOX_REFUSED, message: reason },
    durationMs: 0,
    suppressed: { count: counted.count, since: counted.since, operations: counted.operations, peers: [...counted.peers] },
  };
  deliver(broker, record, `${counted.count} refusals counted`);
}

/** The audit hooks of a broker; created on first use so sinks may register before or after. */
export function getAuditHooks(broker: Broker): AuditHooks {
  let hooks = auditHooks.get(broker);
  if (!hooks) {
    const record = new SyncHook<[AuditRecord]>(['record']);
    // A sink that throws (a forwarder down, a full disk) must not silence the sinks after it.
    record.intercept({
      register(tap) {
        const deliver = tap.fn as (record: AuditRecord) => void;
        tap.fn = (entry: AuditRecord) => {
          try {
            deliver(entry);
          } catch (error) {
            broker.log.error({ phase: 'audit', sink: tap.name, err: error }, `audit sink ${tap.name} failed`);
          }
        };
        return tap;
      },
    });
    hooks = Object.freeze({ record });
    auditHooks.set(broker, hooks);
  }
  return hooks;
}

export const auditOptionsSchema = z.strictObject({
  /** Also log each record through the broker's logger (phase `audit`). */
  log: z.boolean().default(true),
  /** Time every tap of every request hook (costs a little per request). */
  traceTaps: z.boolean().default(false),
  /** How many refusals (of the kernel sandbox, of the socket) are recorded one by one. */
  refusals: refusalBudgetSchema.prefault({}),
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
    auditLogging.set(broker, this.#options.log);
    refusalBudgets.set(broker, this.#options.refusals);
    broker.hooks.close.tap(this.name, () => settleRefusals(broker));
    if (this.#options.traceTaps) this.#traceTaps(broker);
    broker.hooks.requestDone.tap({ name: this.name, stage: Stage.LAST }, (outcome, context) => {
      const level = outcome.ok ? 'info' : 'warn';
      // Asked of the broker's logger, so the request's child logger is only made for a line written.
      const logs = this.#options.log && broker.log.isLevelEnabled(level);
      // Nobody reads a record that is neither logged nor listened to: not built (most requests at level error).
      if (!logs && !hooks.record.isUsed()) return;
      const record = toRecord(outcome, context.state.get(TRACE) as Trace | undefined);
      if (logs) context.log[level]({ phase: 'audit', audit: record }, `${record.operation} ${record.verdict}`);
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

/** Field by field: Node 20's V8 pays a runtime call per field that follows a spread, and every request is audited. */
function auditPath(target: RequestTarget, normalisedPath: string | undefined): AuditRecord['paths'][number] {
  const entry = { role: target.role, path: target.path } as AuditRecord['paths'][number];
  if (normalisedPath !== undefined) entry.normalisedPath = normalisedPath;
  entry.access = target.access;
  return entry;
}

function toRecord(outcome: Outcome, taps: Trace | undefined): AuditRecord {
  const { request } = outcome;
  const resolved = new Map(outcome.targets.map((t) => [t.role, t.resolved]));
  const record: AuditRecord = {
    requestId: outcome.requestId,
    sessionId: request?.sessionId ?? '',
    origin: request?.origin ?? 'unknown',
    operation: request?.operation ?? 'unknown',
    paths: (request?.targets ?? []).map((t) => auditPath(t, resolved.get(t.role))),
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
