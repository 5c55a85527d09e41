import { PolicyStage, type Broker, type BrokerPlugin, type Decision, type Operation, type ResolvedRequest, type ResolvedTarget } from '../core/index.js';
import { getLeaseHooks } from './lease/hooks.js';

export const PLUGIN_NAME = 'set-id-bits';

const SET_UID = 0o4000;
const SET_GID = 0o2000;

/**
 * The set-id bits of `mode` that make a privileged program: set-uid on anything, set-gid
 * on anything but a directory (on a directory it only makes new entries inherit its
 * group, which `git init --shared` relies on). 0 when there are none.
 */
export function privilegeBits(mode: number, directory: boolean): number {
  return (mode & SET_UID) | (directory ? 0 : mode & SET_GID);
}

/** `mode` less its privilege bits: what a copy gives the file it makes, as `cp` without `-p` does. */
export function withoutPrivilegeBits(mode: number, directory: boolean): number {
  return mode & ~privilegeBits(mode, directory);
}

/**
 * The operations whose mode lands on a file system object, and whether that object is a
 * directory: chmod's is what is there, mkdir makes one, mknod and a creating open (the
 * kernel sends its mode only then) make a file.
 */
const MODE_LANDS_ON: Partial<Record<Operation, (target: ResolvedTarget) => boolean>> = {
  chmod: (target) => target.kind === 'directory',
  mkdir: () => true,
  mknod: () => false,
  open: () => false,
};

/**
 * Refuses every request that would give a file a set-uid or set-gid mode (a directory may
 * be set-gid): a chmod, a mkdir, a mknod or a creating open, from the kernel sandbox, the
 * JSON host operations or the library. Such a program, left in the workspace, runs with
 * its owner's rights (the broker's and the command's: root, here) for whoever starts it
 * later, outside the sandbox. Denied at the protected stage, so no rule, grant or
 * person's approval lifts it. The kernel supervisor applies the same rule to what it lets
 * through without asking (native/sandbox/set-id.c), and a host copy leaves the bits out
 * (`withoutPrivilegeBits`).
 */
export class SetIdBitsPlugin implements BrokerPlugin {
  static readonly PLUGIN_NAME = PLUGIN_NAME;
  readonly name = PLUGIN_NAME;

  apply(broker: Broker): void {
    getLeaseHooks(broker).contribute.tap(this.name, (lease) => void (lease.setIdRoundTrip = true));
    broker.hooks.evaluatePolicy.tap({ name: this.name, stage: PolicyStage.PROTECTED }, (target, resolved) => this.#decide(target, resolved));
  }

  #decide(target: ResolvedTarget, resolved: ResolvedRequest): Decision | undefined {
    const { operation, options } = resolved.request;
    const isDirectory = MODE_LANDS_ON[operation];
    if (options.mode === undefined || isDirectory === undefined || target.role !== 'path') return undefined;
    const bits = privilegeBits(options.mode, isDirectory(target));
    if (bits === 0) return undefined;
    const which = bits === (SET_UID | SET_GID) ? 'set-uid and set-gid bits' : bits === SET_UID ? 'set-uid bit' : 'set-gid bit';
    return {
      verdict: 'deny',
      reason: `mode ${options.mode.toString(8).padStart(4, '0')} has the ${which}: a program left with it runs with its owner's or group's rights for whoever starts it`,
      source: this.name,
    };
  }
}
