import { createInterface } from 'node:readline';
import type { ApprovalRequest } from '../agent/types.js';
import type { ApprovalChoice } from '../plugins/approval/index.js';
import { connectionQuestion, describeBlock, describeChoice, describeConnectionChoice } from '../agent/approval-words.js';
import type { ConnectionChoice } from '../plugins/network/index.js';
import { native } from '../native/loader.js';

export { describeBlock };
import { printable, type Io } from './output.js';

/** Whether a person is there to ask: stdin and stderr are both a terminal. */
export function terminalAvailable(): boolean {
  return process.stdin.isTTY === true && process.stderr.isTTY === true;
}

/** The key a person types for each choice of an inline question. */
function keyOf(choice: ApprovalChoice): string {
  if (choice.scope === 'once') return 'y';
  if (choice.scope === 'session') return 's';
  return choice.lasts === 'turn' ? 'd' : 'D';
}

const CONNECTION_KEYS: Record<ConnectionChoice['scope'], string> = { once: 'y', session: 's', save: 'a' };


/** The question for a request: what it is about, then the choices; its last line ends with `[y/N…] `. */
export function approvalQuestion(request: ApprovalRequest): string[] {
  if (request.kind === 'connection') {
    const { choices } = request;
    const lines = [`brokered-shell: ${connectionQuestion(request.connection)}`];
    if (request.command) lines.push(`  command: ${printable(request.command)}`);
    for (const choice of choices) lines.push(`  ${CONNECTION_KEYS[choice.scope]}  ${describeConnectionChoice(choice, request.rule)}`);
    lines.push('  n  no (the default): the command gets "permission denied" there');
    lines.push(`Allow? [y/N${choices.filter((c) => c.scope !== 'once').map((c) => `/${CONNECTION_KEYS[c.scope]}`).join('')}] `);
    return lines;
  }
  if (request.kind === 'unsandboxed') {
    return [
      `brokered-shell: the command asks to run without the sandbox: ${printable(request.command)}${request.reason ? ` (${printable(request.reason)})` : ''}`,
      'Run it without the sandbox? [y/N] ',
    ];
  }
  if (request.kind === 'path') {
    const { block, choices } = request;
    const lines = [`brokered-shell: the command waits for approval: ${describeBlock(block, false)}`];
    if (block.reason) lines.push(`  why: ${printable(block.reason)}`);
    if (request.command) lines.push(`  command: ${printable(request.command)}`);
    for (const choice of choices) lines.push(`  ${keyOf(choice)}  ${describeChoice(choice)}`);
    lines.push('  n  no (the default): the command gets "permission denied" there');
    const others = choices.filter((choice) => choice.scope !== 'once').map(keyOf);
    lines.push(`Allow? [y/N${others.map((key) => `/${key}`).join('')}] `);
    return lines;
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

/** What a typed line answers to a request: a choice (inline), true (yes), or false. */
export function answerOf(request: ApprovalRequest, line: string | undefined): boolean | ApprovalChoice | ConnectionChoice {
  if (request.kind === 'connection') {
    if (isYes(line)) return request.choices[0] ?? false;
    const typed = line?.trim();
    return request.choices.find((choice) => choice.scope !== 'once' && CONNECTION_KEYS[choice.scope] === typed) ?? false;
  }
  if (request.kind !== 'path') return isYes(line);
  if (isYes(line)) return request.choices[0] ?? false;
  const typed = line?.trim();
  return request.choices.find((choice) => choice.scope !== 'once' && keyOf(choice) === typed) ?? false;
}

/**
 * A command's leftover terminal state must not hide or garble the question: the main
 * screen, no scroll region, the ASCII character set, plain text, a visible cursor, insert
 * mode off, line wrap on, the default colours and palette. Nothing here moves the cursor:
 * leaving the alternate screen by mode 47 restores no cursor, and the scroll region (whose
 * reset sends the cursor home) is reset between a save and a restore of the position, so
 * the question starts below what the command printed.
 */
export const TERMINAL_RESET = '\x1b[?47l\x1b7\x1b[r\x1b8\x1b(B\x0f\x1b[0m\x1b[?25h\x1b[4l\x1b[?7h\x1b]110\x07\x1b]111\x07\x1b]104\x07';

/**
 * Ask on the terminal: the question on stderr, on lines of its own, one line read from
 * stdin. End of input, Ctrl-C, SIGTERM and the request's signal (a timeout) count as no.
 * What was typed before the question is dropped first (`flush`, tcflush on the terminal):
 * a `y` typed ahead, or drawn out by a command's own fake question, must not answer this
 * one. If it cannot be dropped, nothing is asked and the answer is no.
 */
export function askOnTerminal(
  io: Io,
  request: ApprovalRequest,
  input: NodeJS.ReadableStream = process.stdin,
  flush: () => void = () => native().flushTerminalInput(0),
): Promise<boolean | ApprovalChoice | ConnectionChoice> {
  process.stderr.write(`${TERMINAL_RESET}\n`);
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
  const signal = request.kind === 'path' || request.kind === 'connection' ? request.signal : undefined;
  return new Promise((resolve) => {
    const reader = createInterface({ input, terminal: false });
    let answered = false;
    // Ctrl-C (or a SIGTERM) at the question is a no: run then commits the turn and ends, as it says it does.
    const interrupted = () => {
      process.stderr.write('\n');
      reader.close();
    };
    const timedOut = () => {
      io.err('');
      io.err('brokered-shell: no answer in time: refused');
      reader.close();
    };
    process.once('SIGINT', interrupted);
    process.once('SIGTERM', interrupted);
    signal?.addEventListener('abort', timedOut, { once: true });
    reader.once('line', (line) => {
      answered = true;
      reader.close();
      resolve(answerOf(request, line));
    });
    reader.once('close', () => {
      process.off('SIGINT', interrupted);
      process.off('SIGTERM', interrupted);
      signal?.removeEventListener('abort', timedOut);
      if (!answered) resolve(false);
    });
  });
}
