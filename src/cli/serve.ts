import { dirname, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { standardOptionsOf } from '../agent/config.js';
import { resolveWorkspace } from '../agent/workspace.js';
import { resolveHome, validateSessionId } from '../backup/layout.js';
import { Broker, type Logger } from '../core/index.js';
import { BrokerServer } from '../ipc/server.js';
import { socketPeerCredentials } from '../native/index.js';
import { getAuditHooks } from '../plugins/audit.js';
import { HeldWritesPlugin } from '../plugins/held-writes/index.js';
import { standardPlugins } from '../plugins/standard.js';
import { noteBrokerRequest } from './code-cache.js';
import { ExitCode } from './exit-codes.js';
import { describeError, type Io } from './output.js';
import { effectiveConfig } from './effective-config.js';

export interface ServeOptions {
  socket: string;
  session: string;
  workspace?: string;
  policy?: string;
}

/** The control commands the owner may send on stdin, answered one JSON line each on stdout. */
const CONTROL = new Set(['EnableModifyBackup', 'ModifyBackup', 'CommitModifyBackup', 'Shutdown']);

/**
 * What serve holds for its owner stays bounded: past this many bytes of answers the owner
 * has not read from stdout, or this many control lines read and not answered yet, stdin is
 * not read until the owner catches up (its writes then wait in the pipe). An owner that
 * writes and never reads would otherwise make serve hold every line and every answer.
 * Only the owner waits; socket clients are answered meanwhile.
 */
const MAX_UNREAD_CONTROL_BYTES = 64 * 1024;
const MAX_PENDING_CONTROL_LINES = 64;

/**
 * The owner's pipe: control lines come on `input`; their answers, written through
 * `io.out`, go to `output`, which tells how much of them the owner has not read yet.
 */
export interface ControlStreams {
  input: NodeJS.ReadableStream & { destroy(): void };
  output: NodeJS.WritableStream & { readonly writableLength: number; readonly destroyed: boolean };
}

/**
 * `serve`: the broker alone, for external clients on a Unix socket. Only the parent
 * that started it holds stdin/stdout, so only it can send control commands.
 */

export async function serveCommand(
  io: Io,
  options: ServeOptions,
  log: Logger,
  env: NodeJS.ProcessEnv = process.env,
  control: ControlStreams = { input: process.stdin, output: process.stdout },
): Promise<number> {
  const sessionId = validateSessionId(options.session);
  const workspace = await resolveWorkspace(options.workspace);
  const config = await effectiveConfig(workspace, options.policy, env);
  const socketPath = resolve(options.socket);
  const broker = new Broker({ sessionId, logger: log });
  broker.use(...standardPlugins(standardOptionsOf(config, { home: resolveHome(env), workspace, protectedPaths: [dirname(socketPath)], env })));
  getAuditHooks(broker).record.tap('code-cache', noteBrokerRequest);
  const partial = Number(env.BROKERED_SHELL_PARTIAL_LINE_TIMEOUT_MS);
  const unreadGrace = Number(env.BROKERED_SHELL_UNREAD_GRACE_MS);
  const server = new BrokerServer({
    broker,
    socketPath,
    ...(partial > 0 ? { partialLineTimeoutMs: partial } : {}),
    ...(unreadGrace > 0 ? { unreadGraceMs: unreadGrace } : {}),
    peerCredentials: socketPeerCredentials,
  });
  await server.listen();

  let stopping: Promise<{ status: number; turnId?: string }> | undefined;
  /** Commit the open turn (nothing lost), close the socket, stop. Runs once. */
  const stop = (reason: string) => {
    stopping ??= (async () => {
      try {
        // The last commit: no turn opens after it for what clients still hold.
        broker.plugin<HeldWritesPlugin>(HeldWritesPlugin.PLUGIN_NAME)?.stop();
        const turn = broker.currentTurn ? await broker.commitTurn(`serve stopped (${reason})`) : undefined;
        await server.close();
        await broker.close();
        return { status: ExitCode.OK, ...(turn ? { turnId: turn.id } : {}) };
      } catch (error) {
        io.err(`brokered-shell serve: could not stop cleanly: ${describeError(error)}`);
        return { status: ExitCode.FAILURE };
      }
    })();
    return stopping;
  };

  let lines: ReturnType<typeof createInterface> | undefined;
  const done = new Promise<number>((resolveDone) => {
    const stopWith = async (reason: string) => resolveDone((await stop(reason)).status);
    process.once('SIGTERM', () => void stopWith('SIGTERM'));
    process.once('SIGINT', () => void stopWith('SIGINT'));
    const input = createInterface({ input: control.input, crlfDelay: Infinity });
    lines = input;
    let queue = Promise.resolve();
    let pending = 0;
    // Read on while the owner keeps up; readline may still hand over the lines of a chunk it read.
    const pace = () => {
      const unread = control.output.writableLength > MAX_UNREAD_CONTROL_BYTES && !control.output.destroyed;
      if (unread || pending >= MAX_PENDING_CONTROL_LINES) input.pause();
      else input.resume();
    };
    control.output.on('drain', pace);
    input.on('line', (line) => {
      if (!line.trim()) return;
      pending += 1;
      pace();
      // One answer per line, in order, even when a commit takes a while.
      queue = queue.then(async () => {
        await roomToAnswer(control.output);
        const answer = await answerControl(broker, line);
        pending -= 1;
        if (answer.shutdown !== true) {
          io.out(JSON.stringify(answer));
          pace();
          return;
        }
        const stopped = await stop('Shutdown');
        const { shutdown: _shutdown, ...rest } = answer;
        io.out(JSON.stringify({ ...rest, ok: stopped.status === ExitCode.OK, ...(stopped.turnId ? { turnId: stopped.turnId } : {}) }));
        resolveDone(stopped.status);
      });
    });
    // The owner went away: nobody can commit or stop us any more, so commit and leave.
    input.on('close', () => void queue.then(() => stopWith('stdin closed')));
  });

  io.out(JSON.stringify({ ready: true, socket: socketPath, sessionId, pid: process.pid, workspace }));
  const status = await done;
  // Stop reading the owner's pipe so nothing keeps the process alive after the broker stopped.
  lines?.close();
  control.input.destroy();
  return status;
}

/** Settles once `out` holds at most MAX_UNREAD_CONTROL_BYTES its reader has not taken (or is gone). */
async function roomToAnswer(out: ControlStreams['output']): Promise<void> {
  if (out.writableLength <= MAX_UNREAD_CONTROL_BYTES || out.destroyed) return;
  await new Promise<void>((resolve) => {
    const done = () => {
      out.off('drain', done);
      out.off('close', done);
      resolve();
    };
    out.once('drain', done);
    out.once('close', done);
  });
}

async function answerControl(broker: Broker, line: string): Promise<Record<string, unknown>> {
  let message: unknown;
  try {
    message = JSON.parse(line);
  } catch {
    return { ok: false, error: 'control line is not JSON' };
  }
  if (typeof message !== 'object' || message === null || Array.isArray(message)) return { ok: false, error: 'control line must be an object' };
  const { command, id, ...payload } = message as Record<string, unknown>;
  const echo = id === undefined ? {} : { id };
  if (typeof command !== 'string' || !CONTROL.has(command)) return { ...echo, ok: false, error: `unknown control command: ${String(command)}` };
  if (command === 'Shutdown') return { ...echo, ok: true, shutdown: true };
  return { ...echo, ...(await broker.control(command, payload)) };
}
