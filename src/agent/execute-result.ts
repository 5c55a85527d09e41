import type { Outcome } from '../core/index.js';
import type { AskedQuestion } from '../plugins/approval/index.js';
import { promptRefusals, type DenialList, type Refusal } from './refusals.js';
import type { FinishedCommand } from './run-process.js';
import type { ExecuteResult } from './types.js';

/** The status of a command that was not run because leaving the sandbox was not approved. */
export const NOT_RUN_EXIT_CODE = 126;

/** A finished command's part of its result. */
export function outputOf(finished: FinishedCommand) {
  return {
    exitCode: finished.exitCode,
    signal: finished.signal,
    stdout: finished.stdout.toString('utf8'),
    stderr: finished.stderr.toString('utf8'),
    raw: { stdout: finished.stdout, stderr: finished.stderr },
    truncated: finished.truncated,
    timedOut: finished.timedOut,
  };
}

/**
 * A sandboxed call's refusals: its denials, then its prompt blocks with their answers.
 * Inline, each question says how it was refused; asked after the run (`approvals:
 * "after"`), a no covers every block of that round, and blocks left after approved rounds
 * still need approval.
 */
export function refusalsOf(denials: DenialList, result: Pick<ExecuteResult, 'promptBlocks' | 'approval'>): { refusals: Refusal[]; unlistedRefusals: number } {
  const { approval, promptBlocks } = result;
  const afterNo = approval && !approval.questions && approval.asked && !approval.approved;
  const questions: readonly AskedQuestion[] = approval?.questions ?? (afterNo ? promptBlocks.map((block) => ({ block, choice: undefined, refusal: 'not approved' })) : []);
  return { refusals: [...denials.listed, ...promptRefusals(promptBlocks, questions)], unlistedRefusals: denials.unlisted };
}

export function notRun(toolCallId: string, asked: boolean): ExecuteResult {
  const why = asked ? 'running it without the sandbox was not approved' : 'running it without the sandbox needs approval, and there is no approver';
  const stderr = Buffer.from(`brokered-shell: the command was not run: ${why}\n`);
  return {
    exitCode: NOT_RUN_EXIT_CODE,
    signal: null,
    stdout: '',
    stderr: stderr.toString('utf8'),
    raw: { stdout: Buffer.alloc(0), stderr },
    truncated: { stdout: false, stderr: false },
    timedOut: false,
    sandboxed: false,
    ran: false,
    mode: 'not-run',
    toolCallId,
    promptBlocks: [],
    refusals: [],
    unlistedRefusals: 0,
    backups: [],
  };
}

/** A guard's reason: the error's when it failed, else the decision's. */
export function reasonOf(outcome: Outcome): { reason?: string } {
  const reason = outcome.ok ? outcome.decision.reason : (outcome.error?.message ?? outcome.decision.reason);
  return reason === undefined ? {} : { reason };
}
