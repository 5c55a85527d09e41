import { BrokerError } from '../core/errors.js';
import { chooseRuntime, type RuntimeChoice, type RuntimeProbes } from '../sandbox/runtime.js';
import type { SessionConfig } from './config.js';
import { SandboxUnavailableError } from './errors.js';

export type { RuntimeChoice };

/**
 * The runtime for the configured choice: `auto` is seccomp where this kernel supports it,
 * else preload (`fallback` says why); `seccomp` and `preload` are that runtime or an error.
 */
export function selectRuntime(requested: SessionConfig['sandbox']['runtime'], probes?: RuntimeProbes): RuntimeChoice {
  try {
    return chooseRuntime(requested === 'auto' ? undefined : requested, probes);
  } catch (error) {
    const message = error instanceof BrokerError ? `${error.message} [${error.code}]` : error instanceof Error ? error.message : String(error);
    throw new SandboxUnavailableError(message, { cause: error });
  }
}
