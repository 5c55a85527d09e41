import { BrokerError } from '../core/errors.js';
import { checkSandboxSupport, type SandboxSupport } from './info.js';
import { locatePreloadLibrary } from './preload.js';

/**
 * The two runtimes `run` can start a command in:
 * - `seccomp`: Landlock + seccomp user notification; every modifying syscall of every
 *   program (static ones too) goes through the broker. The default where the kernel has it.
 * - `preload`: the brokered-preload library in dynamically linked programs, over
 *   Landlock where the kernel has it. The fallback, and the reference's model for benchmarks.
 */
export const RUNTIMES = ['seccomp', 'preload'] as const;
export type RuntimeName = (typeof RUNTIMES)[number];

export interface RuntimeChoice {
  runtime: RuntimeName;
  /** Set when the default fell back to preload: why, for a person. */
  fallback?: string;
}

export interface RuntimeProbes {
  seccomp: () => SandboxSupport;
  /** The preload library's path; throws when it was not built. */
  preload: () => string;
}

const defaultProbes: RuntimeProbes = { seccomp: () => checkSandboxSupport(), preload: () => locatePreloadLibrary() };

function describeError(error: unknown): string {
  if (error instanceof BrokerError) return `${error.message} [${error.code}]`;
  return error instanceof Error ? error.message : String(error);
}

/** Thrown when no runtime can start; the message says why. */
export class NoRuntime extends Error {}

function seccompSupport(probes: RuntimeProbes): SandboxSupport {
  try {
    return probes.seccomp();
  } catch (error) {
    // The launcher was never built.
    return { ok: false, message: describeError(error) };
  }
}

/**
 * The runtime for `run`: the one requested, else seccomp when this kernel supports it,
 * else preload. Throws NoRuntime when the requested (or every) runtime is unavailable.
 */
export function chooseRuntime(requested?: RuntimeName, probes: RuntimeProbes = defaultProbes): RuntimeChoice {
  if (requested === 'preload') {
    try {
      probes.preload();
    } catch (error) {
      throw new NoRuntime(describeError(error));
    }
    return { runtime: 'preload' };
  }
  const support = seccompSupport(probes);
  if (support.ok) return { runtime: 'seccomp' };
  if (requested === 'seccomp') throw new NoRuntime(support.message);
  try {
    probes.preload();
  } catch (error) {
    throw new NoRuntime(`${support.message}; and the preload runtime is unavailable too: ${describeError(error)}`);
  }
  return { runtime: 'preload', fallback: `seccomp user notification is unavailable (${support.message}); using the preload runtime` };
}
