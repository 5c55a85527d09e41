/**
 * brokered-shell as the shell tool of an agent framework: the objects the Vercel AI SDK's
 * `tool({ description, inputSchema, execute })` and the OpenAI Agents SDK's
 * `tool({ name, description, parameters, execute })` take, built on one session. Pass them
 * to those functions (`tools: { bash: tool(aiSdkTools(session).bash) }`, `new Agent({ tools:
 * [tool(openAiAgentsTools(session)[0])] })`); no SDK is needed to build them, and nothing
 * here talks to a network.
 *
 * Each call of `bash` is one turn: its result tells the model the exit code, the output,
 * what was backed up and what was refused and why, so it can adjust; `undo` restores the
 * latest turn byte for byte.
 */
import { z } from 'zod';
import { runReport, type RestoreReport, type RunReport, type SandboxSession } from 'brokered-shell';

const bashInput = z.object({ command: z.string().min(1).describe('the shell command, run by bash in the project') });
// Every field required: the OpenAI Agents SDK's strict schemas allow no defaults.
const undoInput = z.object({ turn: z.string().min(1).describe('the turn to undo: the turnId of a bash result, or "latest"') });

/** What the model reads back from `bash`: the run report without what it does not need. */
export type BashToolResult = Pick<RunReport, 'exitCode' | 'stdout' | 'stderr' | 'turnId' | 'refusals'> & { backedUp: number };

/** One command as one turn of the session. */
export async function runAsTurn(session: SandboxSession, command: string, signal?: AbortSignal): Promise<BashToolResult> {
  await session.beginTurn({ userMessage: command });
  let stop: (() => void) | undefined;
  const result = await session.execute(command, {
    onStart: (running) => {
      const kill = () => running.signalAll('SIGTERM');
      signal?.addEventListener('abort', kill, { once: true });
      stop = () => signal?.removeEventListener('abort', kill);
    },
  });
  stop?.();
  const report = runReport(result, await session.endTurn({ message: command }));
  return { exitCode: report.exitCode, stdout: report.stdout, stderr: report.stderr, turnId: report.turnId, refusals: report.refusals, backedUp: report.summary?.files ?? 0 };
}

async function undo(session: SandboxSession, turn: string): Promise<Pick<RestoreReport, 'turnId' | 'restored' | 'conflicts'>> {
  const report = await session.restore(turn);
  return { turnId: report.turnId, restored: report.restored, conflicts: report.conflicts };
}

const BASH_DESCRIPTION =
  'Run a shell command in the project, in a sandbox: writes outside the project are refused, and every file is backed up before it changes, so the command can be undone. The result lists what was refused, with the reason.';
const UNDO_DESCRIPTION = 'Undo a bash command: put the files it changed back as they were before it.';

/** The Vercel AI SDK's tool shape (`inputSchema`; `execute(input, { abortSignal })`). */
export function aiSdkTools(session: SandboxSession) {
  return {
    bash: {
      description: BASH_DESCRIPTION,
      inputSchema: bashInput,
      execute: (input: z.infer<typeof bashInput>, options?: { abortSignal?: AbortSignal }) => runAsTurn(session, input.command, options?.abortSignal),
    },
    undo: {
      description: UNDO_DESCRIPTION,
      inputSchema: undoInput,
      execute: (input: z.infer<typeof undoInput>) => undo(session, input.turn),
    },
  };
}

/** The OpenAI Agents SDK's function tool shape (`name`, `parameters`; `execute(input)`). */
export function openAiAgentsTools(session: SandboxSession) {
  return [
    { name: 'bash', description: BASH_DESCRIPTION, parameters: bashInput, execute: (input: z.infer<typeof bashInput>) => runAsTurn(session, input.command) },
    { name: 'undo', description: UNDO_DESCRIPTION, parameters: undoInput, execute: (input: z.infer<typeof undoInput>) => undo(session, input.turn) },
  ] as const;
}
