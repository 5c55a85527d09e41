export { Broker, combineDecisions, isAllowed, promptSubject, type BrokerOptions } from './broker.js';
export { BrokerError, PluginError, ErrorCodes, errnoOf, toBrokerError, type ErrorCode } from './errors.js';
export type {
  ApprovalAnswer,
  ApprovalQuestion,
  BrokerHooks,
  ClientContext,
  ClientPayload,
  ControlContext,
  ControlPayload,
  ControlResult,
  Handover,
  RequestContext,
  Resolution,
  ResolvedRequest,
  TargetDraft,
  Turn,
} from './hooks.js';
export { issueLines } from './issues.js';
export { createLogger, silentLogger, type Logger, type LogPhase, type CreateLoggerOptions } from './logger.js';
export type { BrokerPlugin } from './plugin.js';
export * from './schemas.js';
export { PolicyStage, ResolveStage, Stage } from './stages.js';
