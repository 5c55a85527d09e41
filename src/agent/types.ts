import type { BrokerPlugin, Logger, Verdict } from '../core/index.js';
import type { ApprovalChoice, AskedQuestion, PromptBlock } from '../plugins/approval/index.js';
import type { ConnectionChoice, RefusedConnection } from '../plugins/network/index.js';
import type { KernelConnection } from '../sandbox/network-protocol.js';
import type { SessionConfig, SessionConfigInput } from './config.js';
import type { Refusal } from './refusals.js';

/** The agent's own file tools that `guardWrite` stands in front of. */
export type GuardTool = 'Write' | 'Edit' | 'MultiEdit' | 'NotebookEdit';

/** What a person is asked. */
export type ApprovalRequest =
  | {
      /** Writes or deletes the policy wants a person to approve (merged per path and access). */
      kind: 'paths';
      blocks: PromptBlock[];
      /** The command that ran into them (execute), absent for a guard. */
      command?: string;
      /** The file tool that asked (guards). */
      tool?: GuardTool | 'delete';
      toolCallId?: string;
      /**
       * 1 for the command's first run; n when its rerun after n - 1 approvals ran into
       * paths not asked about yet (only those are in `blocks`).
       */
      round?: number;
    }
  | {
      /**
       * One change that waits at its call while a person decides (`approvals: "inline"`,
       * the default). Answer with one of `choices` (true: the first, this change once).
       */
      kind: 'path';
      block: PromptBlock;
      /** What a yes may cover, narrowest first: once, this path for the session, a directory the command made in this turn. */
      choices: readonly ApprovalChoice[];
      /** 1 for the change's first question; more when it prompted again after a yes. */
      round: number;
      /** Aborted when the question times out (`approvalTimeoutSeconds`): stop asking. */
      signal: AbortSignal;
      /** The command whose change it is, when a command of this session made it. */
      command?: string;
      /** The file tool that asked (guards). */
      tool?: GuardTool | 'delete';
      toolCallId?: string;
    }
  | {
      /**
       * A connection the network policy does not name, waiting while a person decides
       * (`network.mode: "allowlist"`, inline approvals): a DNS query for a name, or a
       * connection or datagram to an address. Answer with one of `choices` (true: once).
       */
      kind: 'connection';
      connection: KernelConnection;
      /** The `network.allow` entry a yes adds. */
      rule: string;
      choices: readonly ConnectionChoice[];
      signal: AbortSignal;
      command?: string;
      toolCallId?: string;
    }
  | {
      /** The model asked to run a command outside the sandbox. */
      kind: 'unsandboxed';
      command: string;
      reason?: string;
      toolCallId?: string;
    };

/**
 * Asks a person. true approves (for `path`: this change once; for `paths`: those paths for
 * the session); one of a `path` request's `choices` approves that much; false (or a throw,
 * which is logged) denies. Inline questions come one at a time, while the change waits;
 * `paths` at most once per run of a command (`approvals: "after"`).
 */
export type Approver = (
  request: ApprovalRequest,
) => Promise<boolean | ApprovalChoice | ConnectionChoice> | boolean | ApprovalChoice | ConnectionChoice;

/** What `execute` does when the backup store cannot be used at the start of a turn. */
export type StoreUnavailablePolicy =
  /** The reference's choice: backup is off for the turn (said in the turn info and the log); changes proceed under the policy. */
  | 'disable-backup'
  /** Backup stays on and cannot be made, so every change to an existing file is refused (what `brokered-shell run` does). */
  | 'deny-changes';

export interface SandboxSessionOptions {
  /** The working directory of commands and the first writable root (default: the current directory). */
  workspace?: string;
  /** Default: a new id. */
  sessionId?: string;
  /** Settings; what is missing takes the configuration's defaults. */
  config?: SessionConfig | SessionConfigInput;
  /** Backup store root (default: `$BROKERED_SHELL_HOME`, else `~/.brokered-shell`). */
  home?: string;
  /** The user's home, for `~` in rules and the shell startup files (default: the OS's). */
  userHome?: string;
  /** The environment commands start from (default: this process's). */
  env?: NodeJS.ProcessEnv;
  /** pino; lines carry `phase` (`turn` for turn and approval events). Default: silent. */
  logger?: Logger;
  /** Extra plugins (an organisation's policy, sinks) besides the standard set. */
  plugins?: BrokerPlugin[];
  /** Who is asked when the policy wants approval. Without one nothing is approved. */
  approver?: Approver;
  /**
   * How many times `execute` may ask the approver about one command: each approval reruns
   * it, and the rerun may need more (default `DEFAULT_APPROVAL_ROUNDS`, 32; 1 asks once).
   */
  maxApprovalRounds?: number;
  /** Default `disable-backup`. */
  storeUnavailable?: StoreUnavailablePolicy;
  /** Cap on each of stdout and stderr kept by `execute` (default 10 MiB). */
  maxOutputBytes?: number;
  /**
   * How long one policy plugin may take to give its opinion on a path before the request
   * is refused, naming it (milliseconds; default 60,000; 0: no limit).
   */
  policyTimeoutMs?: number;
}

export interface BeginTurnOptions {
  /** The user's message that starts the turn; the commit message is made from it. */
  userMessage: string;
  /** Per-turn overrides of the configuration's `fileBackup`. */
  fileBackup?: { enabled?: boolean; maxSizeMB?: number };
}

export interface TurnBackup {
  /** Whether files are backed up in this turn. */
  enabled: boolean;
  maxSizeMB: number;
  oversize: 'deny' | 'skip';
  /** Why backup is off, when it is. */
  reason?: string;
  /** Set with `storeUnavailable: 'deny-changes'` when the store cannot be used: changes to existing files are refused. */
  refusesChanges?: boolean;
}

export interface TurnInfo {
  turnId: string;
  sessionId: string;
  userMessage: string;
  startedAt: string;
  backup: TurnBackup;
  /** The previous turn's commit failed and this turn continues it (same id, its backups kept). */
  continued: boolean;
}

export interface EndTurnOptions {
  /** The commit message as is, instead of one made from the user's message. */
  message?: string;
}

export interface EndTurnResult {
  ok: boolean;
  /** Absent when no turn was open. */
  turnId?: string;
  /** Files backed up in the turn. */
  files: number;
  /**
   * Files the turn changed whose content was not saved: over the size cap, with
   * `fileBackup.oversize: skip`. Restoring the turn cannot bring them back.
   */
  unsaved?: string[];
  /** What the person should know before going on (`turn.facts.notices`: e.g. a stopped rebase left for `--continue`). */
  notices?: string[];
  /**
   * Paths the turn changed that are kept out of its backups by design, counted per plugin
   * that kept them out (`cache-roots`: tools' caches). A restore leaves them as they are.
   */
  exempted?: Record<string, number>;
  /** The commit message used. */
  message: string;
  error?: string;
}

/** Where the command's stdin comes from: nothing (default), the caller's own, or these bytes. */
export type StdinSource = 'ignore' | 'inherit' | string | Buffer;

/** A command while it runs. */
export interface RunningCommand {
  readonly pid: number | undefined;
  /** Send a signal (the sandbox launcher passes it on to the command). */
  kill(signal?: NodeJS.Signals): boolean;
  /**
   * Send a signal to the command and every process it started, as a terminal sends Ctrl-C
   * to its foreground group (a shell waiting for a program carries on when only the shell
   * gets SIGINT).
   */
  signalAll(signal?: NodeJS.Signals): void;
}

export interface ExecuteOptions {
  /** Attributes backups, prompt blocks and audit lines to the agent's tool call (default: a new id). */
  toolCallId?: string;
  /** Default: the workspace; relative to it when relative. */
  cwd?: string;
  /** Added to the session's environment (an `undefined` value removes a variable). */
  env?: NodeJS.ProcessEnv;
  /** Kill the whole command tree after this long (`timedOut` in the result). */
  timeoutMs?: number;
  /**
   * Spawn the program directly, without a shell (still in the sandbox when it is on).
   * A string command is then split on whitespace (no quoting, no expansion); pass an
   * array to keep arguments with spaces. An array command is always raw.
   */
  rawCommand?: boolean;
  /** The model asks to run outside the sandbox: the approver decides; without one it does not run. */
  dangerouslyDisableSandbox?: boolean;
  /** Why the model asked for `dangerouslyDisableSandbox`, shown to the approver. */
  reason?: string;
  /** Default `ignore` (stdin is /dev/null). */
  stdin?: StdinSource;
  /** `capture` (default): stdout and stderr come back in the result; `inherit`: they go to this process's. */
  output?: 'capture' | 'inherit';
  /** Per-call override of the session's cap on each captured stream. */
  maxOutputBytes?: number;
  /** Called when the command (each attempt) has started. */
  onStart?: (command: RunningCommand) => void;
  /**
   * Each chunk of the command's stdout as it comes, for a live view (with `output:
   * 'capture'`, the default; every chunk, past `maxOutputBytes` too). A throw is logged
   * and ignored: the command goes on.
   */
  onStdout?: (chunk: Buffer) => void;
  /** The same for stderr. */
  onStderr?: (chunk: Buffer) => void;
}

/** How a command was run, after the toggles. */
export type ExecutionMode =
  /** In the sandbox, through the broker. */
  | 'sandboxed'
  /** `config.sandbox.enabled === false`: plain bash, no broker. */
  | 'sandbox-disabled'
  /** Its root word is in `excludedCommands`: plain bash, no broker. */
  | 'excluded'
  /** `dangerouslyDisableSandbox`, and a person approved: plain bash, no broker. */
  | 'unsandboxed-approved'
  /** `dangerouslyDisableSandbox` not approved: nothing ran. */
  | 'not-run';

/** One file backed up for a tool call (the store's entry, summarised). */
export interface BackupSummary {
  path: string;
  operation: string;
  kind: 'file' | 'symlink';
  size: number;
  /** null for a symlink or a file too large to keep (`skipped`). */
  sha256: string | null;
  skipped?: 'too-large';
  turnId: string;
  toolCallId?: string;
}

export interface ExecuteApproval {
  /** Whether the approver was called (false: no approver). */
  asked: boolean;
  /** Whether everything asked about was approved. */
  approved: boolean;
  /** Whether the command ran again under the new grants (`approvals: "after"` only). */
  rerun: boolean;
  /** What the approver was asked about, in every round. */
  blocks: PromptBlock[];
  /** Inline: each question put while the command waited, in order, with its answer (those a directory's yes covered too). */
  questions?: AskedQuestion[];
  /**
   * How many times the approver was asked. After an approval the command runs again, and
   * what that run newly needs is asked in the next round (see `maxApprovalRounds`).
   */
  rounds: number;
}

export interface ExecuteResult {
  /** The command's status; 128+n when a signal ended it; 126 when it was not run (see `mode`). */
  exitCode: number;
  /** The signal that ended it, when known (timeouts, local runs); a sandboxed command killed by a signal shows as 128+n only. */
  signal: NodeJS.Signals | null;
  /** Captured output as UTF-8 ('' with `output: 'inherit'`). */
  stdout: string;
  stderr: string;
  /** The same bytes, exactly. */
  raw: { stdout: Buffer; stderr: Buffer };
  /** Whether a stream went over the cap; the bytes after it were dropped. */
  truncated: { stdout: boolean; stderr: boolean };
  timedOut: boolean;
  /** Whether the command ran under the sandbox and the broker. */
  sandboxed: boolean;
  ran: boolean;
  mode: ExecutionMode;
  /** The sandbox runtime used, when sandboxed. */
  runtime?: 'seccomp' | 'preload';
  toolCallId: string;
  turnId?: string;
  /** What still needs a person's approval (nothing was changed for these). */
  promptBlocks: PromptBlock[];
  /**
   * What the command was not let do, each with its reason: the policy's denials (each path
   * once per access; past `LISTED_DENIALS` only the first of a new kind of access), then
   * the changes that needed approval and did not get it. Nothing was changed for these.
   */
  refusals: Refusal[];
  /** Denials past the listed ones, only counted (each is in the audit log). */
  unlistedRefusals: number;
  /** Files backed up for this tool call (all attempts). */
  backups: BackupSummary[];
  /** Present when the command ran into prompts (paths) or asked to leave the sandbox. */
  approval?: ExecuteApproval;
  /** Connections the network policy refused, each target once, with the entry that would allow it. */
  refusedConnections?: RefusedConnection[];
}

export interface GuardOptions {
  toolCallId?: string;
}

export interface GuardWriteOptions extends GuardOptions {
  tool: GuardTool;
}

export interface GuardDeleteOptions extends GuardOptions {
  /** The tool removes a directory with its contents (they are checked and backed up too). */
  recursive?: boolean;
}

export interface GuardResult {
  /** Whether the tool may go ahead. */
  allowed: boolean;
  /** The policy's verdict (after an approval, the re-check's); `unguarded` when the sandbox is disabled. */
  decision: Verdict | 'unguarded';
  reason?: string;
  /** Whether a backup was stored for this call (false too when the file was already backed up in the turn). */
  backedUp: boolean;
  backups: BackupSummary[];
  /** What still needs approval. */
  promptBlocks: PromptBlock[];
  approval?: ExecuteApproval;
  toolCallId: string;
  /** The path checked, absolute. */
  path: string;
}
