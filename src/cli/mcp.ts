import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { SandboxUnavailableError } from '../agent/errors.js';
import { checkStore } from '../agent/preflight.js';
import { createSandboxSession, type SandboxSession } from '../agent/session.js';
import { TurnHistory, openBackupHome } from '../agent/turn-history.js';
import { resolveWorkspace } from '../agent/workspace.js';
import { workspaceSessionId, workspaceSessions } from '../agent/workspace-sessions.js';
import { resolveHome } from '../backup/layout.js';
import { BrokerError, ErrorCodes, type Logger } from '../core/index.js';
import { elicitingApprover, type UnaskedAnswer } from '../mcp/approver.js';
import { BrokeredShellMcp } from '../mcp/server.js';
import { effectiveConfig } from './effective-config.js';
import { ExitCode } from './exit-codes.js';
import { describeError, type Io } from './output.js';
import { packageVersion } from './version.js';

export interface McpCommandOptions {
  workspace?: string;
  policy?: string;
  /** What approval questions get when the client cannot be asked (no elicitation). */
  answer?: UnaskedAnswer;
}

/** Resolves when the client is gone (stdin ended) or the server is told to stop. */
function untilClientLeaves(mcp: BrokeredShellMcp, input: NodeJS.ReadableStream): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      input.off('end', done);
      input.off('close', done);
      process.off('SIGTERM', done);
      process.off('SIGINT', done);
      resolve();
    };
    input.once('end', done);
    input.once('close', done);
    process.once('SIGTERM', done);
    process.once('SIGINT', done);
    mcp.server.server.onclose = done;
  });
}

/**
 * `mcp`: an MCP server on stdin/stdout for one workspace (src/mcp/). One sandbox session
 * for the server's life, its id marked with the workspace's (src/agent/workspace-sessions.ts),
 * so the turn tools see every session run there. Stdout carries only the protocol:
 * commands' output is captured into the tool results, brokered-shell's own lines and
 * logs go to stderr. When the client leaves, running commands are stopped and the open
 * turn is committed.
 */
export async function mcpCommand(io: Io, options: McpCommandOptions, log: Logger, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const workspace = await resolveWorkspace(options.workspace);
  const home = resolveHome(env);
  let session: SandboxSession;
  const mcp = new BrokeredShellMcp(packageVersion());
  const unasked = options.answer ?? 'no';
  try {
    const config = await effectiveConfig(workspace, options.policy, env);
    await checkStore(home, 'usable');
    session = await createSandboxSession({
      workspace,
      sessionId: workspaceSessionId(workspace, 'mcp'),
      config,
      home,
      env,
      logger: log,
      approver: elicitingApprover(mcp.server.server, unasked, log),
      storeUnavailable: 'deny-changes',
    });
  } catch (error) {
    const known = error instanceof SandboxUnavailableError || (error instanceof BrokerError && (error.code === ErrorCodes.INVALID_OPTIONS || error.code === ErrorCodes.STORE_UNAVAILABLE));
    if (!known) throw error;
    io.err(`brokered-shell mcp: cannot start: ${describeError(error)}`);
    return ExitCode.FAILURE;
  }
  if (session.runtimeNotice) io.err(`brokered-shell mcp: ${session.runtimeNotice}`);
  const backupHome = openBackupHome(home);
  mcp.registerTools({ session, history: new TurnHistory(backupHome, () => workspaceSessions(backupHome, workspace)), unasked });
  try {
    await mcp.server.connect(new StdioServerTransport());
    await untilClientLeaves(mcp, process.stdin);
  } finally {
    mcp.stopCommands();
    await session.close();
    await mcp.server.close().catch(() => undefined);
  }
  return ExitCode.OK;
}
