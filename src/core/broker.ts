import { randomBytes } from 'node:crypto';
import { BrokerError, ErrorCodes, PluginError, toBrokerError, type ErrorCode } from './errors.js';
import {
  createHooks,
  type ApprovalAnswer,
  type ApprovalQuestion,
  type BrokerHooks,
  type ClientPayload,
  type ControlPayload,
  type ControlResult,
  type Handover,
  type RequestContext,
  type ResolvedRequest,
  type Turn,
} from './hooks.js';
import { attributeErrors } from './intercept.js';
import { ALL_PATHS, PathOrder, type OrderKeys } from './path-order.js';
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
const APPROVED: Decision = { verdict: 'grant-token', reason: 'approved while the request waited', source: 'approval' };
/** Questions one request may put before it is refused: each yes runs it again, and a run may prompt anew. */
const MAX_APPROVAL_ROUNDS = 8;

type AttemptOutcome = Omit<Outcome, 'durationMs' | 'requestId' | 'request' | 'targets' | 'decision'>;

/** One run of a request through the pipeline, before `requestDone`. */
interface Attempt {
  targets: ResolvedTarget[];
  decision: Decision;
  outcome: AttemptOutcome;
  /** Set when the decision was a prompt: what to ask about. */
  prompt?: Omit<ApprovalQuestion, 'round'>;
  /** Set when the paths resolved elsewhere than their names say: the request runs again holding every path. */
  rerunAlone?: true;
}

/**
 * The names a modifying request holds while it runs (path-order.ts): its targets' paths.
 * A name whose text does not say where it leads (`..`, /proc) makes it hold every path;
 * so does one that turns out to resolve elsewhere (a symlink), found after resolve-path.
 */
function orderKeysOf(request: BrokerRequest): OrderKeys {
  const keys: string[] = [];
  for (const target of request.targets) {
    const key = target.path.length > 1 ? target.path.replace(/\/+$/, '') : target.path;
    if (/(^|\/)\.\.?(\/|$)|\/\//.test(key) || key === '/proc' || key.startsWith('/proc/')) return ALL_PATHS;
    keys.push(key);
  }
  return keys;
}

/** Whether every resolved target is one of the names the request holds, or lies below one. */
function heldAsResolved(keys: OrderKeys, targets: readonly ResolvedTarget[]): boolean {
  if (keys === ALL_PATHS) return true;
  return targets.every((t) => keys.some((key) => t.resolved === key || t.resolved.startsWith(key === '/' ? '/' : `${key}/`)));
}

/**
 * What a prompt is about: the path as resolved, the access, the operation and, for a
 * rename, copy or hard link, what kind of thing its source is. A yes covers this and no more.
 */
export function promptSubject(subject: { normalisedPath: string; access: string; operation: string; sourceKind?: string | undefined }): string {
  return `${subject.normalisedPath}\0${subject.access}\0${subject.operation}\0${subject.sourceKind ?? ''}`;
}

function approvalKeyOf(target: ResolvedTarget, resolved: ResolvedRequest, decision: Decision): string {
  const sourceKind = resolved.targets.find((t) => t.role === 'from')?.kind;
  const subject = promptSubject({ normalisedPath: target.resolved, access: target.access, operation: resolved.request.operation, sourceKind });
  return `${subject}\0${decision.source ?? ''}\0${decision.reason ?? ''}`;
}

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
  readonly #order = new PathOrder();
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
    return this.#order.run(ALL_PATHS, async () => {
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
   * Requests that modify run in order per path (path-order.ts): one that names a path
   * another is changing, or a directory above it, waits for it; others run at once.
   * `holdUntil` is for a caller that makes the change itself after the answer (the
   * sandbox's supervisor): when the request is allowed, no modifying request on its
   * names starts before it settles, so the names this one checked stay as checked. A
   * `prompt` is put to the `approve` hook outside that order (other requests go on
   * meanwhile); after a yes the request runs again from the start.
   */
  async handle(input: BrokerRequestInput, options: { holdUntil?: Promise<void> } = {}): Promise<Outcome> {
    const started = process.hrtime.bigint();
    const requestId = `r${++this.#sequence}`;
    const parsed = brokerRequestSchema.safeParse(input);
    const request = parsed.success ? parsed.data : undefined;
    const context = new Context(requestId, this, request, options.holdUntil !== undefined);
    if (!parsed.success) {
      const message = issueLines(parsed.error, 'request').join('; ');
      const decision: Decision = { verdict: 'deny', reason: message, source: 'core' };
      return this.#finish(context, started, undefined, [], decision, failure(ErrorCodes.BAD_REQUEST, message));
    }
    const valid = parsed.data;
    const modifies = valid.targets.some((target) => target.access !== 'read');
    const approved = new Set<string>();
    const keys = modifies ? orderKeysOf(valid) : ALL_PATHS;
    // After an allow, the changes behind this one wait until its caller is done with it and
    // what plugins asked to run then has run.
    const holdAfter = (done: Attempt) => (options.holdUntil && done.outcome.ok ? context.afterPerformed(options.holdUntil) : undefined);
    const ordered = async () => {
      const first = await this.#order.run(keys, () => this.#attempt(valid, context, approved, keys), holdAfter);
      return first.rerunAlone ? this.#order.run(ALL_PATHS, () => this.#attempt(valid, context, approved, ALL_PATHS), holdAfter) : first;
    };
    const run = () => (modifies ? ordered() : this.#attempt(valid, context, approved, ALL_PATHS));
    let result = await run();
    for (let round = 1; result.prompt && round <= MAX_APPROVAL_ROUNDS; round += 1) {
      const answer = await this.#ask(result.prompt, round, context);
      if (!answer?.approved) {
        if (answer?.reason) result.outcome = failure(ErrorCodes.APPROVAL_REQUIRED, `${result.decision.reason ?? 'approval needed'}; ${answer.reason}`);
        break;
      }
      approved.add(approvalKeyOf(result.prompt.target, result.prompt.request, result.decision));
      result = await run();
    }
    return this.#finish(context, started, valid, result.targets, result.decision, result.outcome);
  }

  async close(): Promise<void> {
    await this.hooks.close.promise();
  }

  /** The approve hook's answer to a held prompt; a failing tap is a no. */
  async #ask(question: Omit<ApprovalQuestion, 'round'>, round: number, context: RequestContext): Promise<ApprovalAnswer | undefined> {
    if (!this.hooks.approve.isUsed()) return undefined;
    try {
      return await this.hooks.approve.promise(Object.assign({}, question, { round }), context);
    } catch (error) {
      context.log.error({ phase: 'approval', err: error }, 'an approve tap failed: not approved');
      return { approved: false, reason: `the approval failed (${toBrokerError(error).message})` };
    }
  }

  async #attempt(request: BrokerRequest, context: RequestContext, approved: ReadonlySet<string>, keys: OrderKeys): Promise<Attempt> {
    const hooks = this.hooks;
    let targets: ResolvedTarget[] = [];
    let decision: Decision = NO_OPINION;
    let prompt: Omit<ApprovalQuestion, 'round'> | undefined;
    let outcome: AttemptOutcome;
    try {
      await this.beginTurn();
      const denial = await hooks.validateSession.promise(request, context);
      if (denial) {
        decision = Object.assign({}, denial, { verdict: 'deny' as const });
        outcome = failure(ErrorCodes.SESSION_MISMATCH, denial.reason ?? 'session rejected');
      } else {
        targets = await this.#resolve(request, context);
        // Resolved elsewhere than its names say: another change could be on the same file under other names.
        if (!heldAsResolved(keys, targets)) return { targets, decision, outcome: failure(ErrorCodes.PLUGIN_FAILED, 'run again holding every path'), rerunAlone: true };
        const resolved: ResolvedRequest = { request, targets };
        decision = await this.#decide(resolved, context, approved);
        await hooks.decided.promise(decision, resolved, context);
        if (!isAllowed(decision)) {
          const code = decision.verdict === 'prompt' ? ErrorCodes.APPROVAL_REQUIRED : ErrorCodes.POLICY_DENIED;
          outcome = failure(code, decision.reason ?? `policy answered ${decision.verdict}`);
          const target = decision.verdict === 'prompt' ? (targets.find((t) => t.role === decision.targetRole) ?? targets[0]) : undefined;
          if (target) prompt = { request: resolved, decision, target };
        } else {
          outcome = await this.#proceed(resolved, decision, context);
        }
      }
    } catch (error) {
      outcome = failureFrom(error, ErrorCodes.PLUGIN_FAILED);
    }
    return prompt ? { targets, decision, outcome, prompt } : { targets, decision, outcome };
  }

  async #finish(
    context: RequestContext,
    started: bigint,
    request: BrokerRequest | undefined,
    targets: ResolvedTarget[],
    decision: Decision,
    outcome: AttemptOutcome,
  ): Promise<Outcome> {
    // Field by field: Node 20's V8 makes a literal that spreads an object and goes on
    // with more fields pay a runtime call per field (≈ 1 µs each), on every request.
    const done: Outcome = { requestId: context.requestId, request, targets, decision, ok: outcome.ok, wireDecision: outcome.wireDecision, durationMs: 0 };
    if (outcome.grant !== undefined) done.grant = outcome.grant;
    if (outcome.result !== undefined) done.result = outcome.result;
    if (outcome.error !== undefined) done.error = outcome.error;
    const handover = (context as Context).handover;
    if (outcome.ok && handover?.aside !== undefined) done.handover = { aside: handover.aside };
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

  async #decide(resolved: ResolvedRequest, context: RequestContext, approved: ReadonlySet<string>): Promise<Decision> {
    const decisions: Decision[] = [];
    for (const target of resolved.targets) {
      openBallot(context);
      const bailed = await this.hooks.evaluatePolicy.promise(target, resolved, context);
      let decision = bailed ?? closeBallot(context) ?? NO_OPINION;
      // A prompt about exactly what was approved for this request (the same path, access,
      // operation and source, for the same reason) is lifted; anything else is asked again:
      // a directory moved whole whose contents changed meanwhile gives another reason.
      if (decision.verdict === 'prompt' && approved.size > 0 && approved.has(approvalKeyOf(target, resolved, decision))) decision = APPROVED;
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
  readonly handover: Handover | undefined;
  readonly whenPerformed: ((task: () => Promise<void>) => void) | undefined;
  readonly #request: BrokerRequest | undefined;
  readonly #afterPerformed: Array<() => Promise<void>> = [];
  #log: Logger | undefined;

  constructor(
    readonly requestId: string,
    readonly broker: Broker,
    request: BrokerRequest | undefined,
    callerPerforms: boolean,
  ) {
    this.#request = request;
    if (callerPerforms) {
      this.handover = {};
      this.whenPerformed = (task) => void this.#afterPerformed.push(task);
    }
  }

  /** Settles once `performed` has and every task registered with whenPerformed has run, in order. */
  async afterPerformed(performed: Promise<void>): Promise<void> {
    await performed;
    for (const task of this.#afterPerformed.splice(0)) {
      await task().catch((error: unknown) => this.log.error({ phase: 'broker', err: error }, 'a task after the change failed'));
    }
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
