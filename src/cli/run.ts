import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { BROKER_ENV } from '../agent/env.js';
import { SandboxUnavailableError } from '../agent/errors.js';
import { checkStore } from '../agent/preflight.js';
import { createSandboxSession, type SandboxSession } from '../agent/session.js';
import type { Approver, ExecuteResult, ExecutionMode, RunningCommand } from '../agent/types.js';
import { resolveWorkspace } from '../agent/workspace.js';
import { resolveHome } from '../backup/layout.js';
import { HOME_CONFIG_FILE } from '../config/schema.js';
import { BrokerError, ErrorCodes, type Logger } from '../core/index.js';
import { blockKey, type ApprovalChoice, type AskedQuestion, type PromptBlock } from '../plugins/approval/index.js';
import { getAuditHooks } from '../plugins/audit.js';
import { ReadPolicyPlugin, namedUnreadable, unreadableHint } from '../plugins/read-policy/index.js';
import { describeConnection, type RefusedConnection } from '../plugins/network/index.js';
import type { RuntimeName } from '../sandbox/index.js';
import { askOnTerminal, describeBlock, terminalAvailable } from './approve.js';
import { noteBrokerRequest } from './code-cache.js';
import { ExitCode } from './exit-codes.js';
import { denialLine, unlistedLine } from '../agent/refusals.js';
import { notStartedReport, runReport } from '../agent/run-report.js';
import { turnSummaryLine, withConfigFile } from '../agent/turn-summary.js';
import { describeError, printable, type Io } from './output.js';
import { effectiveConfig } from './effective-config.js';

export interface RunOptions {
  workspace?: string;
  session?: string;
  policy?: string;
  message?: string;
  /** commander's negatable flag: false with --no-backup. */
  backup?: boolean;
  /** Default: seccomp where the kernel supports it, else preload. */
  runtime?: RuntimeName;
  /** Approve every approval request (for scripts). */
  yes?: boolean;
  /** Deny every approval request (for scripts). */
  no?: boolean;
  /**
   * One JSON object on stdout after the command (src/agent/run-report.ts): its status,
   * the turn, the summary, the refusals with reasons, the prompts; the command's own
   * output is captured into it instead of passed through.
   */
  json?: boolean;
}

/** The variables a command (and the shims inside it) finds the broker by. */
export const ENV = BROKER_ENV;

const newId = (prefix: string) => `${prefix}-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;

/** Why a command ran outside the sandbox, said on stderr: `run` promises a sandbox otherwise. */
const UNSANDBOXED: Partial<Record<ExecutionMode, string>> = {
  'sandbox-disabled': 'the configuration turns the sandbox off (sandbox.enabled: false)',
  excluded: "the command is listed in the configuration's sandbox.excludedCommands",
};

/** Signals a person or an agent sends to stop `run`: passed on to the command, and the turn is still committed. */
const FORWARDED_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

/**
 * Who approves what the policy asks a person about: `--yes`, `--no`, else the terminal
 * (a y/N question on stderr, answered on stdin) when there is one, else nobody (then
 * `run` lists what needs approval and exits 77).
 */
function approverFor(io: Io, options: RunOptions): Approver | undefined {
  // --yes approves everything it is asked about: inline, the widest choice that ends with the turn (a directory the command made), else the path for the session.
  if (options.yes) {
    return (request) => {
      if (request.kind === 'connection') return request.choices.find((choice) => choice.scope === 'session') ?? true;
      return request.kind === 'path' ? (widestForTurn(request.choices) ?? true) : true;
    };
  }
  if (options.no) return () => false;
  if (!terminalAvailable()) return undefined;
  return (request) => askOnTerminal(io, request);
}

function widestForTurn(choices: readonly ApprovalChoice[]): ApprovalChoice | undefined {
  return choices.find((choice) => choice.scope === 'directory' && choice.lasts === 'turn') ?? choices.find((choice) => choice.scope === 'session');
}

/**
 * `run`: one command in the sandbox as one turn of a sandbox session (src/agent). Every
 * modifying syscall of the command and its children goes through the broker's pipeline;
 * what needs approval is asked (and, approved, the command runs again brokered, in the
 * same turn); the turn is committed at the end. The exit status is the command's; 126
 * when nothing could be started (an invalid configuration, a missing or stale addon or
 * launcher, an unusable store); 77 when something needs approval and nobody could give it.
 */
export async function runCommand(io: Io, command: string, options: RunOptions, log: Logger, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const workspace = await resolveWorkspace(options.workspace);
  let base: Awaited<ReturnType<typeof effectiveConfig>>;
  try {
    base = await effectiveConfig(workspace, options.policy, env);
  } catch (error) {
    if (!(error instanceof BrokerError) || error.code !== ErrorCodes.INVALID_OPTIONS) throw error;
    return cannotStart(io, options, 'the configuration is invalid', describeError(error));
  }
  const config = { ...base, sandbox: { ...base.sandbox, ...(options.runtime ? { runtime: options.runtime } : {}) } };
  const approver = approverFor(io, options);
  const home = resolveHome(env);
  // The CLI's promise is a turn kept in the store, every existing file backed up first: a
  // store it cannot write stops `run` here, not at the command's first change.
  try {
    await checkStore(home, 'usable');
  } catch (error) {
    if (!(error instanceof BrokerError) || error.code !== ErrorCodes.STORE_UNAVAILABLE) throw error;
    return cannotStart(io, options, 'the backup store cannot be used', describeError(error));
  }
  let session: SandboxSession;
  try {
    // Checks the launcher and the addon before anything starts.
    session = await createSandboxSession({
      workspace,
      sessionId: options.session ?? newId('run'),
      config,
      home,
      env,
      logger: log,
      ...(approver ? { approver } : {}),
      // The CLI's promise: an existing file is never changed without its backup.
      storeUnavailable: 'deny-changes',
    });
  } catch (error) {
    if (error instanceof SandboxUnavailableError) return cannotStart(io, options, 'the sandbox cannot start', describeError(error));
    if (error instanceof BrokerError && error.code === ErrorCodes.STORE_UNAVAILABLE) return cannotStart(io, options, 'the backup store cannot be used', describeError(error));
    throw error;
  }
  if (session.runtimeNotice) io.err(`brokered-shell run: ${session.runtimeNotice}`);
  getAuditHooks(session.broker).record.tap('code-cache', noteBrokerRequest);
  const forwarders = new Map<NodeJS.Signals, () => void>();
  let current: RunningCommand | undefined;
  // Stopping `run` stops the command, and the turn is still committed. On a terminal, its
  // Ctrl-C already reached the command's processes (they share its foreground group): only
  // the command's shell gets it again, as before. Without one (an agent, a script), nobody
  // else signals them, so every process of the command gets it, as a terminal would do.
  const fromTerminal = process.stdin.isTTY === true || process.stdout.isTTY === true || process.stderr.isTTY === true;
  const onStart = (running: RunningCommand) => {
    current = running;
    if (forwarders.size > 0) return;
    for (const signal of FORWARDED_SIGNALS) {
      const forward = () => void (fromTerminal ? current?.kill(signal) : current?.signalAll(signal));
      forwarders.set(signal, forward);
      process.on(signal, forward);
    }
  };
  try {
    const message = options.message ?? command;
    await session.beginTurn({ userMessage: message, fileBackup: { enabled: options.backup !== false && config.fileBackup.enabled } });
    let result: ExecuteResult;
    try {
      result = await session.execute(command, { toolCallId: newId('call'), stdin: 'inherit', output: options.json ? 'capture' : 'inherit', onStart });
    } catch (error) {
      if (error instanceof SandboxUnavailableError) return cannotStart(io, options, 'the sandbox cannot start', describeError(error));
      throw error;
    }
    const outside = UNSANDBOXED[result.mode];
    if (outside) io.err(`brokered-shell run: ${outside}: the command ran without the sandbox and the broker, nothing was checked or backed up`);
    const ended = await session.endTurn({ message });
    // The command ran: its status stands, and the person learns the turn was not committed.
    if (!ended.ok) io.err(`brokered-shell run: the turn could not be committed: ${printable(ended.error ?? 'unknown error')}`);
    for (const refusal of result.refusals) if (refusal.kind === 'denied') io.err(denialLine(refusal));
    const unlisted = unlistedLine(result.unlistedRefusals);
    if (unlisted) io.err(unlisted);
    const hint = result.exitCode === 0 ? undefined : readHint(session, command);
    const homeConfigFile = path.join(resolveHome(env), HOME_CONFIG_FILE);
    if (hint) io.err(withConfigFile(hint, homeConfigFile));
    for (const refused of result.refusedConnections ?? []) io.err(refusedLine(refused, homeConfigFile));
    const summary = turnSummaryLine(ended);
    if (summary) io.err(summary);
    for (const notice of ended.notices ?? []) io.err(`brokered-shell: warning: ${printable(notice)}`);
    for (const file of ended.unsaved ?? []) {
      io.err(`brokered-shell: changed without a backup (over the size cap, fileBackup.oversize is skip; restoring cannot bring it back): ${printable(file)}`);
    }
    const status = reportApproval(io, result);
    if (options.json) io.out(JSON.stringify(runReport(result, ended)));
    return status;
  } finally {
    for (const [signal, forward] of forwarders) process.off(signal, forward);
    await session.close();
  }
}

/** `run` refused to start: one line on stderr (a configuration's problems one per line after it), status 126; with --json, the report says it too. */
function cannotStart(io: Io, options: RunOptions, what: string, why: string): number {
  io.err(`brokered-shell run: ${what}, nothing was run: ${why}`);
  if (options.json) io.out(JSON.stringify(notStartedReport(`${what}: ${why}`)));
  return ExitCode.SANDBOX_UNAVAILABLE;
}

/**
 * What needs approval, said on stderr. The status: the command's, unless something still
 * needs an approval nobody refused (no terminal and no --yes/--no): then 77.
 */
function reportApproval(io: Io, result: ExecuteResult): number {
  const { approval, promptBlocks } = result;
  if (!approval?.asked) {
    listNeeded(io, promptBlocks);
    if (promptBlocks.length === 0) return result.exitCode;
    io.err('brokered-shell: nothing was changed for these; run again with --yes to approve them (or on a terminal to be asked)');
    return ExitCode.APPROVAL_NEEDED;
  }
  if (approval.questions) return reportInline(io, result, approval.questions);
  // Asked and still refused (a last round said no, or a grant that could not lift it) is not "approved".
  const stillRefused = new Set(promptBlocks.map(blockKey));
  for (const block of approval.blocks) {
    if (!stillRefused.has(blockKey(block))) io.err(`brokered-shell: approved for this session: ${describeBlock(block)}`);
  }
  if (!approval.approved) {
    for (const block of promptBlocks) io.err(`brokered-shell: not approved: ${describeBlock(block)}`);
    return result.exitCode;
  }
  if (promptBlocks.length === 0) return result.exitCode;
  listNeeded(io, promptBlocks);
  const rounds = `${approval.rounds} round${approval.rounds === 1 ? '' : 's'}`;
  io.err(`brokered-shell: nothing was changed for these; still refused after ${rounds} of approving and running the command again`);
  return ExitCode.APPROVAL_NEEDED;
}

/** Inline questions: what was approved, and how far; what was refused (the command got EACCES there). The status is the command's. */
function reportInline(io: Io, result: ExecuteResult, questions: readonly AskedQuestion[]): number {
  for (const question of questions) {
    if (question.byScope !== undefined) continue;
    if (question.choice) io.err(`brokered-shell: approved ${SCOPE_WORDS[question.choice.scope]}: ${describeBlock(question.block)}`);
    else {
      const why = question.refusal === undefined || question.refusal === 'not approved' ? '' : ` (${printable(question.refusal)})`;
      io.err(`brokered-shell: not approved${why}: ${describeBlock(question.block)}`);
    }
  }
  const covered = questions.filter((question) => question.byScope !== undefined).length;
  if (covered > 0) io.err(`brokered-shell: ${covered} more change${covered === 1 ? '' : 's'} inside directories approved for this command went ahead without a question`);
  return result.exitCode;
}

/** A refused connection, once, with the setting that would allow it. */
export function refusedLine(refused: RefusedConnection, homeConfigFile: string): string {
  const { connection, reason } = refused;
  const what = connection.kind === 'dns' ? 'refused to look up' : connection.kind === 'datagram' ? 'refused a datagram to' : 'refused a connection to';
  const where = printable(homeConfigFile);
  let setting = `${JSON.stringify(refused.rule)} in network.allow of ${where} would allow it`;
  if (reason.includes('network.mode is off')) setting = `network.mode "allowlist" (with ${JSON.stringify(refused.rule)} in network.allow) in ${where} would allow it`;
  else if (reason.includes('network.deny')) setting = `network.deny names it (in ${where}, or the project's .brokered-shell.json)`;
  else if (reason.includes('link-local')) setting = `${JSON.stringify(refused.rule)} in network.allow of ${where}, named exactly, would allow it`;
  return `brokered-shell: ${what} ${printable(describeConnection(connection))} (${printable(reason)}): ${setting}`;
}

const SCOPE_WORDS: Record<ApprovalChoice['scope'], string> = { once: 'once', session: 'for this session', directory: 'with its directory' };

function listNeeded(io: Io, blocks: readonly PromptBlock[]): void {
  for (const block of blocks) io.err(`brokered-shell: needs approval: ${describeBlock(block)}`);
}

/**
 * A failed command's reads were refused in the kernel, where the broker never hears of
 * them: when its command line names a path the read policy kept from it, say which and why.
 */
function readHint(session: SandboxSession, command: string): string | undefined {
  const reads = session.broker.plugin<ReadPolicyPlugin>(ReadPolicyPlugin.PLUGIN_NAME);
  const named = reads && namedUnreadable(command, reads.lastUnreadable, reads.policy.homes[0] ?? '/');
  return named && printable(unreadableHint(named));
}
