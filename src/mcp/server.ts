import path from 'node:path';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { SandboxUnavailableError } from '../agent/errors.js';
import { notStartedReport, runReport, type RunReport } from '../agent/run-report.js';
import type { SandboxSession } from '../agent/session.js';
import type { TurnHistory } from '../agent/turn-history.js';
import { turnJson } from '../agent/turn-json.js';
import type { RunningCommand } from '../agent/types.js';
import { BrokerError } from '../core/errors.js';
import type { UnaskedAnswer } from './approver.js';
import { diffText, restoreText, runText, turnText, turnsText } from './text.js';

export interface McpToolsOptions {
  /** Where `run` runs commands, one turn each. */
  session: SandboxSession;
  /** The turns `list_turns`, `show_turn`, `diff_turn` and `restore_turn` see: the workspace's. */
  history: TurnHistory;
  /** What approval questions get when the client cannot be asked. */
  unasked: UnaskedAnswer;
}

const turnArgument = z.string().min(1).max(256).describe('a turn id, a unique prefix of one, or "latest" (the last committed turn)');

/** A tool's answer: text for the model, the same as an object for programs. */
function answer(text: string, structured: Record<string, unknown>): CallToolResult {
  return { content: [{ type: 'text', text }], structuredContent: structured };
}

/** A failure the caller can act on (a turn that does not exist, an ambiguous prefix), said as a tool error with its code. */
async function answering(task: () => Promise<CallToolResult>): Promise<CallToolResult> {
  try {
    return await task();
  } catch (error) {
    if (!(error instanceof BrokerError)) throw error;
    return { isError: true, content: [{ type: 'text', text: `${error.message} [${error.code}]` }] };
  }
}

/**
 * The MCP server: one tool per thing an agent does with brokered-shell. Calls that change
 * files (`run`, `restore_turn`) take turns, one at a time, so a restore never races a
 * command and each command is its own turn.
 */
export class BrokeredShellMcp {
  readonly server: McpServer;
  readonly #running = new Set<RunningCommand>();
  #serial: Promise<unknown> = Promise.resolve();

  constructor(version: string) {
    this.server = new McpServer({ name: 'brokered-shell', version }, { capabilities: { tools: {} } });
  }

  /** Signal every command still running (the client went away). */
  stopCommands(signal: NodeJS.Signals = 'SIGTERM'): void {
    for (const command of this.#running) command.signalAll(signal);
  }

  registerTools(options: McpToolsOptions): void {
    const { session, history, unasked } = options;
    this.server.registerTool(
      'run',
      {
        title: 'Run a shell command',
        description:
          'Run a shell command with bash in the workspace, inside a kernel sandbox: every write, rename and delete is checked by policy and each existing file is backed up first, as one turn that restore_turn can undo. Returns the exit code, stdout, stderr, the turn and what was refused, with reasons.',
        inputSchema: {
          command: z.string().min(1).describe('the command line, run by bash -c in the workspace'),
          timeoutSeconds: z.number().positive().max(86_400).optional().describe('kill the command and everything it started after this long'),
        },
        annotations: { destructiveHint: true, openWorldHint: true },
      },
      async ({ command, timeoutSeconds }) =>
        answering(() =>
          this.#exclusively(async () => {
            const report = await this.#run(session, command, timeoutSeconds);
            const canAsk = this.server.server.getClientCapabilities()?.elicitation !== undefined;
            return answer(runText(report, unasked, canAsk), { ...report });
          }),
        ),
    );
    this.server.registerTool(
      'list_turns',
      { title: 'List turns', description: 'The turns run in this workspace (each run is one), oldest first: id, when, how many files each backed up or created.', annotations: { readOnlyHint: true } },
      async () =>
        answering(async () => {
          const turns = (await history.list()).map(turnJson);
          return answer(turnsText(turns), { turns });
        }),
    );
    this.server.registerTool(
      'show_turn',
      { title: 'Show a turn', description: 'The files one turn backed up and the paths it created.', inputSchema: { turn: turnArgument }, annotations: { readOnlyHint: true } },
      async ({ turn }) =>
        answering(async () => {
          const shown = turnJson((await history.find(turn)).manifest);
          return answer(turnText(shown), shown);
        }),
    );
    this.server.registerTool(
      'diff_turn',
      {
        title: 'Diff a turn',
        description: 'What a turn changed: a unified diff of each file from before the turn to now.',
        inputSchema: { turn: turnArgument, path: z.string().min(1).optional().describe('only this file') },
        annotations: { readOnlyHint: true },
      },
      async ({ turn, path: file }) =>
        answering(async () => {
          const diff = await history.diff(turn, file === undefined ? {} : { path: path.resolve(session.workspace, file) });
          return answer(diffText(diff), { ...diff });
        }),
    );
    this.server.registerTool(
      'restore_turn',
      {
        title: 'Restore a turn',
        description:
          'Undo a turn: put every file it touched back as it was before it, byte for byte (files it created are removed). Files changed since the turn are left alone unless force. What is replaced is kept in a new turn, which restoring undoes the restore.',
        inputSchema: {
          turn: turnArgument,
          paths: z.array(z.string().min(1)).optional().describe('only these files (and what is under them)'),
          dryRun: z.boolean().optional().describe('change nothing, say what would be restored'),
          force: z.boolean().optional().describe('also restore files changed since the turn'),
        },
        annotations: { destructiveHint: true },
      },
      async ({ turn, paths, dryRun, force }) =>
        answering(() =>
          this.#exclusively(async () => {
            const report = await history.restore(turn, {
              ...(paths === undefined ? {} : { paths: paths.map((p) => path.resolve(session.workspace, p)) }),
              ...(dryRun === undefined ? {} : { dryRun }),
              ...(force === undefined ? {} : { force }),
            });
            return answer(restoreText(report), { ...report });
          }),
        ),
    );
  }

  async #run(session: SandboxSession, command: string, timeoutSeconds: number | undefined): Promise<RunReport> {
    await session.beginTurn({ userMessage: command });
    let started: RunningCommand | undefined;
    try {
      const result = await session.execute(command, {
        ...(timeoutSeconds === undefined ? {} : { timeoutMs: timeoutSeconds * 1000 }),
        onStart: (running) => {
          started = running;
          this.#running.add(running);
        },
      });
      return runReport(result, await session.endTurn({ message: command }));
    } catch (error) {
      if (!(error instanceof SandboxUnavailableError)) throw error;
      await session.endTurn({ message: command });
      return notStartedReport(`the sandbox cannot start: ${error.message}`);
    } finally {
      if (started) this.#running.delete(started);
    }
  }

  #exclusively<T>(task: () => Promise<T>): Promise<T> {
    const run = this.#serial.then(task, task);
    this.#serial = run.catch(() => undefined);
    return run;
  }
}
