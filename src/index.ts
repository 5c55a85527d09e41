/** brokered-shell's library surface: the core, the standard plugins and the layers around them. */
export * from './core/index.js';
export { standardPlugins, type StandardPluginsOptions } from './plugins/standard.js';
export { SessionGuardPlugin } from './plugins/session-guard.js';
export { PathResolutionPlugin } from './plugins/path-resolution/index.js';
export { FileSafetyPlugin, evaluateFileSafety, type FileSafetyOptions, type FileSafetyRule } from './plugins/file-safety/index.js';
export { ApprovalPlugin, type PromptBlock } from './plugins/approval/index.js';
export { ModifyBackupPlugin, getModifyBackupHooks, type BackedUpInfo, type ModifyBackupHooks } from './plugins/modify-backup/index.js';
export { SessionGrantsPlugin, type SessionGrant, type GrantableBlock } from './plugins/session-grants.js';
export { HostOperationsPlugin } from './plugins/host-operations/index.js';
export { SandboxTokenPlugin } from './plugins/sandbox-token.js';
export { CommandPrebackupPlugin } from './plugins/command-prebackup/index.js';
export { AuditPlugin, auditRefusal, getAuditHooks, type AuditRecord, type AuditHooks, type RefusalReport } from './plugins/audit.js';
export { RequesterAccessPlugin, type RequesterAccessOptions } from './plugins/requester-access.js';
export { ToolCallBindingPlugin, type ToolCallBindingOptions } from './plugins/tool-call-binding.js';
export { HeldWritesPlugin, type HeldWritesOptions } from './plugins/held-writes/index.js';
export { socketPeerCredentials } from './native/socket-fd.js';
export {
  applyPolicyFile,
  brokeredShellConfigSchema,
  loadConfig,
  readPolicyFile,
  sessionConfigOf,
  type BrokeredShellConfig,
  type BrokeredShellConfigInput,
  type LoadedConfig,
  type PolicyFile,
} from './config/index.js';
export { BrokerServer, type BrokerServerOptions } from './ipc/server.js';
export { operationTargets, openTargets } from './requests/targets.js';
export { BackupHome, SessionBackupStore, resolveHome, type TurnManifest, type BackupEntry, type RestoreReport } from './backup/index.js';
export * from './agent/index.js';
