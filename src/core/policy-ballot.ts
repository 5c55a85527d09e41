import { PluginError } from './errors.js';
import type { BrokerHooks, RequestContext } from './hooks.js';
import { decisionSchema, type Decision, type Verdict } from './schemas.js';

/**
 * How evaluate-policy's opinions add up to one decision per target.
 *
 * Taps run in stage order. The first stage where any tap has an opinion decides, and
 * within that stage the most restrictive opinion wins: two plugins at one stage never
 * depend on which was registered first. A `prompt` is held rather than final: the stages
 * after it still run, and when the first of them with an opinion denies, the answer is
 * that denial (a person's approval lifts a prompt, never another plugin's refusal);
 * otherwise the prompt stands. Every opinion is checked against the decision schema: a
 * malformed one fails the request and names the plugin, whatever the other targets say.
 *
 * The broker opens a ballot in the request's context before it asks about a target; the
 * taps' wrappers keep it. Without one (a caller running the hook itself) a tap's
 * opinion is still checked, and the hook's plain first-opinion-wins applies.
 */

const SEVERITY: Record<Verdict, number> = { sandbox: 0, 'grant-token': 1, prompt: 2, deny: 3 };
const BALLOT = Symbol('policy-ballot');
const HOOK = 'evaluatePolicy';

interface Ballot {
  /** The stage of `opinion`. */
  stage: number;
  /** The most restrictive opinion so far at `stage`. */
  opinion?: Decision;
  /** A prompt from an earlier stage, waiting for what the later stages say. */
  held?: Decision;
}

/** How restrictive a verdict is; one no schema would accept counts as a denial. */
export function severityOf(verdict: string): number {
  return SEVERITY[verdict as Verdict] ?? SEVERITY.deny;
}

export function openBallot(context: RequestContext): void {
  context.state.set(BALLOT, { stage: 0 } satisfies Ballot);
}

/** The decision once every tap has run without settling it; undefined when none had an opinion. */
export function closeBallot(context: RequestContext): Decision | undefined {
  const ballot = context.state.get(BALLOT) as Ballot | undefined;
  context.state.delete(BALLOT);
  if (!ballot) return undefined;
  return (ballot.opinion && settleStage(ballot)) ?? ballot.held;
}

/** The finished stage's opinion becomes the answer, or (a prompt) is held for the stages after it. */
function settleStage(ballot: Ballot): Decision | undefined {
  const opinion = ballot.opinion as Decision;
  ballot.opinion = undefined;
  if (ballot.held) return opinion.verdict === 'deny' ? opinion : ballot.held;
  if (opinion.verdict === 'prompt') {
    ballot.held = opinion;
    return undefined;
  }
  return opinion;
}

/** Before a tap at `stage` runs: the answer, if an earlier stage already settled it. */
function before(ballot: Ballot | undefined, stage: number): Decision | undefined {
  if (!ballot?.opinion || stage <= ballot.stage) return undefined;
  return settleStage(ballot);
}

/** After a tap: bail with a denial at once (nothing is more restrictive), else record and go on. */
function after(ballot: Ballot | undefined, stage: number, plugin: string, value: unknown): Decision | undefined {
  if (value === undefined) return undefined;
  const checked = decisionSchema.safeParse(value);
  if (!checked.success) {
    throw new PluginError(plugin, HOOK, new Error(`returned a malformed decision (${checked.error.issues[0]?.message ?? 'invalid'})`));
  }
  const decision = checked.data;
  if (!ballot) return decision;
  if (decision.verdict === 'deny') {
    ballot.opinion = undefined;
    return decision;
  }
  if (!ballot.opinion) {
    ballot.opinion = decision;
    ballot.stage = stage;
  } else if (SEVERITY[decision.verdict] > SEVERITY[ballot.opinion.verdict]) {
    ballot.opinion = decision;
  }
  return undefined;
}

type AnyFn = (...args: unknown[]) => unknown;
interface Tap {
  name: string;
  type: string;
  stage?: number;
  fn: AnyFn;
}

/** How long one evaluate-policy opinion may take by default (a tree check of a very large directory stays well inside it). */
export const DEFAULT_POLICY_TIMEOUT_MS = 60_000;

function lateError(plugin: string, timeoutMs: number): PluginError {
  return new PluginError(plugin, HOOK, new Error(`gave no opinion within ${timeoutMs} ms; the request is refused`));
}

/** `value`, or a PluginError once `timeoutMs` passed first (0: no limit). A late answer is dropped. */
function inTime(value: Promise<unknown>, plugin: string, timeoutMs: number): Promise<unknown> {
  if (timeoutMs <= 0) return value;
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(lateError(plugin, timeoutMs)), timeoutMs);
  });
  return Promise.race([value, late]).finally(() => clearTimeout(timer));
}

/**
 * Wrap every evaluate-policy tap, whichever way it was tapped, to keep the ballot. An
 * asynchronous tap that gives no opinion within `timeoutMs` fails the request (a denial
 * naming the plugin) instead of holding it, and every change after it, for good: a
 * policy plugin that asks a service which never answers must not hang the command.
 */
export function countOpinions(hooks: BrokerHooks, timeoutMs = DEFAULT_POLICY_TIMEOUT_MS): void {
  const hook = hooks.evaluatePolicy as unknown as { intercept(interceptor: { register(tap: Tap): Tap }): void };
  hook.intercept({
    register(tap: Tap) {
      const original = tap.fn;
      const stage = tap.stage ?? 0;
      const ballotOf = (args: unknown[]) => (args[2] as RequestContext).state.get(BALLOT) as Ballot | undefined;
      if (tap.type === 'async') {
        tap.fn = (...args: unknown[]) => {
          const callback = args.pop() as (error?: unknown, result?: unknown) => void;
          const ballot = ballotOf(args);
          const settled = before(ballot, stage);
          if (settled) return callback(null, settled);
          let answered = false;
          const timer = timeoutMs > 0 ? setTimeout(() => answer(lateError(tap.name, timeoutMs)), timeoutMs) : undefined;
          const answer = (error?: unknown, result?: unknown) => {
            if (answered) return undefined;
            answered = true;
            clearTimeout(timer);
            return callback(error, result);
          };
          return original(...args, (error?: unknown, value?: unknown) => {
            if (error) return answer(error);
            try {
              return answer(null, after(ballot, stage, tap.name, value));
            } catch (failure) {
              return answer(failure);
            }
          });
        };
      } else {
        tap.fn = (...args: unknown[]) => {
          const ballot = ballotOf(args);
          const settled = before(ballot, stage);
          if (settled) return tap.type === 'promise' ? Promise.resolve(settled) : settled;
          const value = original(...args);
          if (tap.type === 'promise') return inTime(value as Promise<unknown>, tap.name, timeoutMs).then((result) => after(ballot, stage, tap.name, result));
          return after(ballot, stage, tap.name, value);
        };
      }
      return tap;
    },
  });
}
