import { AsyncSeriesBailHook, AsyncSeriesHook, AsyncSeriesWaterfallHook, HookMap } from 'tapable';
import type { Logger } from './logger.js';
import type {
  BrokerRequest,
  Decision,
  Grant,
  HostOpResult,
  Outcome,
  RequestTarget,
  ResolvedTarget,
  TargetRole,
} from './schemas.js';
import type { Broker } from './broker.js';

/**
 * What the broker hands a caller that performs the change itself (the kernel supervisor)
 * besides its decision, as a plugin arranged it before the change.
 */
export interface Handover {
  /**
   * Move the file the change removes or replaces (an unlink's path, a rename's `to`) to
   * `into` instead of deleting it: a backup plugin that kept it whole by name.
   */
  aside?: { role: TargetRole; into: string };
}

/** Per-request context handed to every tap. */
export interface RequestContext {
  readonly requestId: string;
  readonly log: Logger;
  readonly broker: Broker;
  /** Scratch space for plugins to pass data along one request (key by a symbol you own). */
  readonly state: Map<symbol | string, unknown>;
  /** Set when the caller performs the change itself: what it is handed with an allow. */
  readonly handover?: Handover;
  /**
   * Set when the caller performs the change itself: `task` runs once it reports the change
   * done (or dropped, or the caller is gone), before any other change the broker's order
   * would hold back behind this one. A failing task is logged.
   */
  whenPerformed?(task: () => Promise<void>): void;
}

/** A target while resolve-path runs: plugins fill in the resolved forms. */
export type TargetDraft = RequestTarget & Partial<Omit<ResolvedTarget, keyof RequestTarget>>;

export interface Resolution {
  targets: TargetDraft[];
}

/** A request whose paths are resolved: what policy, backup and execution see. */
export interface ResolvedRequest {
  readonly request: BrokerRequest;
  readonly targets: readonly ResolvedTarget[];
}

/** One agent turn: the unit backups are grouped and committed by. */
export interface Turn {
  readonly id: string;
  readonly sessionId: string;
  readonly startedAt: string;
  message?: string;
  committedAt?: string;
  /** Facts plugins attach while committing (e.g. how many files were backed up). */
  readonly facts: Record<string, unknown>;
}

export interface ControlContext {
  readonly log: Logger;
  readonly broker: Broker;
}

export type ControlPayload = Record<string, unknown>;
export type ClientPayload = Record<string, unknown>;

export interface ClientContext {
  readonly log: Logger;
  readonly broker: Broker;
  /** Who sent it, when the transport knows (SO_PEERCRED). */
  readonly peer?: { pid: number; uid: number; gid: number };
}
export type ControlResult = { ok: boolean } & Record<string, unknown>;

export type RequestHook<R> = AsyncSeriesBailHook<[ResolvedRequest, Decision, RequestContext], R>;

/** A `prompt` the broker holds while someone decides: the request, its decision, and the target it is about. */
export interface ApprovalQuestion {
  readonly request: ResolvedRequest;
  readonly decision: Decision;
  readonly target: ResolvedTarget;
  /** 1 for the request's first question; more when its fresh run after a yes prompted again. */
  readonly round: number;
}

/** What a tap of `approve` says: yes lets the request run again with this prompt lifted. */
export interface ApprovalAnswer {
  readonly approved: boolean;
  /** Why, for the audit log and the program's refusal reason. */
  readonly reason?: string;
}

export interface BrokerHooks {
  /** A tap returns a denial to stop the request. */
  readonly validateSession: AsyncSeriesBailHook<[BrokerRequest, RequestContext], Decision | undefined>;
  /** Waterfall: each tap returns the resolution, with more of each target filled in. */
  readonly resolvePath: AsyncSeriesWaterfallHook<[Resolution, BrokerRequest, RequestContext]>;
  /**
   * Called once per target; the first stage with an opinion decides (its most restrictive
   * one), a prompt yields to a later denial, a malformed opinion fails the request
   * (policy-ballot.ts). No opinion at all → deny.
   */
  readonly evaluatePolicy: AsyncSeriesBailHook<[ResolvedTarget, ResolvedRequest, RequestContext], Decision | undefined>;
  /** Observes the combined decision before anything happens (approval, audit). */
  readonly decided: AsyncSeriesHook<[Decision, ResolvedRequest, RequestContext]>;
  /**
   * A `prompt`, held: the first tap with an answer decides, while the request waits outside
   * the broker's one-change-at-a-time order. A yes runs the request again from the start
   * (fresh paths, fresh policy), and the same prompt then counts as approved; anything it
   * newly prompts for is asked again. No tap or no answer: the prompt is a denial.
   */
  readonly approve: AsyncSeriesBailHook<[ApprovalQuestion, RequestContext], ApprovalAnswer | undefined>;
  /** Back up what the request is about to change; throwing denies the request. */
  readonly preModifyBackup: AsyncSeriesHook<[ResolvedRequest, Decision, RequestContext]>;
  /** For token requests: what lets the client proceed. No grant → deny. */
  readonly issueToken: RequestHook<Grant | undefined>;
  /** For host operations, one hook per operation name. No result → unsupported. */
  readonly executeHostOp: HookMap<RequestHook<HostOpResult | undefined>>;
  /** After every request, whatever its outcome. */
  readonly requestDone: AsyncSeriesHook<[Outcome, RequestContext]>;
  readonly turnStarted: AsyncSeriesHook<[Turn]>;
  readonly turnCommitting: AsyncSeriesHook<[Turn]>;
  readonly turnCommitted: AsyncSeriesHook<[Turn]>;
  /**
   * Commands clients may send besides host operations (e.g. a dispatcher announcing the
   * command line it is about to run), one hook per name. A tap answers; unanswered → unknown.
   */
  readonly clientCommand: HookMap<AsyncSeriesBailHook<[ClientPayload, ClientContext], ControlResult | undefined>>;
  /** Control commands from the broker's owner (never from the socket), one hook per name. */
  readonly control: HookMap<AsyncSeriesBailHook<[ControlPayload, ControlContext], ControlResult | undefined>>;
  readonly close: AsyncSeriesHook<[]>;
}

export function createHooks(): BrokerHooks {
  return Object.freeze({
    validateSession: new AsyncSeriesBailHook<[BrokerRequest, RequestContext], Decision | undefined>(
      ['request', 'context'],
      'validateSession',
    ),
    resolvePath: new AsyncSeriesWaterfallHook<[Resolution, BrokerRequest, RequestContext]>(
      ['resolution', 'request', 'context'],
      'resolvePath',
    ),
    evaluatePolicy: new AsyncSeriesBailHook<[ResolvedTarget, ResolvedRequest, RequestContext], Decision | undefined>(
      ['target', 'request', 'context'],
      'evaluatePolicy',
    ),
    decided: new AsyncSeriesHook<[Decision, ResolvedRequest, RequestContext]>(['decision', 'request', 'context'], 'decided'),
    approve: new AsyncSeriesBailHook<[ApprovalQuestion, RequestContext], ApprovalAnswer | undefined>(['question', 'context'], 'approve'),
    preModifyBackup: new AsyncSeriesHook<[ResolvedRequest, Decision, RequestContext]>(
      ['request', 'decision', 'context'],
      'preModifyBackup',
    ),
    issueToken: new AsyncSeriesBailHook<[ResolvedRequest, Decision, RequestContext], Grant | undefined>(
      ['request', 'decision', 'context'],
      'issueToken',
    ),
    executeHostOp: new HookMap(
      (key: string) =>
        new AsyncSeriesBailHook<[ResolvedRequest, Decision, RequestContext], HostOpResult | undefined>(
          ['request', 'decision', 'context'],
          `executeHostOp(${key})`,
        ),
      'executeHostOp',
    ),
    requestDone: new AsyncSeriesHook<[Outcome, RequestContext]>(['outcome', 'context'], 'requestDone'),
    turnStarted: new AsyncSeriesHook<[Turn]>(['turn'], 'turnStarted'),
    turnCommitting: new AsyncSeriesHook<[Turn]>(['turn'], 'turnCommitting'),
    turnCommitted: new AsyncSeriesHook<[Turn]>(['turn'], 'turnCommitted'),
    clientCommand: new HookMap(
      (key: string) =>
        new AsyncSeriesBailHook<[ClientPayload, ClientContext], ControlResult | undefined>(['payload', 'context'], `clientCommand(${key})`),
      'clientCommand',
    ),
    control: new HookMap(
      (key: string) =>
        new AsyncSeriesBailHook<[ControlPayload, ControlContext], ControlResult | undefined>(
          ['payload', 'context'],
          `control(${key})`,
        ),
      'control',
    ),
    close: new AsyncSeriesHook<[]>([], 'close'),
  });
}
