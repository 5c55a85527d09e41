import type { PathKind } from '../core/index.js';
import { printable } from '../core/printable.js';
import type { ApprovalChoice, PromptBlock } from '../plugins/approval/index.js';

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
