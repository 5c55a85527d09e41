/**
 * Helpers for the preload runtime's end-to-end tests: `brokered-shell run --runtime
 * preload` as a real process, on top of the `run` helpers (worlds, stores, snapshots).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { brokeredShell, type CliOptions, type CliRun, type RunFlags, type World } from './run-helpers.js';

/**
 * A --policy file with `network.mode: "open"` (and the given policy's settings): the
 * preload runtime governs no connection, so it starts only where the network is open.
 */
export function openNetworkPolicy(world: World, policy?: string): string {
  const given = policy === undefined ? {} : (JSON.parse(readFileSync(policy, 'utf8')) as Record<string, unknown>);
  const file = path.join(world.tools, `open-network-${path.basename(policy ?? 'none')}`);
  writeFileSync(file, JSON.stringify({ ...given, network: { mode: 'open' } }));
  return file;
}

/** `run`'s flags for a runtime: the preload runtime with the network open (it governs no connection). */
export function runtimeArgs(world: World, runtime: 'seccomp' | 'preload' | string): string[] {
  return ['--runtime', runtime, ...(runtime === 'preload' ? ['--policy', openNetworkPolicy(world)] : [])];
}

/** `brokered-shell run --runtime preload --workspace WS [flags] -- COMMAND`, with the network open. */
export function runPreload(world: World, command: string, flags: RunFlags = {}, options: CliOptions = {}): Promise<CliRun> {
  const args = ['run', '--runtime', 'preload', '--workspace', world.ws];
  if (flags.session !== undefined) args.push('--session', flags.session);
  args.push('--policy', openNetworkPolicy(world, flags.policy));
  if (flags.message !== undefined) args.push('--message', flags.message);
  if (flags.noBackup) args.push('--no-backup');
  args.push('--', command);
  return brokeredShell(world, args, options);
}

/** The line the command prints first, proving which runtime it ran in. */
export const SHOW_RUNTIME = 'echo "@@runtime $BROKERED_SHELL_RUNTIME ${LD_PRELOAD##*/}"';
export const PRELOAD_MARK = '@@runtime preload brokered-preload.so';
