import { z } from 'zod';
import { ErrorCodes, hostOperationSchema, issueLines, type BrokerRequestInput, type Outcome, type Peer } from '../core/index.js';
import { operationTargets, TargetError } from '../requests/targets.js';

/**
 * The JSON host-operation protocol: one object per line with `command:
 * "HostFileOperation"`, answered by one object per line. Field names follow the
 * reference clients exactly; unknown extra fields are ignored for forward compatibility.
 */
export const HOST_FILE_OPERATION = 'HostFileOperation';

/** Control commands belong to the broker's owner; the socket refuses them by name. */
export const CONTROL_COMMANDS = new Set(['EnableModifyBackup', 'ModifyBackup', 'CommitModifyBackup', 'Shutdown']);

const optionalText = z.string().max(4096).optional();
const modeSchema = z.union([
  z.number().int().min(0).max(0o7777),
  z.string().regex(/^0?[0-7]{1,4}$/, 'mode must be octal digits').transform((value) => Number.parseInt(value, 8)),
]);

export const hostFileOperationSchema = z.object({
  id: z.union([z.string().max(256), z.number()]).optional(),
  command: z.literal(HOST_FILE_OPERATION),
  operation: hostOperationSchema,
  path: optionalText,
  from: optionalText,
  to: optionalText,
  sessionId: z.string().max(256),
  toolCallId: z.string().max(256).optional(),
  brokerTraceId: z.string().max(256).optional(),
  deleteMode: z.enum(['trash', 'unlink']).optional(),
  recursive: z.boolean().optional(),
  force: z.boolean().optional(),
  safeDeleteReportPath: optionalText,
  mode: modeSchema.optional(),
  symbolic: z.boolean().optional(),
});
export type HostFileOperationMessage = z.infer<typeof hostFileOperationSchema>;

export type JsonParse =
  | { ok: true; request: BrokerRequestInput; message: HostFileOperationMessage }
  | { ok: 'client-command'; command: string; payload: Record<string, unknown>; id?: string | number }
  | { ok: false; answer: JsonAnswer; command?: string };

export interface JsonAnswer {
  id?: string | number;
  ok: boolean;
  operation?: string;
  path?: string;
  normalisedPath?: string;
  decision?: string;
  to?: string;
  normalisedTo?: string;
  error?: string;
  errorCode?: string;
  errno?: string;
  trashedTo?: string;
}

function idOf(value: unknown): string | number | undefined {
  if (typeof value !== 'object' || value === null || !('id' in value)) return undefined;
  const id = (value as { id: unknown }).id;
  return typeof id === 'string' || typeof id === 'number' ? id : undefined;
}

function refusal(code: string, message: string, id?: string | number): JsonAnswer {
  return id === undefined ? { ok: false, decision: 'deny', error: message, errorCode: code } : { id, ok: false, decision: 'deny', error: message, errorCode: code };
}

export function parseJsonRequest(line: string, peer?: Peer): JsonParse {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch (error) {
    return { ok: false, answer: refusal(ErrorCodes.BAD_REQUEST, `malformed JSON: ${(error as Error).message}`) };
  }
  const id = idOf(value);
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { ok: false, answer: refusal(ErrorCodes.BAD_REQUEST, 'a request must be a JSON object', id) };
  }
  const command = (value as { command?: unknown }).command;
  if (typeof command === 'string' && CONTROL_COMMANDS.has(command)) {
    return { ok: false, answer: refusal(ErrorCodes.CONTROL_REFUSED, `${command} is not accepted on this socket`, id), command };
  }
  if (command !== HOST_FILE_OPERATION) {
    if (typeof command !== 'string' || command.length === 0 || command.length > 64) {
      return { ok: false, answer: refusal(ErrorCodes.UNKNOWN_COMMAND, `unknown command: ${String(command).slice(0, 64)}`, id) };
    }
    // Other commands belong to plugins (clientCommand hooks); the broker says if none knows it.
    const { command: _command, id: _id, ...payload } = value as Record<string, unknown>;
    return { ok: 'client-command', command, payload, ...(id === undefined ? {} : { id }) };
  }
  const parsed = hostFileOperationSchema.safeParse(value);
  if (!parsed.success) {
    const message = issueLines(parsed.error, 'request').join('; ');
    return { ok: false, answer: refusal(ErrorCodes.BAD_REQUEST, message, id), command: HOST_FILE_OPERATION };
  }
  const message = parsed.data;
  try {
    const targets = operationTargets(message.operation, message);
    // Field by field, not a literal of conditional spreads: on Node 20's V8 a spread followed
    // by more fields costs a runtime call per field, on every request.
    const options: NonNullable<BrokerRequestInput['options']> = {};
    if (message.deleteMode) options.deleteMode = message.deleteMode;
    if (message.recursive !== undefined) options.recursive = message.recursive;
    if (message.force !== undefined) options.force = message.force;
    if (message.safeDeleteReportPath) options.safeDeleteReportPath = message.safeDeleteReportPath;
    if (message.mode !== undefined) options.mode = message.mode;
    if (message.symbolic !== undefined) options.symbolic = message.symbolic;
    if (message.operation === 'link' && message.symbolic) options.linkTarget = message.from ?? message.path ?? '';
    // The broker's schema puts the fields in its own order, so clientId may come last here.
    const request: BrokerRequestInput = { origin: 'host-op', action: 'host-op', operation: message.operation, targets, sessionId: message.sessionId };
    if (id !== undefined) request.clientId = String(id);
    if (message.toolCallId) request.toolCallId = message.toolCallId;
    if (message.brokerTraceId) request.traceId = message.brokerTraceId;
    request.options = options;
    if (peer) request.peer = peer;
    return { ok: true, request, message };
  } catch (error) {
    if (error instanceof TargetError) return { ok: false, answer: refusal(ErrorCodes.BAD_REQUEST, error.message, id), command: HOST_FILE_OPERATION };
    throw error;
  }
}

export function formatJsonAnswer(message: HostFileOperationMessage, outcome: Outcome): JsonAnswer {
  const first = message.operation === 'link' && message.symbolic ? undefined : outcome.targets.find((t) => t.role !== 'to');
  const second = outcome.targets.find((t) => t.role === 'to');
  // No spread before the fields: Node 20's V8 would pay a runtime call for each field after it.
  const answer: JsonAnswer = message.id === undefined ? { ok: outcome.ok, operation: message.operation } : { id: message.id, ok: outcome.ok, operation: message.operation };
  const path = message.path ?? message.from;
  if (path !== undefined) answer.path = path;
  if (first) answer.normalisedPath = first.resolved;
  answer.decision = outcome.wireDecision;
  if (message.to !== undefined) answer.to = message.to;
  if (second) answer.normalisedTo = second.resolved;
  if (outcome.error) {
    answer.error = outcome.error.errno ? `${outcome.error.errno}: ${outcome.error.message}` : outcome.error.message;
    answer.errorCode = outcome.error.code;
    if (outcome.error.errno) answer.errno = outcome.error.errno;
  }
  if (outcome.result?.trashedTo) answer.trashedTo = outcome.result.trashedTo;
  return answer;
}
