import { BrokerError, ErrorCodes, errnoOf } from '../core/errors.js';

/**
 * Turns a file-system failure into a HOST_OP_FAILED BrokerError that keeps the errno,
 * so callers can match on codes. A BrokerError passes through unchanged: an injected
 * `rename` may already speak the project's error language.
 */
export function fsFailure(message: string, cause: unknown, details?: Record<string, unknown>): BrokerError {
  if (cause instanceof BrokerError) return cause;
  const reason = cause instanceof Error ? cause.message : String(cause);
  return new BrokerError(ErrorCodes.HOST_OP_FAILED, `${message}: ${reason}`, {
    cause,
    errno: errnoOf(cause),
    details,
  });
}

export function badRequest(message: string, details?: Record<string, unknown>): BrokerError {
  return new BrokerError(ErrorCodes.BAD_REQUEST, message, { details });
}

export function isErrno(error: unknown, errno: string): boolean {
  return errnoOf(error) === errno;
}
