import type { BrokerRequestInput, Outcome, Peer } from '../core/index.js';
import { openTargets } from '../requests/targets.js';

/**
 * The text token protocol: `<class>\t<absolute-path>\t<session-id>\t<tool-call-id>\n`,
 * where the class ends in `.read` or `.read-write`; the answer is one line: a token,
 * `SANDBOX`, `FD` or `DENY`. Its clients understand nothing else, so every failure is `DENY`.
 */
export const TEXT_SANDBOX = 'SANDBOX';
export const TEXT_DENY = 'DENY';
/**
 * `FD`: the Linux counterpart of the reference's extension token. The broker opened the
 * file itself (a grant outside what the sandbox lets the client write) and the
 * descriptor travels with this line, attached (SCM_RIGHTS) to its first byte; the
 * client uses it instead of opening the path. A client written for the reference's
 * answers reads `FD` as a token it cannot use and its own open is refused as before —
 * but the broker has already backed the file up and, if it was missing, created it
 * empty. A client that reads with read(2) instead of recvmsg(2) never receives the fd
 * (the kernel closes it).
 */
export const TEXT_FD = 'FD';

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
  if (outcome.grant.kind === 'fd') return TEXT_FD;
  return TEXT_DENY;
}

/** The descriptor an `FD` answer carries, or undefined when the answer carries none. */
export function textAnswerFd(outcome: Outcome): number | undefined {
  return outcome.ok && outcome.grant?.kind === 'fd' ? outcome.grant.fd : undefined;
}
