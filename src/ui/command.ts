import { spawn } from 'node:child_process';
import { home } from '../cli/backups.js';
import { ExitCode } from '../cli/exit-codes.js';
import type { Io } from '../cli/output.js';
import { nativeMetadataOps } from '../native/metadata-ops.js';
import { startUiServer, type UiServer } from './server.js';

export interface UiCommandOptions {
  port?: string;
  /** false with `--no-open`. */
  open?: boolean;
}

/**
 * `backups ui`: serve the backup viewer on 127.0.0.1, print its address (secret
 * included) on stdout, and stop on SIGINT or SIGTERM.
 */
export async function uiCommand(io: Io, options: UiCommandOptions, env = process.env): Promise<number> {
  const port = Number(options.port ?? '0');
  if (!/^\d{1,5}$/.test(options.port ?? '0') || port > 65535) {
    io.err(`brokered-shell: --port must be a number from 0 to 65535, got ${JSON.stringify(options.port)}`);
    return ExitCode.USAGE;
  }
  // Listen for the signals before the address is out: whoever reads it may stop us at once.
  const stop = stopSignal();
  let server: UiServer;
  try {
    server = await startUiServer({ home: home(env), setTimesNs: nativeMetadataOps().setTimesNs, port });
  } catch (error) {
    stop.cancel();
    throw error;
  }
  io.out(server.url);
  if (options.open !== false) openBrowser(io, server.url);
  const signal = await stop.received;
  await server.close();
  io.err(`backup viewer stopped (${signal})`);
  return ExitCode.OK;
}

/** The first SIGINT or SIGTERM from now on (handled: the process does not die of it). */
function stopSignal(): { received: Promise<NodeJS.Signals>; cancel(): void } {
  let cancel: () => void = () => undefined;
  const received = new Promise<NodeJS.Signals>((resolve) => {
    const stop = (name: NodeJS.Signals) => {
      cancel();
      resolve(name);
    };
    cancel = () => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
  return { received, cancel };
}

/** Best effort: the address is on stdout either way. */
function openBrowser(io: Io, url: string): void {
  const child = spawn('xdg-open', [url], { stdio: 'ignore', detached: true });
  child.once('error', (error) => io.err(`could not open a browser (${error.message}); open the address above yourself`));
  child.unref();
}
