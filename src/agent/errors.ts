import { BrokerError, ErrorCodes, type BrokerErrorOptions } from '../core/errors.js';

/**
 * The sandbox cannot run commands here: the launcher was never built, this kernel lacks
 * what the runtime needs, or its temp or socket directory cannot be made. Nothing ran.
 */
export class SandboxUnavailableError extends BrokerError {
  constructor(message: string, options: BrokerErrorOptions = {}) {
    super(ErrorCodes.NATIVE_UNAVAILABLE, message, options);
    this.name = 'SandboxUnavailableError';
  }
}
