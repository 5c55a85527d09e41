import { randomBytes } from 'node:crypto';
import { BrokerError, ErrorCodes, PluginError, toBrokerError, type ErrorCode } from './errors.js';
import {
  createHooks,
  type BrokerHooks,
  type ClientPayload,
  type ControlPayload,
  type ControlResult,
  type RequestContext,
  type ResolvedRequest,
  type Turn,
} from './hooks.js';
import { attributeErrors } from './intercept.js';
import { issueLines } from './issues.js';
import { silentLogger, type Logger } from './logger.js';
import type { BrokerPlugin } from './plugin.js';
import { closeBallot, countOpinions, openBallot, severityOf } from './policy-ballot.js';
import {
  brokerRequestSchema,
  resolvedTargetSchema,
  type BrokerRequest,
  type BrokerRequestInput,
  type Decision,
  type Grant,
  type HostOpResult,
  type Outcome,
  type OutcomeError,
  type Peer,
  type ResolvedTarget,
  type WireDecision,
} from './schemas.js';

export interface BrokerOptions {
  /** The session this broker serves; requests name it and turns belong to it. */
  sessionId: string;
  logger?: Logger;
  /**
   * How long one asynchronous evaluate-policy tap may take to give its opinion before
   * the request is denied, naming the plugin (default 60 s; 0: no limit).
   */
  policyTimeoutMs?: number;
}

/** The longest delay a Node timer keeps (a longer one fires at once). */
const MAX_TIMER_MS = 2 ** 31 - 1;

const NO_OPINION: Decision = { verdict: 'deny', reason: 'no policy plugin decided', source: 'core' };

export function isAllowed(decision: Decision): boolean {
  return decision.verdict === 'sandbox' || decision.verdict === 'grant-token';
}

/** Most restrictive first: deny > prompt > grant-token > sandbox (an unknown verdict counts as deny). */
export function combineDecisions(decisions: readonly Decision[]): Decision {
  let worst: Decision | undefined;
  for (const decision of decisions) {
    if (!worst || severityOf(decision.verdict) > severityOf(worst.verdict)) worst = decision;
  }
  return worst ?? NO_OPINION;
}

function newTurnId(): string {
  const stamp = new Date().toISOString().replace(/[-:]/g, '').replace('T', '-').slice(0, 15);
  return `${stamp}-${randomBytes(3).toString('hex')}`;
}

/**
 * The broker: one pipeline of hooks that every request runs through, whatever produced
 * it. It decides nothing itself; plugins do. When no plugin decides, the answer is deny.
 */
export class Broker {
  readonly hooks: BrokerHooks = createHooks();
  readonly sessionId: string;
  readonly log: Logger;
  readonly #plugins = new Map<string, BrokerPlugin>();
  #turn: Turn | undefined;
  #exclusive: Promise<unknown> = Promise.resolve();
  #sequence = 0;

  constructor(options: BrokerOptions) {
    if (!options.sessionId) throw new BrokerError(ErrorCodes.INVALID_OPTIONS, 'a broker needs a session id');
    this.sessionId = options.sessionId;
    this.log = options.logger ?? silentLogger();
    attributeErrors(this.hooks);
    const timeout = options.policyTimeoutMs;
    if (timeout !== undefined && !(Number.isInteger(timeout) && timeout >= 0 && timeout <= MAX_TIMER_MS)) {
      throw new BrokerError(ErrorCodes.INVALID_OPTIONS, `policyTimeoutMs must be a whole number of milliseconds from 0 to ${MAX_TIMER_MS}, got ${String(timeout)}`);
    }
    countOpinions(this.hooks, timeout);
  }

  use(...plugins: BrokerPlugin[]): this {
    for (const plugin of plugins) {
      if (this.#plugins.has(plugin.name)) {
        throw new BrokerError(ErrorCodes.INVALID_OPTIONS, `plugin ${plugin.name} is registered twice`);
      }
      this.#plugins.set(plugin.name, plugin);
      plugin.apply(this);
    }
    return this;
  }

  plugin<T extends BrokerPlugin>(name: string): T | undefined {
    return this.#plugins.get(name) as T | undefined;
  }

  get pluginNames(): string[] {
    return [...this.#plugins.keys()];
  }

  /** The open turn, if a request or `beginTurn` opened one. */
  get currentTurn(): Turn | undefined {
    return this.#turn;
  }

  async beginTurn(): Promise<Turn> {
    if (this.#turn) return this.#turn;
    const turn: Turn = { id: newTurnId(), sessionId: this.sessionId, startedAt: new Date().toISOString(), facts: {} };
    this.#turn = turn;
    await this.hooks.turnStarted.promise(turn);
    return turn;
  }

  /** Close the open turn with a message; nothing that modifies runs while it commits. */
  async commitTurn(message: string): Promise<Turn> {
    return this.#exclusively(async () => {
      const turn = await this.beginTurn();
      turn.message = message;
      await this.hooks.turnCommitting.promise(turn);
      turn.committedAt = new Date().toISOString();
      this.#turn = undefined;
      this.log.info({ phase: 'commit', turnId: turn.id, facts: turn.facts }, 'turn committed');
      await this.hooks.turnCommitted.promise(turn);
      return turn;
    });
  }

  async control(command: string, payload: ControlPayload = {}): Promise<ControlResult> {
    const hook = this.hooks.control.get(command);
    const context = { log: this.log.child({ phase: 'control', command }), broker: this };
    if (!hook?.isUsed()) {
      return { ok: false, error: `unknown control command: ${command}`, errorCode: ErrorCodes.UNKNOWN_COMMAND };
    }
    try {
      return (await hook.promise(payload, context)) ?? { ok: false, error: `${command} was not handled` };
    } catch (error) {
      const failure = toBrokerError(error);
      context.log.error({ err: failure }, 'control command failed');
      return { ok: false, error: failure.message, errorCode: failure.code };
    }
  }

  /**
   * A client command (not a control command): answered by the plugin that taps its name.
   * Plugins that act on files do so through `handle`, so policy and backup still apply.
   */
  async clientCommand(command: string, payload: ClientPayload = {}, peer?: Peer): Promise<ControlResult> {
    const hook = this.hooks.clientCommand.get(command);
    const context = { log: this.log.child({ phase: 'client-command', command }), broker: this, ...(peer ? { peer } : {}) };
    if (!hook?.isUsed()) {
      return { ok: false, error: `unknown command: ${command}`, errorCode: ErrorCodes.UNKNOWN_COMMAND };
    }
    try {
      return (await hook.promise(payload, context)) ?? { ok: false, error: `${command} was not handled`, errorCode: ErrorCodes.UNKNOWN_COMMAND };
    } catch (error) {
      const failure = toBrokerError(error);
      context.log.error({ err: failure }, 'client command failed');
      return { ok: false, error: failure.message, errorCode: failure.code };
    }
  }

  /**
   * Run one request through the pipeline. Never throws: failures are deny outcomes.
   * Requests that modify run one at a time. `holdUntil` is for a caller that makes the
   * change itself after the answer (the sandbox's supervisor): no other modifying
   * request starts before it settles, so the names this one checked stay as checked.
   */
  async handle(input: BrokerRequestInput, options: { holdUntil?: Promise<void> } = {}): Promise<Outcome> {
    const started = process.hrtime.bigint();
    const requestId = `r${++this.#sequence}`;
    const parsed = brokerRequestSchema.safeParse(input);
    const request = parsed.success ? parsed.data : undefined;
    const context = new Context(requestId, this, request);
    if (!parsed.success) {
      const message = issueLines(parsed.error, 'request').join('; ');
      const decision: Decision = { verdict: 'deny', reason: message, source: 'core' };
      return this.#finish(context, started, undefined, [], decision, failure(ErrorCodes.BAD_REQUEST, message));
    }
    const valid = parsed.data;
    const modifies = valid.targets.some((target) => target.access !== 'read');
    const run = () => this.#run(valid, context, started);
    return modifies ? this.#exclusively(run, options.holdUntil) : run();
  }

  async close(): Promise<void> {
    await this.hooks.close.promise();
  }

  #exclusively<T>(task: () => Promise<T>, holdUntil?: Promise<void>): Promise<T> {
    const result = this.#exclusive.then(task, task);
    const done = result.catch(() => undefined);
    this.#exclusive = holdUntil ? done.then(() => holdUntil).catch(() => undefined) : done;
    return result;
  }

  async #run(request: BrokerRequest, context: RequestContext, started: bigint): Promise<Outcome> {
    const hooks = this.hooks;
    let targets: ResolvedTarget[] = [];
    let decision: Decision = NO_OPINION;
    let outcome: Omit<Outcome, 'durationMs' | 'requestId' | 'request' | 'targets' | 'decision'>;
    try {
      await this.beginTurn();
      const denial = await hooks.validateSession.promise(request, context);
      if (denial) {
        decision = Object.assign({}, denial, { verdict: 'deny' as const });
        outcome = failure(ErrorCodes.SESSION_MISMATCH, denial.reason ?? 'session rejected');
      } else {
        targets = await this.#resolve(request, context);
        const resolved: ResolvedRequest = { request, targets };
        decision = await this.#decide(resolved, context);
        await hooks.decided.promise(decision, resolved, context);
        if (!isAllowed(decision)) {
          const code = decision.verdict === 'prompt' ? ErrorCodes.APPROVAL_REQUIRED : ErrorCodes.POLICY_DENIED;
          outcome = failure(code, decision.reason ?? `policy answered ${decision.verdict}`);
        } else {
          outcome = await this.#proceed(resolved, decision, context);
        }
      }
    } catch (error) {
      outcome = failureFrom(error, ErrorCodes.PLUGIN_FAILED);
    }
    return this.#finish(context, started, request, targets, decision, outcome);
  }

  async #finish(
    context: RequestContext,
    started: bigint,
    request: BrokerRequest | undefined,
    targets: ResolvedTarget[],
    decision: Decision,
    outcome: Omit<Outcome, 'durationMs' | 'requestId' | 'request' | 'targets' | 'decision'>,
  ): Promise<Outcome> {
    // Field by field: Node 20's V8 makes a literal that spreads an object and goes on
    // with more fields pay a runtime call per field (≈ 1 µs each), on every request.
    const done: Outcome = { requestId: context.requestId, request, targets, decision, ok: outcome.ok, wireDecision: outcome.wireDecision, durationMs: 0 };
    if (outcome.grant !== undefined) done.grant = outcome.grant;
    if (outcome.result !== undefined) done.result = outcome.result;
    if (outcome.error !== undefined) done.error = outcome.error;
    done.durationMs = Number(process.hrtime.bigint() - started) / 1e6;
    try {
      await this.hooks.requestDone.promise(done, context);
    } catch (error) {
      context.log.error({ phase: 'broker', err: error }, 'a requestDone tap failed');
    }
    return done;
  }

  async #resolve(request: BrokerRequest, context: RequestContext): Promise<ResolvedTarget[]> {
    const resolution = await this.hooks.resolvePath.promise({ targets: request.targets.map((t) => ({ ...t })) }, request, context);
    return resolution.targets.map((draft) => {
      const checked = resolvedTargetSchema.safeParse(draft);
      if (!checked.success) {
        throw new BrokerError(ErrorCodes.PATH_UNRESOLVED, `no plugin resolved ${draft.path}`, { cause: checked.error });
      }
      return checked.data;
    });
  }

  async #decide(resolved: ResolvedRequest, context: RequestContext): Promise<Decision> {
    const decisions: Decision[] = [];
    for (const target of resolved.targets) {
      openBallot(context);
      const bailed = await this.hooks.evaluatePolicy.promise(target, resolved, context);
      const decision = bailed ?? closeBallot(context) ?? NO_OPINION;
      decisions.push(Object.assign({}, decision, { targetRole: target.role }));
    }
    return combineDecisions(decisions);
  }

  async #proceed(resolved: ResolvedRequest, decision: Decision, context: RequestContext) {
    try {
      await this.hooks.preModifyBackup.promise(resolved, decision, context);
    } catch (error) {
      // A backup plugin's own code (too large, store unavailable) says more; anything else is BACKUP_FAILED.
      return failureFrom(error, ErrorCodes.BACKUP_FAILED);
    }
    const { request } = resolved;
    if (request.action === 'token') {
      const grant = await this.hooks.issueToken.promise(resolved, decision, context);
      if (!grant) return failure(ErrorCodes.NO_TOKEN, 'no plugin issued a token');
      return { ok: true, grant, wireDecision: wireDecisionOf(grant) };
    }
    if (request.action === 'host-op') {
      const hook = this.hooks.executeHostOp.get(request.operation);
      let result: HostOpResult | undefined;
      try {
        result = hook?.isUsed() ? await hook.promise(resolved, decision, context) : undefined;
      } catch (error) {
        return Object.assign(failureFrom(error, ErrorCodes.HOST_OP_FAILED), { wireDecision: 'host-op' as const });
      }
      if (!result) return failure(ErrorCodes.UNSUPPORTED_OPERATION, `no plugin performs ${request.operation}`);
      return { ok: true, result, wireDecision: 'host-op' as const };
    }
    return { ok: true, wireDecision: decision.verdict === 'grant-token' ? ('grant-token' as const) : ('sandbox' as const) };
  }
}

/**
 * A request's context. Its child logger is made on first use: most requests log nothing
 * at the usual levels, and a pino child per request cost more than some whole requests.
 */
class Context implements RequestContext {
  readonly state = new Map<symbol | string, unknown>();
  readonly #request: BrokerRequest | undefined;
  #log: Logger | undefined;

  constructor(
    readonly requestId: string,
    readonly broker: Broker,
    request: BrokerRequest | undefined,
  ) {
    this.#request = request;
  }

  get log(): Logger {
    this.#log ??= this.broker.log.child({ requestId: this.requestId, toolCallId: this.#request?.toolCallId, traceId: this.#request?.traceId });
    return this.#log;
  }
}

function wireDecisionOf(grant: Grant): WireDecision {
  return grant.kind === 'sandbox' ? 'sandbox' : 'grant-token';
}

function failure(code: ErrorCode, message: string, extra: Partial<OutcomeError> = {}) {
  return { ok: false, wireDecision: 'deny' as WireDecision, error: { code, message, ...extra } };
}

function failureFrom(error: unknown, fallback: ErrorCode) {
  const inner = toBrokerError(error, fallback);
  const extra: Partial<OutcomeError> = {};
  if (inner.errno) extra.errno = inner.errno;
  if (error instanceof PluginError) {
    extra.plugin = error.plugin;
    extra.hook = error.hook;
  }
  return failure(inner.code === ErrorCodes.PLUGIN_FAILED ? fallback : inner.code, inner.message, extra);
}
