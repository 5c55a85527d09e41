export { BackupHome, LATEST, type BackupHomeOptions, type FoundTurn } from './backup-home.js';
export { BlobStore, type BlobFaults, type BlobStoreOptions, type StoredBlob } from './blob-store.js';
export { beforeStateOf, observeState, stateDifference } from './file-state.js';
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
  afterStateSchema,
  backupEntrySchema,
  describeIssues,
  turnKindSchema,
  turnManifestSchema,
  type AfterState,
  type BackupEntry,
  type TurnKind,
  type TurnManifest,
} from './manifest-schema.js';
export { readXattrs, setTimesNsWithTouch, touchStamp, type MetadataOps, type SetTimesNs, type XattrAccess } from './metadata-ops.js';
export {
  conflictReasonSchema,
  restoreReportSchema,
  type RestoreOptions,
  type RestoreReport,
  type RestoredItem,
} from './restore.js';
export {
  SessionBackupStore,
  type BackupOptions,
  type BeginTurnOptions,
  type OpenStoreOptions,
} from './session-store.js';
export {
  DEFAULT_BACKUP_SETTINGS,
  FILE_BACKUP_MAX_SIZE_MB,
  backupSettingsInputSchema,
  backupSettingsSchema,
  maxBytesOf,
  normaliseBackupSettings,
  normaliseMaxSizeMB,
  oversizePolicySchema,
  type BackupSettings,
  type BackupSettingsInput,
  type OversizePolicy,
} from './settings.js';
