import type { PathKind } from '../core/index.js';
import { printable } from '../core/printable.js';
import type { ApprovalChoice, PromptBlock } from '../plugins/approval/index.js';
import { describeConnection, type ConnectionChoice } from '../plugins/network/index.js';
import type { KernelConnection } from '../sandbox/network-protocol.js';

const SOURCE_WORDS: Record<PathKind, string> = { file: 'a file', directory: 'a directory', symlink: 'a symlink', other: 'a special file', absent: 'a missing name' };

/**
 * What a question for approval is about, for a person: `ACCESS PATH by OPERATION [of
 * SOURCE] (reason)`, safe for one line (a yes covers that operation and source only). The
 * terminal's question and the MCP client's form say it alike.
 */
export function describeBlock(block: PromptBlock, withReason = true): string {
  const source = block.sourceKind === undefined ? '' : ` of ${SOURCE_WORDS[block.sourceKind]}`;
  const by = block.operation === block.access ? '' : ` by ${block.operation}${source}`;
  return printable(`${block.access} ${block.normalisedPath}${by}${withReason && block.reason ? ` (${block.reason})` : ''}`);
}

/** How far a yes reaches, in words. */
export function describeChoice(choice: ApprovalChoice): string {
  if (choice.scope === 'once') return 'yes, this change once';
  if (choice.scope === 'session') return 'yes, and this path for the rest of the session';
  const what = choice.repository ? `set up the new repository ${printable(choice.directory)} (hooks, config)` : `set up the new directory ${printable(choice.directory)}`;
  return `yes, and let this command ${what} ${choice.lasts === 'turn' ? 'until the turn ends' : 'for the rest of the session'}`;
}

/** What a held connection is, as a question's first line says it. */
export function connectionQuestion(connection: KernelConnection): string {
  const what = connection.kind === 'dns' ? 'to look up' : connection.kind === 'datagram' ? 'to send a datagram to' : 'to connect to';
  return `the command waits for approval ${what} ${printable(describeConnection(connection))}: it is not in network.allow`;
}

/** What a yes to a connection covers. */
export function describeConnectionChoice(choice: ConnectionChoice, rule: string): string {
  if (choice.scope === 'once') return 'yes, for this command';
  if (choice.scope === 'session') return `yes, and ${printable(rule)} for the rest of the session`;
  return `yes, and add ${printable(rule)} to network.allow in ${printable(choice.file)}`;
}
