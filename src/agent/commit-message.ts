/** Longest commit message made from a user's message, ellipsis included. */
export const COMMIT_MESSAGE_MAX = 72;
/** The message of a turn whose user message says nothing. */
export const EMPTY_COMMIT_MESSAGE = '(no message)';

/**
 * A short commit message from the user's message: its first non-blank line, whitespace
 * collapsed, at most 72 characters (cut at a character boundary, ending in "…").
 */
export function commitMessageFrom(userMessage: string): string {
  const line = userMessage
    .split(/\r\n|\r|\n/)
    .map((text) => text.replace(/\s+/g, ' ').trim())
    .find((text) => text !== '');
  if (line === undefined) return EMPTY_COMMIT_MESSAGE;
  const chars = [...line];
  if (chars.length <= COMMIT_MESSAGE_MAX) return line;
  return `${chars.slice(0, COMMIT_MESSAGE_MAX - 1).join('').trimEnd()}…`;
}
