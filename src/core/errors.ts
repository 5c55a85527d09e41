/**
 * One catalog of stable error codes. Tests and clients match on `code`, never on
 * message text. Messages may change; codes may not.
 */
export const ErrorCodes = {
  BAD_REQUEST: 'BSH_BAD_REQUEST',
  LINE_TOO_LONG: 'BSH_LINE_TOO_LONG',
  UNKNOWN_COMMAND: 'BSH_UNKNOWN_COMMAND',
  CONTROL_REFUSED: 'BSH_CONTROL_REFUSED',
  SESSION_MISMATCH: 'BSH_SESSION_MISMATCH',
  PATH_UNRESOLVED: 'BSH_PATH_UNRESOLVED',
  PATH_NOT_FOUND: 'BSH_PATH_NOT_FOUND',
  POLICY_DENIED: 'BSH_POLICY_DENIED',
  APPROVAL_REQUIRED: 'BSH_APPROVAL_REQUIRED',
  BACKUP_FAILED: 'BSH_BACKUP_FAILED',
  BACKUP_TOO_LARGE: 'BSH_BACKUP_TOO_LARGE',
  NO_TOKEN: 'BSH_NO_TOKEN',
  UNSUPPORTED_OPERATION: 'BSH_UNSUPPORTED_OPERATION',
  HOST_OP_FAILED: 'BSH_HOST_OP_FAILED',
  PLUGIN_FAILED: 'BSH_PLUGIN_FAILED',
  INVALID_OPTIONS: 'BSH_INVALID_OPTIONS',
  STORE_UNAVAILABLE: 'BSH_STORE_UNAVAILABLE',
  TURN_NOT_FOUND: 'BSH_TURN_NOT_FOUND',
  RESTORE_CONFLICT: 'BSH_RESTORE_CONFLICT',
  NATIVE_UNAVAILABLE: 'BSH_NATIVE_UNAVAILABLE',
  BROKER_CLOSED: 'BSH_BROKER_CLOSED',
} as const;

export type ErrorCode = (typeof ErrorCodes)[keyof typeof ErrorCodes];

export interface BrokerErrorOptions {
  cause?: unknown;
  /** errno-style name (EXDEV, ENOENT, …) when the error comes from the file system. */
  errno?: string;
  details?: Record<string, unknown>;
}

export class BrokerError extends Error {
  readonly code: ErrorCode;
  readonly errno: string | undefined;
  readonly details: Record<string, unknown> | undefined;

  constructor(code: ErrorCode, message: string, options: BrokerErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'BrokerError';
    this.code = code;
    this.errno = options.errno;
    this.details = options.details;
  }
}

/** An error thrown inside a plugin's tap, wrapped with who threw it and where. */
export class PluginError extends BrokerError {
  readonly plugin: string;
  readonly hook: string;

  constructor(plugin: string, hook: string, cause: unknown) {
    const inner = cause instanceof BrokerError ? cause : undefined;
    const text = cause instanceof Error ? cause.message : String(cause);
    super(inner?.code ?? ErrorCodes.PLUGIN_FAILED, `${plugin} failed in ${hook}: ${text}`, {
      cause,
      errno: inner?.errno ?? errnoOf(cause),
      details: inner?.details,
    });
    this.name = 'PluginError';
    this.plugin = plugin;
    this.hook = hook;
  }
}

export function errnoOf(error: unknown): string | undefined {
  if (error instanceof BrokerError) return error.errno;
  if (typeof error === 'object' && error !== null && 'code' in error) {
    const code = (error as { code: unknown }).code;
    if (typeof code === 'string' && /^E[A-Z0-9]+$/.test(code)) return code;
  }
  return undefined;
}

/** The innermost BrokerError in a cause chain, if any: its code is the one to report. */
export function toBrokerError(error: unknown, fallback: ErrorCode = ErrorCodes.PLUGIN_FAILED): BrokerError {
  if (error instanceof BrokerError) return error;
  const message = error instanceof Error ? error.message : String(error);
  return new BrokerError(fallback, message, { cause: error, errno: errnoOf(error) });
}
