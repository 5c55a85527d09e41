/**
 * Helpers for the preload runtime's end-to-end tests: `brokered-shell run --runtime
 * preload` as a real process, on top of the `run` helpers (worlds, stores, snapshots).
 */
import { brokeredShell, type CliOptions, type CliRun, type RunFlags, type World } from './run-helpers.js';

/** `brokered-shell run --runtime preload --workspace WS [flags] -- COMMAND`. */
export function runPreload(world: World, command: string, flags: RunFlags = {}, options: CliOptions = {}): Promise<CliRun> {
  const args = ['run', '--runtime', 'preload', '--workspace', world.ws];
  if (flags.session !== undefined) args.push('--session', flags.session);
  if (flags.policy !== undefined) args.push('--policy', flags.policy);
  if (flags.message !== undefined) args.push('--message', flags.message);
  if (flags.noBackup) args.push('--no-backup');
  args.push('--', command);
  return brokeredShell(world, args, options);
}

/** The line the command prints first, proving which runtime it ran in. */
export const SHOW_RUNTIME = 'echo "@@runtime $BROKERED_SHELL_RUNTIME ${LD_PRELOAD##*/}"';
export const PRELOAD_MARK = '@@runtime preload brokered-preload.so';
