/** brokered-shell's library surface: the core, the standard plugins and the layers around them. */
export * from './core/index.js';
export { standardPlugins, type StandardPluginsOptions } from './plugins/standard.js';
export { SessionGuardPlugin, type SessionGuardOptions } from './plugins/session-guard.js';
export { PathResolutionPlugin, type PathResolutionOptions } from './plugins/path-resolution/index.js';
export { FileSafetyPlugin, evaluateFileSafety, type FileSafetyOptions, type FileSafetyPolicy, type FileSafetyRule, type PolicyTarget } from './plugins/file-safety/index.js';
export {
  ApprovalPlugin,
  type ApprovalChoice,
  type ApprovalOptions,
  type ApprovalPrompt,
  type AskedQuestion,
  type BlockFilter,
  type PromptApprover,
  type PromptBlock,
} from './plugins/approval/index.js';
export { ModifyBackupPlugin, getModifyBackupHooks, type BackedUpInfo, type ModifyBackupHooks, type ModifyBackupOptions } from './plugins/modify-backup/index.js';
export { SessionGrantsPlugin, type SessionGrant, type GrantableBlock } from './plugins/session-grants.js';
export { HostOperationsPlugin, type HostOperationsOptions } from './plugins/host-operations/index.js';
export type { FsAt } from './plugins/host-operations/fs-at.js';
export { SandboxTokenPlugin } from './plugins/sandbox-token.js';
export { CommandPrebackupPlugin, type CommandPrebackupOptions, type CommandSpec } from './plugins/command-prebackup/index.js';
export type { CacheRootsOptions } from './plugins/cache-roots/index.js';
export { ReadPolicyPlugin, type ReadDenial, type ReadLaunch, type ReadPolicy, type ReadPolicyOptions, type ReadRule, type RuleDenies, type SecretEntry, type SecretsSettings, type SecretsSettingsInput, type UnreadablePath } from './plugins/read-policy/index.js';
export { NetworkPlugin, describeConnection, type ConnectionApprover, type ConnectionChoice, type ConnectionPrompt, type NetworkMode, type NetworkOptions, type NetworkRule, type RefusedConnection, type SaveRule } from './plugins/network/index.js';
export type { KernelConnection, KernelConnectionRecord, KernelNetworkQuestion, NetKind, NetProtocol } from './sandbox/network-protocol.js';
export type { Lookup } from './plugins/network/lookup.js';
export type { Resolver } from './plugins/network/resolvers.js';
export { AuditPlugin, auditRefusal, getAuditHooks, type AuditOptions, type AuditRecord, type AuditHooks, type RefusalReport } from './plugins/audit.js';
export { RequesterAccessPlugin, type Requester, type RequesterAccessOptions, type StatLike } from './plugins/requester-access.js';
export { ToolCallBindingPlugin, type ParentOf, type ToolCallBindingOptions } from './plugins/tool-call-binding.js';
export { HeldWritesPlugin, type HeldFile, type HeldWritesOptions } from './plugins/held-writes/index.js';
export { socketPeerCredentials } from './native/socket-fd.js';
export type { PeerCredentials } from './native/types.js';
export type { RequestHook } from './core/hooks.js';
export type { BrokerErrorOptions } from './core/errors.js';
export {
  applyPolicyFile,
  brokeredShellConfigSchema,
  loadConfig,
  readPolicyFile,
  sessionConfigOf,
  type BrokeredShellConfig,
  type BrokeredShellConfigInput,
  type ConfigSource,
  type LoadConfigOptions,
  type LoadedConfig,
  type PolicyFile,
} from './config/index.js';
export { BrokerServer, type BrokerServerOptions } from './ipc/server.js';
export { operationTargets, openTargets, type OperationPaths } from './requests/targets.js';
export {
  BackupHome,
  LATEST,
  SessionBackupStore,
  resolveHome,
  type AbsentEntry,
  type BackupEntry,
  type BackupHomeOptions,
  type BackupOptions,
  type BackupSettings,
  type BeginTurnOptions as StoreBeginTurnOptions,
  type BlobStore,
  type DirectoryEntry,
  type Durability,
  type FoundTurn,
  type OpenStoreOptions,
  type RestoreOptions,
  type RestoreReport,
  type RestoredItem,
  type RewindPlan,
  type RewindReport,
  type SpecialEntry,
  type StructureEntry,
  type TurnEntry,
  type TurnManifest,
} from './backup/index.js';
export type { DamagedTurn } from './backup/manifest-io.js';
export type { StoreLayout } from './backup/layout.js';
export * from './agent/index.js';
// Types the signatures above name, so an embedder can write them too.
export type { BlobFaults, BlobStoreOptions, SnapshotOptions, StoredBlob } from './backup/blob-store.js';
export type { FanoutDirs, FanoutOptions } from './backup/fanout-dirs.js';
export type { MakeNode, MetadataOps, NodeSpec, SetTimesNs, XattrAccess } from './backup/metadata-ops.js';
export type { ConnectionEntry, RenamedEntry, SpecialFileType, TurnKind } from './backup/manifest-schema.js';
export type { KeptAside } from './backup/session-store.js';
export type { NativeBinding } from './native/bindings.js';
export type { KernelProbe, RenameAtOptions, TimeSpec, UnlinkAtOptions, UtimeValue } from './native/types.js';
export type { PathMatcher } from './plugins/file-safety/patterns.js';
export type { CompiledGlob } from './plugins/file-safety/glob.js';
export type { CompiledRule, WritableRoot } from './plugins/file-safety/policy.js';
export type { GitConfigWatch } from './plugins/file-safety/git-config-watch.js';
export type { ParsedFileSafetyOptions } from './plugins/file-safety/options.js';
export type { Protection } from './plugins/file-safety/mandatory.js';
