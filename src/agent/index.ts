/** The agent integration: what an agent CLI embeds to run model-written commands safely. */
export { createBroker, type CreateBrokerOptions } from './create-broker.js';
export { createSandboxSession, SandboxSession, NOT_RUN_EXIT_CODE, DEFAULT_APPROVAL_ROUNDS } from './session.js';
export { SandboxUnavailableError } from './errors.js';
export { completeSessionConfig, defaultSessionConfig, type SessionConfig, type SessionConfigInput } from './config.js';
export { commitMessageFrom, COMMIT_MESSAGE_MAX, EMPTY_COMMIT_MESSAGE } from './commit-message.js';
export { commandWords, isExcluded, toInvocation, type Invocation } from './command-line.js';
export { DEFAULT_MAX_OUTPUT_BYTES } from './output-capture.js';
export { BROKER_ENV } from './env.js';
export { DenialList, LISTED_DENIALS, denialOf, promptRefusals, type Refusal } from './refusals.js';
export { notStartedReport, runReport, type PromptReport, type RunReport } from './run-report.js';
export { turnSummary, turnSummaryText, type TurnSummary } from './turn-summary.js';
export { TurnHistory, openBackupHome, restoreFound, type RestoreOutcome, type TurnRestoreOptions } from './turn-history.js';
export { diffTurnEntries, type DiffStyle, type FileDiff, type TurnDiff, type TurnDiffOutput } from './turn-diff.js';
export { turnJson, type StructureItem, type TurnJson } from './turn-json.js';
export { isWorkspaceSession, workspaceMark, workspaceSession, workspaceSessionId, workspaceSessions } from './workspace-sessions.js';
export type {
  ApprovalRequest,
  Approver,
  BackupSummary,
  BeginTurnOptions,
  EndTurnOptions,
  EndTurnResult,
  ExecuteApproval,
  ExecuteOptions,
  ExecuteResult,
  ExecutionMode,
  GuardDeleteOptions,
  GuardOptions,
  GuardResult,
  GuardTool,
  GuardWriteOptions,
  RunningCommand,
  SandboxSessionOptions,
  StdinSource,
  StoreUnavailablePolicy,
  TurnBackup,
  TurnInfo,
} from './types.js';
