/** The agent integration: what an agent CLI embeds to run model-written commands safely. */
export { createBroker, type CreateBrokerOptions } from './create-broker.js';
export { createSandboxSession, SandboxSession, NOT_RUN_EXIT_CODE, DEFAULT_APPROVAL_ROUNDS } from './session.js';
export { SandboxUnavailableError } from './errors.js';
export { completeSessionConfig, defaultSessionConfig, type SessionConfig, type SessionConfigInput } from './config.js';
export { commitMessageFrom, COMMIT_MESSAGE_MAX, EMPTY_COMMIT_MESSAGE } from './commit-message.js';
export { commandWords, isExcluded, toInvocation, type Invocation } from './command-line.js';
export { DEFAULT_MAX_OUTPUT_BYTES } from './output-capture.js';
export { BROKER_ENV } from './env.js';
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
