export { BackupHome, LATEST, type BackupHomeOptions, type FoundTurn, type RewindPlan } from './backup-home.js';
export { BlobStore, type BlobFaults, type BlobStoreOptions, type StoredBlob } from './blob-store.js';
export { beforeStateOf, describeState, isDirectoryState, observeState, stateDifference } from './file-state.js';
export {
  HOME_ENV,
  blobRelativePath,
  newTurnId,
  resolveHome,
  sessionBackupDir,
  sessionIdSchema,
  sessionsDir,
  sha256Schema,
  turnIdSchema,
  validateSessionId,
  validateTurnId,
} from './layout.js';
export {
  MANIFEST_VERSION,
  absentEntrySchema,
  afterStateSchema,
  backupEntrySchema,
  describeIssues,
  directoryEntrySchema,
  isStructureEntry,
  keptFileCount,
  metadataEntrySchema,
  renamedEntrySchema,
  specialEntrySchema,
  structureEntrySchema,
  turnEntries,
  turnKindSchema,
  turnManifestSchema,
  type AbsentEntry,
  type AfterState,
  type BackupEntry,
  type DirectoryEntry,
  type MetadataEntry,
  type RenamedEntry,
  type SpecialEntry,
  type StructureEntry,
  type TurnEntry,
  type TurnKind,
  type TurnManifest,
} from './manifest-schema.js';
export { readXattrs, setTimesNsWithTouch, touchStamp, type MakeNode, type MetadataOps, type NodeSpec, type SetTimesNs, type XattrAccess } from './metadata-ops.js';
export {
  conflictReasonSchema,
  restoreReportSchema,
  rewindReportSchema,
  type RestoreOptions,
  type RestoreReport,
  type RestoredItem,
  type RewindReport,
} from './restore.js';
export {
  SessionBackupStore,
  type BackupOptions,
  type BeginTurnOptions,
  type OpenStoreOptions,
} from './session-store.js';
export {
  DEFAULT_BACKUP_SETTINGS,
  DEFAULT_DURABILITY,
  FILE_BACKUP_MAX_SIZE_MB,
  backupSettingsInputSchema,
  backupSettingsSchema,
  durabilitySchema,
  maxBytesOf,
  normaliseBackupSettings,
  normaliseMaxSizeMB,
  oversizePolicySchema,
  type BackupSettings,
  type BackupSettingsInput,
  type Durability,
  type OversizePolicy,
} from './settings.js';
export {
  GC_GRACE_MS,
  acquireSessionLock,
  collectGarbage,
  gcReportSchema,
  type GcFaults,
  type GcOptions,
  type GcReport,
  type SessionLock,
} from './gc.js';
export {
  cutoffOf,
  parseCount,
  parseOlderThan,
  parseSize,
  pruneBackups,
  pruneReportSchema,
  type OlderThan,
  type PruneOptions,
  type PruneReport,
} from './retention.js';
export { backupStats, statsReportSchema, type StatsOptions, type StatsReport } from './stats.js';
