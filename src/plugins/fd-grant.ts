import { closeSync, constants, fstatSync } from 'node:fs';
import { BrokerError, ErrorCodes, Stage, type Broker, type BrokerPlugin, type Grant, type ResolvedRequest } from '../core/index.js';
import { native } from '../native/index.js';

/** Opens a resolved path for the grant; the default is the addon's race-free open. */
export type GrantOpener = (path: string, flags: number, mode: number) => number;

export interface FdGrantOptions {
  open?: GrantOpener;
}

/** What the broker opens for a write grant: the text protocol carries no flags, so read-write and create. */
export const FD_GRANT_FLAGS = constants.O_RDWR | constants.O_CREAT | constants.O_NOCTTY | constants.O_NONBLOCK;
export const FD_GRANT_MODE = 0o666;

/**
 * The Linux counterpart of the reference's extension token. When the policy answers
 * `grant-token` for a write the sandbox would refuse (a path outside the writable roots
 * that a rule grants), the broker opens the file itself and hands over the descriptor
 * (`{ kind: 'fd', fd }`): the socket server passes it with the `FD` answer and closes its
 * copy; an in-process caller of `broker.handle` owns it and must close it.
 *
 * The open follows no symlink anywhere in the resolved path (openat2
 * RESOLVE_NO_SYMLINKS), so a link swapped in after the policy check makes it fail
 * instead of opening something else; only regular files are granted. The client applies
 * O_TRUNC / O_APPEND itself on the fd it receives, after the backup already happened.
 *
 * Taps issue-token before `sandbox-token` (which denies such grants) and leaves reads,
 * `sandbox` verdicts and host operations alone.
 */
export class FdGrantPlugin implements BrokerPlugin {
  static readonly PLUGIN_NAME = 'fd-grant';
  readonly name = FdGrantPlugin.PLUGIN_NAME;
  readonly #open: GrantOpener;

  constructor(options: FdGrantOptions = {}) {
    this.#open = options.open ?? ((path, flags, mode) => native().openNoSymlinks(path, flags, mode));
  }

  apply(broker: Broker): void {
    broker.hooks.issueToken.tap({ name: this.name, stage: Stage.NORMAL }, (resolved, decision, context) => {
      if (decision.verdict !== 'grant-token') return undefined;
      const target = writtenTarget(resolved);
      if (!target) return undefined;
      const fd = this.#open(target, FD_GRANT_FLAGS, FD_GRANT_MODE);
      try {
        if (!fstatSync(fd).isFile()) {
          throw new BrokerError(ErrorCodes.POLICY_DENIED, `${target} is not a regular file; only regular files are granted as an fd`);
        }
      } catch (error) {
        closeSync(fd);
        throw error;
      }
      context.log.info({ phase: 'ipc-token', path: target }, 'granted an fd the broker opened');
      const grant: Grant = { kind: 'fd', fd };
      return grant;
    });
  }
}

/** The resolved path of an open that writes; undefined for reads and anything that is not one open. */
function writtenTarget(resolved: ResolvedRequest): string | undefined {
  const { request, targets } = resolved;
  if (request.operation !== 'open' || targets.length !== 1) return undefined;
  const [target] = targets;
  return target && target.access !== 'read' ? target.resolved : undefined;
}
