import { randomBytes } from 'node:crypto';
import { mkdtemp, realpath, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { resolveHome } from '../backup/layout.js';
import { readPolicyFile } from '../config/policy-file.js';
import { Broker, type Logger, type Turn } from '../core/index.js';
import { BrokerServer } from '../ipc/server.js';
import { native, socketFd } from '../native/index.js';
import { ApprovalPlugin, type PromptBlock } from '../plugins/approval.js';
import { getAuditHooks } from '../plugins/audit.js';
import { standardPlugins } from '../plugins/standard.js';
import { kernelBridge, pathProblemErrno } from '../sandbox/kernel-bridge.js';
import { checkSandboxSupport, spawnSandboxed, type SandboxSupport } from '../sandbox/index.js';
import { ExitCode } from './exit-codes.js';
import { describeError, type Io } from './output.js';

export interface RunOptions {
  workspace?: string;
  session?: string;
  policy?: string;
  message?: string;
  /** commander's negatable flag: false with --no-backup. */
  backup?: boolean;
}

/** The variables a command (and the shims inside it) finds the broker by. */
export const ENV = {
  socket: 'BROKERED_SHELL_SOCKET',
  sessionId: 'BROKERED_SHELL_SESSION_ID',
  toolCallId: 'BROKERED_SHELL_TOOL_CALL_ID',
  traceId: 'BROKERED_SHELL_TRACE_ID',
} as const;

const newId = (prefix: string) => `${prefix}-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;

/** `sun_path` holds 108 bytes including the terminating NUL. */
const SOCKET_PATH_MAX = 107;
const SOCKET_NAME = 'broker.sock';
/** Signals a person or an agent sends to stop `run`: passed on to the command, and the turn is still committed. */
const FORWARDED_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

/** Why `run` could not start the sandbox; the message names the step that failed. */
class CannotStart extends Error {}

async function step<T>(what: string, action: () => Promise<T>): Promise<T> {
  try {
    return await action();
  } catch (error) {
    throw new CannotStart(`${what}: ${describeError(error)}`, { cause: error });
  }
}

/**
 * A private directory for the broker's socket. The socket's path must fit `sun_path`
 * (a longer one is silently cut short by the kernel interface), so a TMPDIR too deep
 * for it falls back to /tmp.
 */
async function makeSocketDir(): Promise<string> {
  const tried: string[] = [];
  for (const candidate of [os.tmpdir(), '/tmp']) {
    const base = await realpath(candidate).catch(() => undefined);
    if (base === undefined) continue;
    const longest = path.join(base, 'brokered-shell-broker-XXXXXX', SOCKET_NAME);
    if (Buffer.byteLength(longest) > SOCKET_PATH_MAX) {
      tried.push(base);
      continue;
    }
    return realpath(await mkdtemp(path.join(base, 'brokered-shell-broker-')));
  }
  throw new Error(`no temp directory gives a socket path of at most ${SOCKET_PATH_MAX} bytes (tried ${tried.join(', ') || 'none'}); set TMPDIR to a shorter one`);
}

/**
 * `run`: one command under the kernel sandbox as one turn. Every modifying syscall of the
 * command and its children goes through the broker's pipeline; the turn is committed at
 * the end; the exit status is the command's (126 when the sandbox cannot start).
 */
export async function runCommand(io: Io, command: string, options: RunOptions, log: Logger, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const cannotStart = (message: string) => {
    io.err(`brokered-shell run: the sandbox cannot start, nothing was run: ${message}`);
    return ExitCode.SANDBOX_UNAVAILABLE;
  };
  let support: SandboxSupport;
  try {
    // Throws when the launcher was never built.
    support = checkSandboxSupport();
  } catch (error) {
    return cannotStart(describeError(error));
  }
  if (!support.ok) return cannotStart(support.message);
  const workspace = await realpath(path.resolve(options.workspace ?? process.cwd()));
  const policy = options.policy ? await readPolicyFile(path.resolve(options.policy), workspace) : undefined;
  const sessionId = options.session ?? newId('run');
  const toolCallId = newId('call');
  const traceId = newId('trace');
  // Undone in reverse order whatever happens.
  const cleanup: Array<() => Promise<unknown>> = [];
  const forwarders = new Map<NodeJS.Signals, () => void>();
  try {
    // Scratch is the command's own temp dir; the socket lives apart so the command cannot replace it.
    const scratch = await step('cannot make the command\'s temp dir', async () => {
      const dir = await realpath(await mkdtemp(path.join(os.tmpdir(), 'brokered-shell-scratch-')));
      cleanup.push(() => rm(dir, { recursive: true, force: true }));
      return dir;
    });
    const socketDir = await step('cannot make the broker\'s socket dir', async () => {
      const dir = await makeSocketDir();
      cleanup.push(() => rm(dir, { recursive: true, force: true }));
      return dir;
    });
    const socketPath = path.join(socketDir, SOCKET_NAME);
    const broker = new Broker({ sessionId, logger: log });
    cleanup.push(() => broker.close());
    broker.use(
      ...standardPlugins({
        home: resolveHome(env),
        writableRoots: [workspace, scratch, ...(policy?.writableRoots ?? [])],
        rules: policy?.rules ?? [],
        ...(policy?.outsideRoots ? { outsideRoots: policy.outsideRoots } : {}),
        protectedPaths: [socketDir],
        backup: { ...(policy?.backup ?? {}), ...(options.backup === false ? { enabled: false } : {}) },
      }),
    );
    const approval = broker.plugin<ApprovalPlugin>(ApprovalPlugin.PLUGIN_NAME);
    const denied = new Map<string, string>();
    getAuditHooks(broker).record.tap('run-summary', (record) => {
      // Prompts are listed as needing approval; what the policy let through and then failed
      // (a backup over the size cap, a store that cannot be written) was still refused.
      if (record.ok || record.verdict === 'prompt') return;
      // A path that does not exist (or loops) failed as it would without the sandbox: no denial to report.
      if (pathProblemErrno(record.error) !== undefined) return;
      const path = record.paths.find((p) => p.access !== 'read') ?? record.paths[0];
      const why = record.verdict === 'deny' ? (record.reason ?? record.error?.message) : (record.error?.message ?? record.reason);
      if (path && denied.size < 20) denied.set(`${path.access} ${path.normalisedPath ?? path.path}`, why ?? 'denied');
    });
    const server = new BrokerServer({ broker, socketPath, peerCredentials: (socket) => native().peerCredentials(socketFd(socket)) });
    await step('the broker cannot listen', async () => {
      cleanup.push(() => server.close());
      await server.listen();
    });
    await step('cannot open the turn', () => broker.beginTurn());
    const sandboxed = await step('cannot start the launcher', async () =>
      spawnSandboxed({
        argv: ['/bin/bash', '-c', command],
        cwd: workspace,
        env: {
          ...env,
          TMPDIR: scratch,
          [ENV.socket]: socketPath,
          [ENV.sessionId]: sessionId,
          [ENV.toolCallId]: toolCallId,
          [ENV.traceId]: traceId,
        },
        scratchDirs: [scratch],
        onRequest: kernelBridge(broker, { toolCallId, traceId }),
        onProtocolError: (reason) => log.error({ phase: 'kernel', reason }, 'supervisor channel problem'),
      }),
    );
    // Stopping `run` stops the command (the launcher passes the signal on), and the turn is still committed.
    for (const signal of FORWARDED_SIGNALS) {
      const forward = () => void sandboxed.child.kill(signal);
      forwarders.set(signal, forward);
      process.on(signal, forward);
    }
    const exit = await step('the launcher did not start', () => sandboxed.exit);
    let turn: Turn | undefined;
    try {
      turn = await broker.commitTurn(options.message ?? command);
    } catch (error) {
      // The command ran: its status stands, and the person learns the turn was not committed.
      io.err(`brokered-shell run: the turn could not be committed: ${describeError(error)}`);
    }
    report(io, turn, approval?.takeBlocks() ?? [], denied);
    if (exit.code === null) return 128 + (os.constants.signals[exit.signal as NodeJS.Signals] ?? 0);
    return exit.code;
  } catch (error) {
    if (error instanceof CannotStart) return cannotStart(error.message);
    throw error;
  } finally {
    for (const [signal, forward] of forwarders) process.off(signal, forward);
    for (const undo of cleanup.reverse()) await undo().catch(() => undefined);
  }
}

function report(io: Io, turn: Turn | undefined, blocks: PromptBlock[], denied: Map<string, string>): void {
  for (const [what, why] of denied) io.err(`brokered-shell: denied ${what}: ${why}`);
  const files = Number(turn?.facts.backups ?? 0);
  if (turn && files > 0) {
    io.err(`brokered-shell: turn ${turn.id} backed up ${files} file${files === 1 ? '' : 's'} (brokered-shell backups show ${turn.id})`);
  }
  for (const block of blocks) {
    io.err(`brokered-shell: needs approval: ${block.access} ${block.normalisedPath}${block.reason ? ` (${block.reason})` : ''}`);
  }
}
