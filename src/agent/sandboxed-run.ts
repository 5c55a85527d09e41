import type { Broker, Logger } from '../core/index.js';
import { kernelBridge, kernelRefusalAudit } from '../sandbox/kernel-bridge.js';
import { spawnPreloaded } from '../sandbox/preload.js';
import { spawnSandboxed } from '../sandbox/spawn.js';
import { NetworkPlugin } from '../plugins/network/index.js';
import { ToolCallBindingPlugin } from '../plugins/tool-call-binding.js';
import type { KernelChannel } from '../sandbox/channel.js';
import { BROKER_ENV } from './env.js';
import { SandboxUnavailableError } from './errors.js';
import { killTree, signalTree } from './process-tree.js';
import type { CommandStdio, StartedCommand } from './run-process.js';
import type { SandboxResources } from './session-setup.js';

export interface SandboxedStart {
  broker: Broker;
  log: Logger;
  sandbox: SandboxResources;
  argv: readonly string[];
  cwd: string;
  /** The command's environment before the broker's variables are added. */
  env: NodeJS.ProcessEnv;
  /** This call's own temp dir (TMPDIR, freely writable). */
  scratch: string;
  writableRoots: readonly string[];
  /** Unix sockets the command may connect to besides its temp dir's and the broker's. */
  unixSockets: readonly string[];
  /** What the command may not read or execute (the read policy's paths now); Landlock keeps them from it. */
  readDenied: readonly string[];
  toolCallId: string;
  traceId: string;
  stdio: CommandStdio;
}

/**
 * Start a command in the session's runtime. seccomp: the launcher's supervisor asks the
 * broker about every modifying syscall (kernelBridge) and, when its command ends or is
 * killed, kills everything the command left; killing the command's tree is therefore
 * enough to stop it all. preload: the library inside the command asks over the socket;
 * the launcher stays as the command's subreaper and ends what it left the same way.
 */
export function startSandboxed(start: SandboxedStart): StartedCommand {
  const { sandbox, broker, toolCallId, traceId } = start;
  const env: NodeJS.ProcessEnv = {
    ...start.env,
    TMPDIR: start.scratch,
    [BROKER_ENV.socket]: sandbox.socketPath,
    [BROKER_ENV.sessionId]: broker.sessionId,
    [BROKER_ENV.toolCallId]: toolCallId,
    [BROKER_ENV.traceId]: traceId,
  };
  delete env[BROKER_ENV.runtime];
  try {
    if (sandbox.runtime.runtime === 'preload') {
      const started = spawnPreloaded({
        argv: start.argv,
        cwd: start.cwd,
        env: { ...env, [BROKER_ENV.runtime]: 'preload' },
        writableDirs: start.writableRoots,
        readDenied: start.readDenied,
        stdio: start.stdio,
      });
      const pid = started.child.pid;
      const unbind = bindCall(broker, pid, toolCallId);
      // As below: the launcher stays (the command's subreaper), sees it die and kills the rest.
      return {
        child: started.child,
        exit: launcherExit(started.exit).finally(unbind),
        killTree: () => void (pid !== undefined && killTree(pid)),
        signalTree: (signal) => void (pid !== undefined && signalTree(pid, signal)),
      };
    }
    const network = broker.plugin<NetworkPlugin>(NetworkPlugin.PLUGIN_NAME);
    let channel: KernelChannel | undefined;
    const detach = network?.attach(toolCallId, (lines) => channel?.pushNetworkTable(lines));
    const meta = { toolCallId, traceId };
    const started = spawnSandboxed({
      argv: start.argv,
      cwd: start.cwd,
      env: network?.mode === 'allowlist' ? withTcpResolver(env) : env,
      scratchDirs: [start.scratch],
      unixSockets: [sandbox.socketPath, ...start.unixSockets],
      readDenied: start.readDenied,
      onRequest: kernelBridge(broker, { toolCallId, traceId }),
      onRefusal: kernelRefusalAudit(broker, { toolCallId, traceId }),
      onProtocolError: (reason) => start.log.error({ phase: 'kernel', reason, toolCallId }, 'supervisor channel problem'),
      ...(network
        ? {
            network: {
              table: network.tableFor(toolCallId),
              onConnection: (record) => network.record(record, meta),
              onQuestion: (question) => network.question(question, meta),
            },
          }
        : {}),
      stdio: start.stdio,
    });
    channel = started.channel;
    const pid = started.child.pid;
    const unbind = bindCall(broker, pid, toolCallId);
    // The launcher itself stays: it sees its command die, kills the rest and exits.
    return {
      child: started.child,
      exit: launcherExit(started.exit).finally(unbind),
      ...(detach ? { detachNetwork: detach } : {}),
      killTree: () => void (pid !== undefined && killTree(pid)),
      signalTree: (signal) => void (pid !== undefined && signalTree(pid, signal)),
    };
  } catch (error) {
    throw new SandboxUnavailableError(`cannot start the launcher: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
}

/**
 * glibc's resolver checks that an answer over UDP comes from the resolver's own address,
 * which the supervisor's DNS proxy cannot give; over TCP it does not (and waits for as
 * long as a question to a person takes). A program that drops the variable still gets
 * no query past the proxy, only no answer.
 */
function withTcpResolver(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const options = env.RES_OPTIONS ?? '';
  return /(^|\s)use-vc(\s|$)/.test(options) ? env : { ...env, RES_OPTIONS: `${options} use-vc`.trim() };
}

/**
 * The call's processes are those below `pid` (the launcher is their subreaper): socket
 * requests from them must name this call (see ToolCallBindingPlugin). Bound before any
 * request of theirs can be read: spawn returned synchronously, in this tick.
 */
function bindCall(broker: Broker, pid: number | undefined, toolCallId: string): () => void {
  const binding = broker.plugin<ToolCallBindingPlugin>(ToolCallBindingPlugin.PLUGIN_NAME);
  return pid === undefined || !binding ? () => undefined : binding.bind(pid, toolCallId);
}

function launcherExit(exit: Promise<{ code: number | null; signal: string | null }>): Promise<{ code: number | null; signal: string | null }> {
  return exit.catch((error: unknown) => {
    throw new SandboxUnavailableError(`the launcher did not start: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  });
}
