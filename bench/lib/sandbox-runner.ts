import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Broker, BrokerPlugin } from '../../src/core/index.js';
import { RequestCounter, type KernelHandler, type RequestSnapshot } from './request-counter.js';
import { timeProcess, type StartedProcess, type TimedRun } from './timed-process.js';

export interface SandboxRunnerOptions {
  /** Environment holding BROKERED_SHELL_HOME (the backup store) for `resolveHome`. */
  env: NodeJS.ProcessEnv;
  /** Where writes are the sandbox's business: the workspace(s) and the scratch dir. */
  writableRoots: string[];
  /** The command's temp dir (`--scratch`, TMPDIR). */
  scratch: string;
  sessionId?: string;
  /** Broker log level (default `error`, as `brokered-shell run`). */
  logLevel?: string;
  /** The launcher to run (default: the package's build/Release one, located at each spawn). */
  launcher?: string;
  /** The plugins the broker uses, chosen from the standard set (default: all of them). */
  plugins?: (standard: BrokerPlugin[]) => BrokerPlugin[];
}

export interface RunOptions {
  /** Another launcher (e.g. a strace wrapper) for `spawnSandboxed`'s `binaryPath`. */
  binaryPath?: string;
  /** Another request handler instead of the broker (still counted). */
  handler?: KernelHandler;
  keepStdout?: boolean;
}

/**
 * The sandbox without the broker: allows every request at once on its lexical path
 * (what the supervisor sent). Only for the benchmark's own temp trees, where paths
 * hold no symlinks: it measures the floor of supervisor + channel + event loop.
 */
export const answerAtOnce: KernelHandler = async (request) =>
  request.op === 'rename' || request.op === 'link' ? { errno: 0, path: request.path, to: request.to ?? '' } : { errno: 0, path: request.path };

export interface BrokeredRun extends TimedRun {
  requests: RequestSnapshot;
  /** `broker.commitTurn` after the command, not part of wallMs. */
  commitMs: number;
  /** Files the turn backed up (`turn.facts.backups`). */
  backups: number;
}

/** The product's modules, loaded from the compiled dist/ (what the CLI runs), typed by their sources. */
export interface Product {
  index: typeof import('../../src/index.js');
  sandbox: typeof import('../../src/sandbox/index.js');
  bridge: typeof import('../../src/sandbox/kernel-bridge.js');
}

/** Import the product from `<repoRoot>/dist`: profiles then name real files and lines, and nothing goes through tsx. */
export async function loadProduct(repoRoot: string): Promise<Product> {
  const url = (file: string) => pathToFileURL(path.join(repoRoot, 'dist', ...file.split('/'))).href;
  const [index, sandbox, bridge] = await Promise.all([
    import(url('index.js')) as Promise<Product['index']>,
    import(url('sandbox/index.js')) as Promise<Product['sandbox']>,
    import(url('sandbox/kernel-bridge.js')) as Promise<Product['bridge']>,
  ]);
  return { index, sandbox, bridge };
}

/**
 * One Broker with the standard plugins, kept for a whole benchmark, running commands
 * the way `brokered-shell run` does (one turn each, the kernel bridge as the
 * supervisor's handler) but without Node's start: the library-level path.
 */
export class SandboxRunner {
  readonly broker: Broker;
  readonly counter = new RequestCounter();
  readonly #handler: KernelHandler;
  readonly #scratch: string;
  readonly #product: Product;
  readonly #launcher: string | undefined;

  constructor(product: Product, options: SandboxRunnerOptions) {
    const { index, sandbox, bridge } = product;
    const support = sandbox.checkSandboxSupport();
    if (!support.ok) throw new Error(`the kernel sandbox cannot start here: ${support.message}`);
    this.#product = product;
    this.#scratch = options.scratch;
    this.#launcher = options.launcher;
    this.broker = new index.Broker({
      sessionId: options.sessionId ?? 'bench-kernel-runtime',
      logger: index.createLogger({ level: options.logLevel ?? 'error' }),
    });
    const standard = index.standardPlugins({
      home: index.resolveHome(options.env),
      writableRoots: options.writableRoots,
      backup: {},
    });
    this.broker.use(...(options.plugins ? options.plugins(standard) : standard));
    this.#handler = this.counter.wrap(bridge.kernelBridge(this.broker, { toolCallId: 'bench-call', traceId: 'bench-trace' }));
  }

  /** Start `argv` under the sandbox (stdout and stderr piped). */
  start(argv: readonly string[], cwd: string, env: NodeJS.ProcessEnv, options: RunOptions = {}): StartedProcess {
    const sandboxed = this.#product.sandbox.spawnSandboxed({
      argv,
      cwd,
      env,
      scratchDirs: [this.#scratch],
      onRequest: options.handler ? this.counter.wrap(options.handler) : this.#handler,
      onProtocolError: (reason) => process.stderr.write(`supervisor channel problem: ${reason}\n`),
      stdio: ['ignore', 'pipe', 'pipe'],
      ...(options.binaryPath || this.#launcher ? { binaryPath: options.binaryPath ?? this.#launcher } : {}),
    });
    return { child: sandboxed.child, exit: sandboxed.exit };
  }

  /** One command as one turn: time spawn → exit; the turn's commit is timed apart. */
  async run(argv: readonly string[], cwd: string, env: NodeJS.ProcessEnv, options: RunOptions = {}): Promise<BrokeredRun> {
    await this.broker.beginTurn();
    this.counter.take();
    const timed = await timeProcess(() => this.start(argv, cwd, env, options), { keepStdout: options.keepStdout === true });
    const requests = this.counter.take();
    const committing = process.hrtime.bigint();
    const turn = await this.broker.commitTurn(`bench: ${argv.join(' ').slice(0, 200)}`);
    const commitMs = Number(process.hrtime.bigint() - committing) / 1e6;
    return { ...timed, requests, commitMs, backups: Number(turn.facts.backups ?? 0) };
  }

  async close(): Promise<void> {
    await this.broker.close();
  }
}
