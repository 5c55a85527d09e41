#!/usr/bin/env node
// @ts-check
/**
 * A Claude Code PreToolUse hook that routes its Bash tool through `brokered-shell run`:
 * the command Claude Code runs becomes `brokered-shell run --workspace CWD --session S
 * --message DESCRIPTION -- 'COMMAND'`, so every write, rename and delete it makes is
 * judged by the policy and each existing file is backed up first, one turn per command.
 * S is this Claude Code session's brokered-shell session, marked with the workspace, so
 * `rewind.mjs` (the /rewind command of commands/bsh-rewind.md) finds its turns.
 *
 * In .claude/settings.json:
 *   { "hooks": { "PreToolUse": [{ "matcher": "Bash",
 *       "hooks": [{ "type": "command", "command": "node \"$CLAUDE_PROJECT_DIR\"/.claude/hooks/pre-tool-use.mjs" }] }] } }
 *
 * It reads the hook's JSON on stdin and answers on stdout with `updatedInput` (the
 * rewritten command) and `permissionDecision` "allow": the sandbox and the backups are what
 * make the command safe to run without Claude Code's own question; set
 * BROKERED_SHELL_HOOK_DECISION=ask to keep that question. Every Bash command is wrapped, one
 * that itself starts with `brokered-shell run` too: its flags (`--policy`, `--yes`,
 * `--no-backup`) would be the model's choosing, and run inside the sandbox it cannot reach
 * the store, so it fails closed. Other tools get no answer: Claude Code goes on as usual.
 * BROKERED_SHELL_BIN names the CLI (default `brokered-shell`, on PATH through a global or
 * `npx` install).
 */
import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { workspaceSession } from 'brokered-shell';

/** @param {string} text */
const shellQuote = (text) => `'${text.replaceAll("'", `'\\''`)}'`;

/**
 * The hook's answer to one PreToolUse payload, or undefined to let Claude Code go on as usual.
 * @param {{ session_id?: string, cwd?: string, hook_event_name?: string, tool_name?: string, tool_input?: { command?: unknown, description?: unknown } & Record<string, unknown> }} payload
 * @param {NodeJS.ProcessEnv} env
 */
export function answer(payload, env = process.env) {
  const input = payload.tool_input;
  if (payload.hook_event_name !== 'PreToolUse' || payload.tool_name !== 'Bash' || typeof input?.command !== 'string') return undefined;
  const bin = env.BROKERED_SHELL_BIN ?? 'brokered-shell';
  const workspace = realpathSync(payload.cwd ?? process.cwd());
  const session = workspaceSession(workspace, `claude-${payload.session_id ?? 'session'}`);
  const message = typeof input.description === 'string' && input.description !== '' ? input.description : input.command;
  const command = `${bin} run --workspace ${shellQuote(workspace)} --session ${shellQuote(session)} --message ${shellQuote(message)} -- ${shellQuote(input.command)}`;
  return {
    hookSpecificOutput: {
      hookEventName: 'PreToolUse',
      permissionDecision: env.BROKERED_SHELL_HOOK_DECISION === 'ask' ? 'ask' : 'allow',
      permissionDecisionReason: 'runs in the brokered-shell sandbox: writes are judged by its policy and backed up (undo: /bsh-rewind)',
      updatedInput: { ...input, command },
    },
  };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  let text = '';
  for await (const chunk of process.stdin) text += chunk;
  const reply = answer(JSON.parse(text));
  if (reply) process.stdout.write(`${JSON.stringify(reply)}\n`);
}
