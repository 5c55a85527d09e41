import { createInterface } from 'node:readline';
import type { ApprovalRequest } from '../agent/types.js';
import type { PromptBlock } from '../plugins/approval.js';
import { printable, type Io } from './output.js';

/** `ACCESS PATH by OPERATION (reason)`, safe for one terminal line: a yes covers that operation only. */
export function describeBlock(block: PromptBlock): string {
  const by = block.operation === block.access ? '' : ` by ${block.operation}`;
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
 * Ask on the terminal: the question on stderr, one line read from stdin. End of input
 * counts as no.
 */
export function askOnTerminal(io: Io, request: ApprovalRequest, input: NodeJS.ReadableStream = process.stdin): Promise<boolean> {
  const lines = approvalQuestion(request);
  const last = lines.pop() ?? '';
  for (const line of lines) io.err(line);
  process.stderr.write(last);
  return new Promise((resolve) => {
    const reader = createInterface({ input, terminal: false });
    let answered = false;
    reader.once('line', (line) => {
      answered = true;
      reader.close();
      resolve(isYes(line));
    });
    reader.once('close', () => {
      if (!answered) resolve(false);
    });
  });
}
