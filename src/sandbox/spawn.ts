import { spawn, type ChildProcess, type StdioNull, type StdioPipe } from 'node:child_process';
import { Socket } from 'node:net';
import {
  serveKernelChannel,
  type KernelChannel,
  type KernelConnectionHandler,
  type KernelNetworkQuestionHandler,
  type KernelRefusalHandler,
  type KernelRequestHandler,
} from './channel.js';
import { locateSandboxBinary } from './locate.js';

/** What each of the command's stdin/stdout/stderr is connected to. */
export type SandboxStdio = StdioPipe | StdioNull | 'inherit' | number;

export interface SpawnSandboxedOptions {
  /** Program and arguments; the program is looked up in env.PATH by the launcher. */
  argv: readonly string[];
  cwd: string;
  /** Environment of the command (default: this process's). TMPDIR defaults to scratchDirs[0]. */
  env?: NodeJS.ProcessEnv;
  /** Directories the command may change without asking (its temp dirs). Must exist. */
  scratchDirs: readonly string[];
  /** Devices beyond /dev/null, /dev/zero, /dev/full, /dev/tty and /dev/pts the command may write. */
  writeDevs?: readonly string[];
  /** Unix sockets outside the scratch dirs the command may connect to (the broker's, an ssh agent's). */
  unixSockets?: readonly string[];
  /**
   * Files and folders the command may not read or execute (the read policy); everything
   * else stays readable in the kernel. Paths not there at launch are skipped.
   */
  readDenied?: readonly string[];
  /** Decides each modifying syscall outside the scratch dirs; see KernelRequest/KernelAnswer. */
  onRequest: KernelRequestHandler;
  /** Told about each syscall the supervisor refused without asking (to audit it). */
  onRefusal?: KernelRefusalHandler;
  onProtocolError?: (reason: string) => void;
  /**
   * The network policy: the table the supervisor decides connections by (sent before the
   * command starts; `channel.pushNetworkTable` replaces it), where its records go and who
   * answers what it cannot decide. Without it connections are left open.
   */
  network?: { table: readonly string[]; onConnection?: KernelConnectionHandler; onQuestion?: KernelNetworkQuestionHandler };
  stdio?: readonly [SandboxStdio, SandboxStdio, SandboxStdio];
  /** Override the launcher path (default: locateSandboxBinary()). */
  binaryPath?: string;
}

export interface SandboxExit {
  /** The command's exit status; 125: broker channel lost; 126: sandbox setup failed. */
  code: number | null;
  /** Set when the launcher itself was killed by a signal. */
  signal: string | null;
}

export interface SandboxedProcess {
  /** The launcher process (its pid is the supervisor's). */
  child: ChildProcess;
  /** The broker side of the supervisor channel. */
  channel: KernelChannel;
  exit: Promise<SandboxExit>;
}

/** The launcher's arguments for these options (exported for diagnostics). */
export function sandboxArgs(options: Pick<SpawnSandboxedOptions, 'argv' | 'scratchDirs' | 'writeDevs' | 'unixSockets' | 'readDenied' | 'network'>): string[] {
  if (options.argv.length === 0) throw new RangeError('argv must name a program');
  return [
    '--broker-fd',
    '3',
    ...options.scratchDirs.flatMap((dir) => ['--scratch', dir]),
    ...(options.writeDevs ?? []).flatMap((dev) => ['--write-dev', dev]),
    ...(options.unixSockets ?? []).flatMap((socket) => ['--unix-socket', socket]),
    ...(options.readDenied ?? []).flatMap((denied) => ['--deny-read', denied]),
    ...(options.network ? ['--network'] : []),
    '--',
    ...options.argv,
  ];
}

/**
 * Runs a command under the kernel sandbox. Fd 3 of the launcher is a socket pair
 * (libuv makes 'pipe' stdio entries Unix sockets): the supervisor's requests arrive
 * there and are answered by `onRequest`.
 */
export function spawnSandboxed(options: SpawnSandboxedOptions): SandboxedProcess {
  const binary = options.binaryPath ?? locateSandboxBinary();
  const env: NodeJS.ProcessEnv = { ...(options.env ?? process.env) };
  const firstScratch = options.scratchDirs[0];
  if (env.TMPDIR === undefined && firstScratch !== undefined) env.TMPDIR = firstScratch;
  const [stdin, stdout, stderr] = options.stdio ?? ['inherit', 'inherit', 'inherit'];
  const child = spawn(binary, sandboxArgs(options), {
    cwd: options.cwd,
    env,
    stdio: [stdin, stdout, stderr, 'pipe'],
  });
  const socket = child.stdio[3];
  if (!(socket instanceof Socket)) {
    child.kill('SIGKILL');
    throw new Error('the broker channel (fd 3) was not created as a socket');
  }
  const channel = serveKernelChannel(socket, {
    onRequest: options.onRequest,
    ...(options.onRefusal ? { onRefusal: options.onRefusal } : {}),
    ...(options.onProtocolError ? { onProtocolError: options.onProtocolError } : {}),
    ...(options.network?.onConnection ? { onConnection: options.network.onConnection } : {}),
    ...(options.network?.onQuestion ? { onNetworkQuestion: options.network.onQuestion } : {}),
  });
  // The launcher waits for its first table before it lets the command start.
  if (options.network) channel.pushNetworkTable(options.network.table);
  const exit = new Promise<SandboxExit>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code, signal) => {
      channel.close();
      resolve({ code, signal });
    });
  });
  // Callers that never await `exit` must not crash the process on a spawn error.
  exit.catch(() => undefined);
  return { child, channel, exit };
}
