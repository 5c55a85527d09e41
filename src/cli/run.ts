import { randomBytes } from 'node:crypto';
import { mkdtemp, realpath, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { resolveHome } from '../backup/layout.js';
import { readPolicyFile } from '../config/policy-file.js';
import { Broker, type Logger } from '../core/index.js';
import { BrokerServer } from '../ipc/server.js';
import { native, socketFd } from '../native/index.js';
import { ApprovalPlugin, type PromptBlock } from '../plugins/approval.js';
import { getAuditHooks } from '../plugins/audit.js';
import { standardPlugins } from '../plugins/standard.js';
import { kernelBridge } from '../sandbox/kernel-bridge.js';
import { checkSandboxSupport, spawnSandboxed } from '../sandbox/index.js';
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

/**
 * `run`: one command under the kernel sandbox as one turn. Every modifying syscall of the
 * command and its children goes through the broker's pipeline; the turn is committed at
 * the end; the exit status is the command's (126 when the sandbox cannot start).
 */
export async function runCommand(io: Io, command: string, options: RunOptions, log: Logger, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const support = checkSandboxSupport();
  if (!support.ok) {
    io.err(`brokered-shell run: the sandbox cannot start, nothing was run: ${support.message}`);
    return ExitCode.SANDBOX_UNAVAILABLE;
  }
  const workspace = await realpath(path.resolve(options.workspace ?? process.cwd()));
  const policy = options.policy ? await readPolicyFile(path.resolve(options.policy), workspace) : undefined;
  const sessionId = options.session ?? newId('run');
  const toolCallId = newId('call');
  const traceId = newId('trace');
  // Scratch is the command's own temp dir; the socket lives apart so the command cannot replace it.
  const scratch = await realpath(await mkdtemp(path.join(os.tmpdir(), 'brokered-shell-scratch-')));
  const socketDir = await realpath(await mkdtemp(path.join(os.tmpdir(), 'brokered-shell-broker-')));
  const socketPath = path.join(socketDir, 'broker.sock');
  const broker = new Broker({ sessionId, logger: log });
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
    if (record.ok || record.verdict === 'prompt' || record.verdict === 'sandbox' || record.verdict === 'grant-token') return;
    const path = record.paths.find((p) => p.access !== 'read') ?? record.paths[0];
    if (path && denied.size < 20) denied.set(`${path.access} ${path.normalisedPath ?? path.path}`, record.reason ?? record.error?.message ?? 'denied');
  });
  const server = new BrokerServer({ broker, socketPath, peerCredentials: (socket) => native().peerCredentials(socketFd(socket)) });
  try {
    await server.listen();
    await broker.beginTurn();
    const sandboxed = spawnSandboxed({
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
    });
    const exit = await sandboxed.exit;
    const turn = await broker.commitTurn(options.message ?? command);
    report(io, turn.id, Number(turn.facts.backups ?? 0), approval?.takeBlocks() ?? [], denied);
    if (exit.code === null) return 128 + (os.constants.signals[exit.signal as NodeJS.Signals] ?? 0);
    return exit.code;
  } catch (error) {
    io.err(`brokered-shell run: ${describeError(error)}`);
    return ExitCode.SANDBOX_UNAVAILABLE;
  } finally {
    await server.close().catch(() => undefined);
    await broker.close().catch(() => undefined);
    await rm(scratch, { recursive: true, force: true });
    await rm(socketDir, { recursive: true, force: true });
  }
}

function report(io: Io, turnId: string, files: number, blocks: PromptBlock[], denied: Map<string, string>): void {
  for (const [what, why] of denied) io.err(`brokered-shell: denied ${what}: ${why}`);
  if (files > 0) io.err(`brokered-shell: turn ${turnId} backed up ${files} file${files === 1 ? '' : 's'} (brokered-shell backups show ${turnId})`);
  for (const block of blocks) {
    io.err(`brokered-shell: needs approval: ${block.access} ${block.normalisedPath}${block.reason ? ` (${block.reason})` : ''}`);
  }
}
