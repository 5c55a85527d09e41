import type { ApprovalChoice } from '../plugins/approval/index.js';
import type { Refusal } from './refusals.js';
import { turnSummary, type TurnSummary } from './turn-summary.js';
import type { EndTurnResult, ExecuteResult, ExecutionMode } from './types.js';

/** One question the policy put to a person while the command ran, and its answer. */
export interface PromptReport {
  access: string;
  path: string;
  operation: string;
  /** Why the policy asks (a protected file, a rule's reason). */
  reason: string | null;
  approved: boolean;
  /** How far a yes reached: this change once, the path for the session, or a directory the command made. */
  scope?: ApprovalChoice['scope'];
  /** Why it was not approved: a no, no answer in time, nobody to ask. */
  refusal?: string;
  /** Answered by an earlier yes to a directory, without a question. */
  coveredBy?: string;
}

/**
 * One command run as one turn, for a program: what `run --json` prints and the MCP
 * server's `run` tool returns. The command's own output is captured in `stdout` and
 * `stderr` (UTF-8; `truncated` when over the cap).
 */
export interface RunReport {
  /** The command's status (128+n for a signal; 126 when it could not start). */
  exitCode: number;
  signal: string | null;
  /** The turn the command ran in (null when it could not start). */
  turnId: string | null;
  /** The turn's end: files backed up, paths kept out of the backups, its summary line. */
  summary: TurnSummary | null;
  /** What the command was not let do, each with its reason (nothing was changed for these). */
  refusals: Refusal[];
  /** Denials past the listed ones, only counted. */
  unlistedRefusals: number;
  /** Each approval question put while the command ran, with its answer. */
  prompts: PromptReport[];
  stdout: string;
  stderr: string;
  truncated: { stdout: boolean; stderr: boolean };
  timedOut: boolean;
  /** Whether the command ran in the sandbox, through the broker (see `mode`). */
  sandboxed: boolean;
  mode: ExecutionMode | 'not-started';
  /** Why nothing could start (then `exitCode` is 126). */
  error?: string;
}

/** The prompts of a run: inline questions with their answers, or `approvals: "after"`'s blocks with the round's answer. */
function promptsOf(result: ExecuteResult): PromptReport[] {
  const approval = result.approval;
  if (!approval) return [];
  if (approval.questions) {
    return approval.questions.map((question) => ({
      access: question.block.access,
      path: question.block.normalisedPath,
      operation: question.block.operation,
      reason: question.block.reason ?? null,
      approved: question.choice !== undefined,
      ...(question.choice ? { scope: question.choice.scope } : {}),
      ...(question.refusal === undefined ? {} : { refusal: question.refusal }),
      ...(question.byScope === undefined ? {} : { coveredBy: question.byScope }),
    }));
  }
  const still = new Set(result.promptBlocks.map((block) => `${block.access} ${block.normalisedPath} ${block.operation}`));
  return approval.blocks.map((block) => {
    const approved = approval.asked && !still.has(`${block.access} ${block.normalisedPath} ${block.operation}`);
    return {
      access: block.access,
      path: block.normalisedPath,
      operation: block.operation,
      reason: block.reason ?? null,
      approved,
      ...(approved ? { scope: 'session' as const } : { refusal: approval.asked ? 'not approved' : 'nobody could be asked' }),
    };
  });
}

export function runReport(result: ExecuteResult, ended: EndTurnResult): RunReport {
  return {
    exitCode: result.exitCode,
    signal: result.signal,
    turnId: ended.turnId ?? result.turnId ?? null,
    summary: turnSummary(ended),
    refusals: result.refusals,
    unlistedRefusals: result.unlistedRefusals,
    prompts: promptsOf(result),
    stdout: result.stdout,
    stderr: result.stderr,
    truncated: result.truncated,
    timedOut: result.timedOut,
    sandboxed: result.sandboxed,
    mode: result.mode,
  };
}

/** The report of a command that could not start (nothing ran, nothing changed): status 126. */
export function notStartedReport(error: string): RunReport {
  return {
    exitCode: 126,
    signal: null,
    turnId: null,
    summary: null,
    refusals: [],
    unlistedRefusals: 0,
    prompts: [],
    stdout: '',
    stderr: '',
    truncated: { stdout: false, stderr: false },
    timedOut: false,
    sandboxed: false,
    mode: 'not-started',
    error,
  };
}
