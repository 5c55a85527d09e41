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
  return { ...(id === undefined ? {} : { id }), ok: false, decision: 'deny', error: message, errorCode: code };
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
    const options = {
      ...(message.deleteMode ? { deleteMode: message.deleteMode } : {}),
      ...(message.recursive === undefined ? {} : { recursive: message.recursive }),
      ...(message.force === undefined ? {} : { force: message.force }),
      ...(message.safeDeleteReportPath ? { safeDeleteReportPath: message.safeDeleteReportPath } : {}),
      ...(message.mode === undefined ? {} : { mode: message.mode }),
      ...(message.symbolic === undefined ? {} : { symbolic: message.symbolic }),
      ...(message.operation === 'link' && message.symbolic ? { linkTarget: message.from ?? message.path ?? '' } : {}),
    };
    const request: BrokerRequestInput = {
      ...(id === undefined ? {} : { clientId: String(id) }),
      origin: 'host-op',
      action: 'host-op',
      operation: message.operation,
      targets,
      sessionId: message.sessionId,
      ...(message.toolCallId ? { toolCallId: message.toolCallId } : {}),
      ...(message.brokerTraceId ? { traceId: message.brokerTraceId } : {}),
      options,
      ...(peer ? { peer } : {}),
    };
    return { ok: true, request, message };
  } catch (error) {
    if (error instanceof TargetError) return { ok: false, answer: refusal(ErrorCodes.BAD_REQUEST, error.message, id), command: HOST_FILE_OPERATION };
    throw error;
  }
}

export function formatJsonAnswer(message: HostFileOperationMessage, outcome: Outcome): JsonAnswer {
  const first = message.operation === 'link' && message.symbolic ? undefined : outcome.targets.find((t) => t.role !== 'to');
  const second = outcome.targets.find((t) => t.role === 'to');
  const answer: JsonAnswer = {
    ...(message.id === undefined ? {} : { id: message.id }),
    ok: outcome.ok,
    operation: message.operation,
  };
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
