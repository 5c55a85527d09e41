import path from 'node:path';
import { z } from 'zod';
import { Stage, type ApprovalAnswer, type ApprovalQuestion, type Broker, type BrokerPlugin, type RequestContext } from '../../core/index.js';
import { parseOptions } from '../options.js';
import { SessionGrantsPlugin } from '../session-grants.js';
import { BlockList, blockOf, type BlockFilter, type PromptBlock } from './blocks.js';
import { DirectoryScopes, NewDirectories } from './new-directories.js';

export const PLUGIN_NAME = 'approval';

/**
 * When a person is asked: `inline` holds the change while the approver decides (the
 * command waits at that call, and a yes lets it through as if nothing had been asked);
 * `after` refuses it, keeps a prompt block, and leaves asking (and a rerun) to the caller.
 */
export const approvalModeSchema = z.enum(['inline', 'after']);
export type ApprovalMode = z.infer<typeof approvalModeSchema>;

/** Five minutes: long enough to read a question, short enough that a forgotten one does not hold a command for good. */
export const DEFAULT_APPROVAL_TIMEOUT_MS = 300_000;

export const approvalOptionsSchema = z.strictObject({
  /** Bound on distinct blocks kept until the caller takes them (oldest dropped first). */
  maxBlocks: z.number().int().min(1).default(1000),
  mode: approvalModeSchema.default('inline'),
  /** How long an inline question waits for its answer before it is a no (0: no limit). */
  timeoutMs: z.number().int().min(0).max(2 ** 31 - 1).default(DEFAULT_APPROVAL_TIMEOUT_MS),
});
export type ApprovalOptions = z.input<typeof approvalOptionsSchema>;

/** What a yes may cover. `once`: this change; `session`: this path, access and operation from now on; `directory`: every change a prompt would hold inside a directory the command made. */
export type ApprovalChoice =
  | { readonly scope: 'once' }
  | { readonly scope: 'session' }
  | { readonly scope: 'directory'; readonly directory: string; readonly lasts: 'turn' | 'session'; readonly repository: boolean };

/** One question, as an approver sees it. */
export interface ApprovalPrompt {
  readonly block: PromptBlock;
  /** What a yes may cover, narrowest first. */
  readonly choices: readonly ApprovalChoice[];
  /** 1 for the request's first question; more when it prompted again after a yes. */
  readonly round: number;
  /** Aborted when the question times out: stop asking. */
  readonly signal: AbortSignal;
}

/** Answers one question: one of the offered choices (true: `once`), or no (false, undefined). */
export type PromptApprover = (prompt: ApprovalPrompt) => Promise<ApprovalChoice | boolean | undefined> | ApprovalChoice | boolean | undefined;

/** One question that was put, and what became of it. */
export interface AskedQuestion {
  readonly block: PromptBlock;
  readonly choice: ApprovalChoice | undefined;
  /** Why it was not approved: refused, timed out, the approver failed, nobody to ask. */
  readonly refusal?: string;
  /** Answered by an earlier yes to a directory: nobody was asked. */
  readonly byScope?: string;
}

/**
 * Prompts, held or recorded. In `inline` mode (the default) it answers the broker's
 * `approve` hook: a change inside a directory the person let this command set up passes
 * at once; anything else is put to the approver, one question at a time, a no after
 * `timeoutMs`; a yes for the session becomes a session grant (SessionGrantsPlugin), a yes
 * to a directory a scope of its own. What is refused, or has nobody to ask, is kept as a
 * prompt block. In `after` mode every prompt is refused and kept as a block for the
 * caller, who asks and runs the command again.
 */
export class ApprovalPlugin implements BrokerPlugin {
  static readonly PLUGIN_NAME = PLUGIN_NAME;
  readonly name = PLUGIN_NAME;
  readonly options: z.infer<typeof approvalOptionsSchema>;
  readonly #blocks: BlockList;
  readonly #asked: AskedQuestion[] = [];
  readonly #newDirectories = new NewDirectories();
  readonly #scopes = new DirectoryScopes();
  #approver: PromptApprover | undefined;
  #queue: Promise<unknown> = Promise.resolve();
  #broker: Broker | undefined;

  constructor(options: ApprovalOptions = {}) {
    this.options = parseOptions(this.name, approvalOptionsSchema, options);
    this.#blocks = new BlockList(this.options.maxBlocks);
  }

  /** Who answers inline questions (without one, every prompt is refused and kept as a block). */
  setApprover(approver: PromptApprover | undefined): void {
    this.#approver = approver;
  }

  apply(broker: Broker): void {
    this.#broker = broker;
    if (this.options.mode === 'after') {
      broker.hooks.decided.tap({ name: this.name, stage: Stage.NORMAL }, (decision, resolved, context) => {
        if (decision.verdict !== 'prompt') return;
        const target = resolved.targets.find((t) => t.role === decision.targetRole) ?? resolved.targets[0];
        if (!target) return;
        this.#blocks.add(blockOf({ request: resolved, decision, target }));
        context.log.info({ phase: 'approval', path: target.path, normalisedPath: target.resolved, access: target.access }, 'approval needed; request denied for now');
      });
      return;
    }
    broker.hooks.approve.tapPromise({ name: this.name, stage: Stage.NORMAL }, (question, context) => this.#answer(question, context));
    broker.hooks.requestDone.tap({ name: this.name, stage: Stage.NORMAL }, (outcome) => this.#newDirectories.observe(outcome));
    broker.hooks.turnCommitted.tap(this.name, () => {
      this.#newDirectories.clear();
      this.#scopes.endTurn();
    });
  }

  /**
   * Runs `ask` in the queue of questions, after the one being answered: a plugin that asks
   * a person about something else than a path (NetworkPlugin: a connection) puts its
   * questions in the same line, so two never share the terminal.
   */
  oneAtATime<T>(ask: () => Promise<T>): Promise<T> {
    const turn = this.#queue.then(ask);
    this.#queue = turn.catch(() => undefined);
    return turn;
  }

  /** The blocks kept so far (optionally of one tool call), merged per path, access and operation. */
  blocks(filter: BlockFilter = {}): PromptBlock[] {
    return this.#blocks.list(filter);
  }

  /** Return and forget the blocks matching the filter, for a caller about to ask a person or report them. */
  takeBlocks(filter: BlockFilter = {}): PromptBlock[] {
    return this.#blocks.take(filter);
  }

  /** Return and forget the inline questions put so far (optionally of one tool call), oldest first. */
  takeAsked(filter: BlockFilter = {}): AskedQuestion[] {
    const taken: AskedQuestion[] = [];
    for (let i = 0; i < this.#asked.length; ) {
      const asked = this.#asked[i] as AskedQuestion;
      if (!filter.toolCallId || asked.block.toolCallIds.includes(filter.toolCallId)) {
        taken.push(asked);
        this.#asked.splice(i, 1);
      } else i += 1;
    }
    return taken;
  }

  async #answer(question: ApprovalQuestion, context: RequestContext): Promise<ApprovalAnswer> {
    const block = blockOf(question);
    const scoped = this.#scopeFor(block.normalisedPath);
    if (scoped) return this.#record({ block, choice: { scope: 'once' }, byScope: scoped }, context);
    const approver = this.#approver;
    if (!approver) return this.#record({ block, choice: undefined, refusal: 'nobody could be asked' }, context);
    // One question at a time: a person answers them in turn, and an answer may cover the next.
    const turn = this.#queue.then(async () => {
      const coveredNow = this.#scopeFor(block.normalisedPath);
      if (coveredNow) return { block, choice: { scope: 'once' } as const, byScope: coveredNow };
      return this.#ask(approver, block, question);
    });
    this.#queue = turn.catch(() => undefined);
    return this.#record(await turn, context);
  }

  async #ask(approver: PromptApprover, block: PromptBlock, question: ApprovalQuestion): Promise<AskedQuestion> {
    const choices = this.#choicesFor(block, question);
    const controller = new AbortController();
    const timeoutMs = this.options.timeoutMs;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      if (timeoutMs > 0) timer = setTimeout(() => resolve('timeout'), timeoutMs);
    });
    try {
      const answer = await Promise.race([Promise.resolve(approver({ block, choices, round: question.round, signal: controller.signal })), timedOut]);
      if (answer === 'timeout') {
        controller.abort();
        return { block, choice: undefined, refusal: `no answer within ${Math.round(timeoutMs / 1000)} s` };
      }
      const choice = answer === true ? choices[0] : typeof answer === 'object' && answer !== null ? choices.find((offered) => sameChoice(offered, answer)) : undefined;
      if (!choice) return { block, choice: undefined, refusal: answer === false || answer === undefined ? 'not approved' : 'the answer was none of the choices offered' };
      this.#grant(block, choice);
      return { block, choice };
    } catch (error) {
      controller.abort();
      return { block, choice: undefined, refusal: `the approver failed (${error instanceof Error ? error.message : String(error)})` };
    } finally {
      if (timer) clearTimeout(timer);
    }
  }

  /** Once and for the session always; a directory the command made in this turn, where the change lies in one (or makes it). */
  #choicesFor(block: PromptBlock, question: ApprovalQuestion): ApprovalChoice[] {
    const choices: ApprovalChoice[] = [{ scope: 'once' }, { scope: 'session' }];
    const creating = question.request.request.operation === 'mkdir' && question.target.kind === 'absent';
    const directory = this.#newDirectories.outermostAround(block.normalisedPath, creating);
    if (directory) {
      const repository = path.posix.basename(directory) === '.git' || block.normalisedPath.includes('/.git/') || block.normalisedPath.endsWith('/.git');
      choices.push({ scope: 'directory', directory, lasts: 'turn', repository }, { scope: 'directory', directory, lasts: 'session', repository });
    }
    return choices;
  }

  #grant(block: PromptBlock, choice: ApprovalChoice): void {
    if (choice.scope === 'session') this.#broker?.plugin<SessionGrantsPlugin>(SessionGrantsPlugin.PLUGIN_NAME)?.grant([block]);
    if (choice.scope === 'directory') this.#scopes.add({ directory: choice.directory, lasts: choice.lasts });
  }

  /**
   * The approved directory `target` (a resolved path) lies in. What the command moves or
   * links in from elsewhere is covered like what it writes there: it could write the same
   * bytes. The old place is judged on its own (the rename's source, a link's target), and
   * a symlink in the directory is followed: a write through it is judged where it lands.
   */
  #scopeFor(target: string): string | undefined {
    return this.#scopes.covering(target)?.directory;
  }

  #record(asked: AskedQuestion, context: RequestContext): ApprovalAnswer {
    // Bounded like the blocks: a broker whose owner never takes them (serve) keeps the newest.
    if (this.#asked.length >= this.options.maxBlocks) this.#asked.shift();
    this.#asked.push(asked);
    const { block } = asked;
    const fields = { phase: 'approval', path: block.path, normalisedPath: block.normalisedPath, access: block.access, operation: block.operation };
    if (asked.choice) {
      context.log.info({ ...fields, scope: asked.choice.scope, byScope: asked.byScope }, 'approved while the request waited');
      return { approved: true };
    }
    this.#blocks.add(block);
    context.log.info({ ...fields, refusal: asked.refusal }, 'not approved; request denied');
    return asked.refusal ? { approved: false, reason: asked.refusal } : { approved: false };
  }
}

function sameChoice(offered: ApprovalChoice, answer: ApprovalChoice): boolean {
  if (offered.scope !== answer.scope) return false;
  if (offered.scope !== 'directory' || answer.scope !== 'directory') return true;
  return offered.directory === answer.directory && offered.lasts === answer.lasts;
}

