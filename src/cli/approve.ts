import { createInterface } from 'node:readline';
import type { ApprovalRequest } from '../agent/types.js';
import type { PathKind } from '../core/index.js';
import type { PromptBlock } from '../plugins/approval.js';
import { native } from '../native/loader.js';
import { printable, type Io } from './output.js';

const SOURCE_WORDS: Record<PathKind, string> = { file: 'a file', directory: 'a directory', symlink: 'a symlink', other: 'a special file', absent: 'a missing name' };

/** `ACCESS PATH by OPERATION [of SOURCE] (reason)`, safe for one terminal line: a yes covers that operation (and source) only. */
export function describeBlock(block: PromptBlock): string {
  const source = block.sourceKind === undefined ? '' : ` of ${SOURCE_WORDS[block.sourceKind]}`;
  const by = block.operation === block.access ? '' : ` by ${block.operation}${source}`;
  return printable(`${block.access} ${block.normalisedPath}${by}${block.reason ? ` (${block.reason})` : ''}`);
}

/** Whether a person is there to ask: stdin and stderr are both a terminal. */
export function terminalAvailable(): boolean {
  return process.stdin.isTTY === true && process.stderr.isTTY === true;
}

/** The question for a request, one line per thing to approve. */
export function approvalQuestion(request: ApprovalRequest): string[] {
  if (request.kind === 'unsandboxed') {
    return [
      `brokered-shell: the command asks to run without the sandbox: ${printable(request.command)}${request.reason ? ` (${printable(request.reason)})` : ''}`,
      'Run it without the sandbox? [y/N] ',
    ];
  }
  const again = request.round !== undefined && request.round > 1;
  return [
    again ? 'brokered-shell: the command ran again and now also needs approval for:' : 'brokered-shell: the command needs approval for:',
    ...request.blocks.map((block) => `  ${describeBlock(block)}`),
    'Approve for this session and run it again? [y/N] ',
  ];
}

/** Whether an answer approves: y or yes, any case; anything else (and no answer) is no. */
export function isYes(answer: string | undefined): boolean {
  return answer !== undefined && /^\s*y(es)?\s*$/i.test(answer);
}

/**
 * A command's leftover terminal state must not hide or garble the question: a soft reset
 * (DECSTR), the main screen, the ASCII character set, no scroll region, plain text, a
 * visible cursor, and the default colours and palette.
 */
export const TERMINAL_RESET = '\x1b[!p\x1b[?1049l\x1b(B\x0f\x1b[r\x1b[0m\x1b[?25h\x1b]110\x07\x1b]111\x07\x1b]104\x07';

/**
 * Ask on the terminal: the question on stderr, one line read from stdin. End of input,
 * Ctrl-C and SIGTERM count as no. What was typed before the question is dropped first
 * (`flush`, tcflush on the terminal): a `y` typed ahead, or drawn out by a command's own
 * fake question, must not answer this one. If it cannot be dropped, nothing is asked and
 * the answer is no.
 */
export function askOnTerminal(
  io: Io,
  request: ApprovalRequest,
  input: NodeJS.ReadableStream = process.stdin,
  flush: () => void = () => native().flushTerminalInput(0),
): Promise<boolean> {
  process.stderr.write(TERMINAL_RESET);
  try {
    flush();
  } catch (error) {
    io.err(`brokered-shell: cannot clear what was typed before the question (${error instanceof Error ? error.message : String(error)}); not asking, the answer is no`);
    return Promise.resolve(false);
  }
  const lines = approvalQuestion(request);
  const last = lines.pop() ?? '';
  for (const line of lines) io.err(line);
  process.stderr.write(last);
  return new Promise((resolve) => {
    const reader = createInterface({ input, terminal: false });
    let answered = false;
    // Ctrl-C (or a SIGTERM) at the question is a no: run then commits the turn and ends, as it says it does.
    const interrupted = () => {
      process.stderr.write('\n');
      reader.close();
    };
    process.once('SIGINT', interrupted);
    process.once('SIGTERM', interrupted);
    reader.once('line', (line) => {
      answered = true;
      reader.close();
      resolve(isYes(line));
    });
    reader.once('close', () => {
      process.off('SIGINT', interrupted);
      process.off('SIGTERM', interrupted);
      if (!answered) resolve(false);
    });
  });
}
