import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { ApprovalRequest, Approver } from '../agent/types.js';
import type { Logger } from '../core/index.js';
import { printable } from '../core/printable.js';
import type { ApprovalChoice } from '../plugins/approval/index.js';
import { connectionQuestion, describeBlock, describeChoice, describeConnectionChoice } from '../agent/approval-words.js';
import type { ConnectionChoice } from '../plugins/network/index.js';

/** What a question gets when the client cannot be asked: `--answer yes` or `no` (the default). */
export type UnaskedAnswer = 'yes' | 'no';

/** The answers a person picks from, by the key the elicitation form carries. */
interface Option {
  key: string;
  title: string;
  answer: boolean | ApprovalChoice | ConnectionChoice;
}

const capitalised = (text: string) => `${text.charAt(0).toUpperCase()}${text.slice(1)}`;

const keyOf = (choice: ApprovalChoice): string => (choice.scope === 'directory' ? `directory-${choice.lasts}` : choice.scope);

/** The question's text and its options, narrowest yes first, no last. */
function questionOf(request: ApprovalRequest): { message: string; options: Option[] } {
  const no: Option = { key: 'no', title: 'No: the command gets "permission denied" there', answer: false };
  if (request.kind === 'path') {
    const lines = [`The command waits for approval: ${describeBlock(request.block, false)}`];
    if (request.block.reason) lines.push(`Why: ${printable(request.block.reason)}`);
    if (request.command) lines.push(`Command: ${printable(request.command)}`);
    return { message: lines.join('\n'), options: [...request.choices.map((choice) => ({ key: keyOf(choice), title: capitalised(describeChoice(choice)), answer: choice })), no] };
  }
  if (request.kind === 'connection') {
    const lines = [capitalised(connectionQuestion(request.connection))];
    if (request.command) lines.push(`Command: ${printable(request.command)}`);
    const options = request.choices.map((choice) => ({ key: choice.scope, title: capitalised(describeConnectionChoice(choice, request.rule)), answer: choice }));
    return { message: lines.join('\n'), options: [...options, no] };
  }
  if (request.kind === 'paths') {
    const lines = ['The command needs approval for:', ...request.blocks.map((block) => `  ${describeBlock(block)}`)];
    return { message: lines.join('\n'), options: [{ key: 'session', title: 'Yes: approve these for the session and run the command again', answer: true }, no] };
  }
  return { message: `The command asks to run without the sandbox: ${printable(request.command)}`, options: [{ key: 'once', title: 'Yes, run it without the sandbox', answer: true }, no] };
}

/** What `--answer yes` approves, as `run --yes` does: a directory the command made for the turn, else the path for the session. */
function yesWithoutAsking(request: ApprovalRequest): boolean | ApprovalChoice | ConnectionChoice {
  if (request.kind === 'connection') return request.choices.find((choice) => choice.scope === 'session') ?? true;
  if (request.kind !== 'path') return true;
  return request.choices.find((choice) => choice.scope === 'directory' && choice.lasts === 'turn') ?? request.choices.find((choice) => choice.scope === 'session') ?? true;
}

/** Long enough for a person; the question's own signal ends it at `approvalTimeoutSeconds`. */
const ELICITATION_TIMEOUT_MS = 2 ** 31 - 1;

/**
 * An approver that asks the MCP client's user (elicitation: a form with one choice) where
 * the client says it can, and otherwise gives `unasked`. A decline, a cancel, an answer
 * outside the choices or a failed request is a no.
 */
export function elicitingApprover(server: Server, unasked: UnaskedAnswer, log: Logger): Approver {
  return async (request) => {
    if (server.getClientCapabilities()?.elicitation === undefined) return unasked === 'yes' ? yesWithoutAsking(request) : false;
    const { message, options } = questionOf(request);
    const signal = request.kind === 'path' ? request.signal : undefined;
    try {
      const result = await server.elicitInput(
        {
          mode: 'form',
          message,
          requestedSchema: {
            type: 'object',
            properties: { answer: { type: 'string', title: 'Allow?', enum: options.map((o) => o.key), enumNames: options.map((o) => o.title) } },
            required: ['answer'],
          },
        },
        { timeout: ELICITATION_TIMEOUT_MS, ...(signal ? { signal } : {}) },
      );
      if (result.action !== 'accept') return false;
      const picked = options.find((option) => option.key === result.content?.answer);
      return picked?.answer ?? false;
    } catch (error) {
      log.warn({ phase: 'approval', err: error }, 'the client could not be asked: not approved');
      return false;
    }
  };
}
