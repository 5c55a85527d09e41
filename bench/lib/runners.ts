import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { SandboxSession } from '../../src/agent/index.js';
import { DurableBackupFloor } from './durable-floor.js';
import { answerAtOnce, loadProduct, type Product } from './sandbox-runner.js';
import { CLI, REPO_ROOT } from './serve.js';
import { startPlain, timeProcess, type TimedRun } from './timed-process.js';

/** The runners compared side by side, in table order. */
export const RUNNER_IDS = ['native', 'floor', 'floor-backup', 'seccomp', 'seccomp-turn', 'preload', 'srt'] as const;
export type RunnerId = (typeof RUNNER_IDS)[number];
/** Run unless --runners says otherwise: seccomp-turn only differs where backups are made. */
export const DEFAULT_RUNNER_IDS: readonly RunnerId[] = ['native', 'floor', 'floor-backup', 'seccomp', 'preload', 'srt'];

export const RUNNER_LABELS: Record<RunnerId, string> = {
  native: 'native bash',
  floor: 'sandbox floor (no broker)',
  'floor-backup': 'sandbox floor + durable backups (no broker)',
  seccomp: 'brokered-shell seccomp',
  'seccomp-turn': 'brokered-shell seccomp, durability turn',
  preload: 'brokered-shell preload',
  srt: 'srt 0.0.83 (bubblewrap)',
};

/** One timed command of any runner. */
export interface RunResult {
  wallMs: number;
  code: number | null;
  stdoutBytes: number;
  stderrTail: string;
  /** brokered: broker requests (audit records) during the run. */
  requests?: number;
  /** brokered: files backed up for the command. */
  backups?: number;
  /** srt: time spent in `wrapWithSandbox` (part of wallMs). */
  wrapMs?: number;
}

/** Runs `bash -c COMMAND` in `cwd` one way; `cli` runs it through the runner's whole command-line tool. */
export interface Runner {
  readonly id: RunnerId;
  run(command: string, cwd: string): Promise<RunResult>;
  cli(command: string, cwd: string): Promise<RunResult>;
  close(): Promise<void>;
}

export interface RunnerContext {
  /** The commands' environment (the same for every runner). */
  env: NodeJS.ProcessEnv;
  /** Writable root of every runner: all bench trees live below it. */
  workspace: string;
  /** The brokered runners' backup home (BROKERED_SHELL_HOME of `env`). */
  home: string;
  /** srt's settings file (for its CLI). */
  srtSettings: string;
  /** The floor runner's temp dir (TMPDIR of `env`; the launcher's `--scratch`). */
  scratch: string;
}

const fromTimed = (run: TimedRun): RunResult => ({ wallMs: run.wallMs, code: run.code ?? (run.signal ? 128 : null), stdoutBytes: run.stdoutBytes, stderrTail: run.stderrTail });

function plain(file: string, args: string[], cwd: string, env: NodeJS.ProcessEnv): Promise<RunResult> {
  return timeProcess(() => startPlain(file, args, { cwd, env })).then(fromTimed);
}

class NativeRunner implements Runner {
  readonly id = 'native' as const;
  constructor(private readonly ctx: RunnerContext) {}
  run(command: string, cwd: string): Promise<RunResult> {
    return plain('/bin/bash', ['-c', command], cwd, this.ctx.env);
  }
  cli(command: string, cwd: string): Promise<RunResult> {
    return this.run(command, cwd);
  }
  async close(): Promise<void> {}
}

type AgentModule = typeof import('../../src/index.js');

/**
 * The same launcher and supervisor as the seccomp runner, but every request is allowed at
 * once on the path the supervisor sent (`answerAtOnce`): no policy, no backup, no journal.
 * What it adds over native is what the sandbox mechanism and a Node event loop cost before a
 * broker decides anything, so a target it misses cannot be met by work on the broker. Only
 * for the bench's own trees, which hold no symlinks. Its `cli` is the floor of any
 * command-line tool written in Node: Node starts and spawns `bash -c COMMAND`, nothing else.
 * `floor-backup` adds the durable backup the store's contract requires before each change
 * to an existing file: a target it misses needs a weaker contract, not a faster broker.
 */
class FloorRunner implements Runner {
  private constructor(
    readonly id: 'floor' | 'floor-backup',
    private readonly ctx: RunnerContext,
    private readonly sandbox: Product['sandbox'],
    private readonly backups: DurableBackupFloor | undefined,
  ) {}

  /** `floor-backup` also makes each backup the store's contract requires (durable-floor.ts), in a store under `ctx.home`. */
  static async open(id: 'floor' | 'floor-backup', ctx: RunnerContext): Promise<FloorRunner> {
    const { sandbox } = await loadProduct(REPO_ROOT);
    const support = sandbox.checkSandboxSupport();
    if (!support.ok) throw new Error(`the kernel sandbox cannot start here: ${support.message}`);
    const backups = id === 'floor-backup' ? new DurableBackupFloor(path.join(ctx.home, 'floor-backup')) : undefined;
    return new FloorRunner(id, ctx, sandbox, backups);
  }

  async run(command: string, cwd: string): Promise<RunResult> {
    // A bare count, not RequestCounter: its clock reads per request would raise the floor.
    let requests = 0;
    const backups = this.backups;
    const answer = backups ? backups.handler : answerAtOnce;
    backups?.beginRun();
    const timed = await timeProcess(() => {
      const started = this.sandbox.spawnSandboxed({
        argv: ['/bin/bash', '-c', command],
        cwd,
        env: this.ctx.env,
        scratchDirs: [this.ctx.scratch],
        onRequest: (request) => {
          requests += 1;
          return answer(request);
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      return { child: started.child, exit: started.exit };
    });
    return { ...fromTimed(timed), requests, backups: backups?.backups ?? 0 };
  }

  cli(command: string, cwd: string): Promise<RunResult> {
    const script = "process.exitCode = require('node:child_process').spawnSync('/bin/bash', ['-c', process.argv[1]], { stdio: 'inherit' }).status ?? 1";
    return plain(process.execPath, ['-e', script, command], cwd, this.ctx.env);
  }

  async close(): Promise<void> {
    this.backups?.close();
  }
}

type SessionRunnerId = 'seccomp' | 'seccomp-turn' | 'preload';

/**
 * brokered-shell at library level, the way an agent embeds it: one `SandboxSession`
 * (broker with the standard plugins, its socket server, the chosen runtime) for the whole
 * bench; each run is one turn. `execute` and the turn's commit are timed (begin is not):
 * with durability `turn` the commit is where the backups are synced.
 */
class SessionRunner implements Runner {
  #records = 0;
  private constructor(
    readonly id: SessionRunnerId,
    private readonly ctx: RunnerContext,
    private readonly session: SandboxSession,
  ) {}

  static async open(id: SessionRunnerId, ctx: RunnerContext, product: AgentModule): Promise<SessionRunner> {
    const runtime = id === 'preload' ? 'preload' : 'seccomp';
    const session = await product.createSandboxSession({
      workspace: ctx.workspace,
      sessionId: `bench-${id}`,
      config: { sandbox: { runtime }, ...(id === 'seccomp-turn' ? { fileBackup: { durability: 'turn' as const } } : {}) },
      home: ctx.home,
      env: ctx.env,
      storeUnavailable: 'deny-changes',
    });
    if (session.runtime !== runtime) throw new Error(`asked for the ${runtime} runtime, got ${String(session.runtime)}`);
    const runner = new SessionRunner(id, ctx, session);
    product.getAuditHooks(session.broker).record.tap('bench-count', () => {
      runner.#records += 1;
    });
    return runner;
  }

  async run(command: string, cwd: string): Promise<RunResult> {
    await this.session.beginTurn({ userMessage: `bench: ${command.slice(0, 100)}` });
    const before = this.#records;
    const t0 = process.hrtime.bigint();
    const result = await this.session.execute(command, { cwd, output: 'capture', maxOutputBytes: 256 * 1024 * 1024 });
    const requests = this.#records - before;
    const ended = await this.session.endTurn({ message: 'bench' });
    const wallMs = Number(process.hrtime.bigint() - t0) / 1e6;
    if (!ended.ok) throw new Error(`${this.id}: the turn could not be committed: ${ended.error ?? '?'}`);
    const blocked = result.promptBlocks.length > 0 ? `\nneeds approval: ${result.promptBlocks.length} paths` : '';
    return {
      wallMs,
      code: result.exitCode,
      stdoutBytes: result.raw.stdout.length,
      stderrTail: result.stderr.slice(-4096) + blocked,
      requests,
      backups: result.backups.length,
    };
  }

  cli(command: string, cwd: string): Promise<RunResult> {
    const runtime = this.id === 'preload' ? 'preload' : 'seccomp';
    return plain(process.execPath, [CLI, 'run', '--runtime', runtime, '--workspace', cwd, '--', command], cwd, this.ctx.env);
  }

  close(): Promise<void> {
    return this.session.close();
  }
}

type SrtModule = typeof import('@anthropic-ai/sandbox-runtime');
const SRT_DIR = path.join(REPO_ROOT, 'node_modules', '@anthropic-ai', 'sandbox-runtime');
export const SRT_CLI = path.join(SRT_DIR, 'dist', 'cli.js');

/** The srt configuration the bench uses: writes only to the workspace, no network. */
export function srtConfig(workspace: string) {
  return {
    network: { allowedDomains: [], deniedDomains: [] },
    filesystem: { denyRead: [], allowRead: [], allowWrite: [workspace], denyWrite: [] },
  };
}

/**
 * srt at library level, as Claude Code uses it: `SandboxManager.initialize` once (its
 * proxies), then per command `wrapWithSandbox` (a ripgrep scan of the working directory
 * for files to protect, the bwrap argv), a shell for the wrapped string, and
 * `cleanupAfterCommand` (removes the mount points bwrap left on the host); all timed.
 * srt takes its working directory from `process.cwd()`: the bench makes that the
 * workspace root (the project, as srt sees it) around the wrap, and the command runs in
 * the workload's directory below it, as the brokered runners' commands do. (With the
 * workload's own directory as srt's cwd, srt's placeholders for .bashrc, .gitmodules,
 * .vscode, … appear inside the tree: `grep -r` then exits 2 on them and `git add -A`
 * refuses them.)
 */
class SrtRunner implements Runner {
  readonly id = 'srt' as const;
  private constructor(
    private readonly ctx: RunnerContext,
    private readonly srt: SrtModule,
  ) {}

  static async open(ctx: RunnerContext): Promise<SrtRunner> {
    const srt = (await import(pathToFileURL(path.join(SRT_DIR, 'dist', 'index.js')).href)) as SrtModule;
    await srt.SandboxManager.initialize(srtConfig(ctx.workspace) as Parameters<SrtModule['SandboxManager']['initialize']>[0]);
    return new SrtRunner(ctx, srt);
  }

  async run(command: string, cwd: string): Promise<RunResult> {
    const home = process.cwd();
    const t0 = process.hrtime.bigint();
    let wrapped: string;
    process.chdir(this.ctx.workspace);
    try {
      wrapped = await this.srt.SandboxManager.wrapWithSandbox(command);
    } finally {
      process.chdir(home);
    }
    const wrapMs = Number(process.hrtime.bigint() - t0) / 1e6;
    let run: TimedRun;
    try {
      run = await timeProcess(() => startPlain('/bin/sh', ['-c', wrapped], { cwd, env: this.ctx.env }));
    } finally {
      this.srt.SandboxManager.cleanupAfterCommand();
    }
    return { ...fromTimed(run), wallMs: Number(process.hrtime.bigint() - t0) / 1e6, wrapMs };
  }

  cli(command: string, cwd: string): Promise<RunResult> {
    return plain(process.execPath, [SRT_CLI, '--settings', this.ctx.srtSettings, '-c', command], cwd, this.ctx.env);
  }

  close(): Promise<void> {
    return this.srt.SandboxManager.reset();
  }
}

/** A runner, or why it cannot run on this machine (shown in the table instead of numbers). */
export type RunnerSlot = { id: RunnerId; runner: Runner } | { id: RunnerId; unavailable: string };

export async function openRunners(ids: readonly RunnerId[], ctx: RunnerContext): Promise<RunnerSlot[]> {
  const product = (await import(pathToFileURL(path.join(REPO_ROOT, 'dist', 'index.js')).href)) as AgentModule;
  const slots: RunnerSlot[] = [];
  for (const id of ids) {
    try {
      if (id === 'native') slots.push({ id, runner: new NativeRunner(ctx) });
      else if (id === 'srt') slots.push({ id, runner: await SrtRunner.open(ctx) });
      else if (id === 'floor' || id === 'floor-backup') slots.push({ id, runner: await FloorRunner.open(id, ctx) });
      else slots.push({ id, runner: await SessionRunner.open(id, ctx, product) });
    } catch (error) {
      slots.push({ id, unavailable: firstLine(error) });
    }
  }
  return slots;
}

export function firstLine(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return text.split('\n').find((line) => line.trim() !== '')?.trim().slice(0, 200) ?? 'unknown error';
}
