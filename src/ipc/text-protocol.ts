import type { BrokerRequestInput, Outcome, Peer } from '../core/index.js';
import { openTargets } from '../requests/targets.js';

/**
 * The text token protocol: `<class>\t<absolute-path>\t<session-id>\t<tool-call-id>\n`,
 * where the class ends in `.read` or `.read-write`; the answer is one line: a token,
 * `SANDBOX` or `DENY`. Its clients understand nothing else, so every failure is `DENY`.
 */
export const TEXT_SANDBOX = 'SANDBOX';
export const TEXT_DENY = 'DENY';

export type TextParse = { ok: true; request: BrokerRequestInput } | { ok: false; reason: string };

export function looksLikeTextRequest(line: string): boolean {
  return !line.startsWith('{') && line.includes('\t');
}

export function parseTextRequest(line: string, peer?: Peer): TextParse {
  const fields = line.split('\t');
  if (fields.length !== 4) return { ok: false, reason: `expected 4 tab-separated fields, got ${fields.length}` };
  const [tokenClass = '', path = '', sessionId = '', toolCallId = ''] = fields;
  let writes: boolean;
  if (tokenClass.endsWith('.read-write')) writes = true;
  else if (tokenClass.endsWith('.read')) writes = false;
  else return { ok: false, reason: 'the class must end in .read or .read-write' };
  if (!path.startsWith('/')) return { ok: false, reason: 'the path must be absolute' };
  return {
    ok: true,
    request: {
      origin: 'text-token',
      action: 'token',
      operation: 'open',
      targets: openTargets(path, writes),
      sessionId,
      ...(toolCallId ? { toolCallId } : {}),
      ...(peer ? { peer } : {}),
    },
  };
}

export function formatTextAnswer(outcome: Outcome): string {
  if (!outcome.ok || !outcome.grant) return TEXT_DENY;
  if (outcome.grant.kind === 'token') return outcome.grant.token;
  if (outcome.grant.kind === 'sandbox') return TEXT_SANDBOX;
  return TEXT_DENY;
}
