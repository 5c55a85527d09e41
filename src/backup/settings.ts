import { z } from 'zod';

/** Bounds for `fileBackupMaxSizeMB`: anything outside is clamped, anything not a number is the default. */
export const FILE_BACKUP_MAX_SIZE_MB = Object.freeze({ min: 1, default: 10, max: 1024 });

/** What the store does with a file over the size cap. */
export const oversizePolicySchema = z.enum(['deny', 'skip']);
export type OversizePolicy = z.infer<typeof oversizePolicySchema>;

/**
 * When the store makes a backup durable (fsync), a store option fixed when the store is
 * opened (an enable command never changes it):
 *
 * - `turn` (the configuration's default): a backup is acknowledged once its blob and
 *   journal line are written (temp file, verified, renamed; one write of the line) but not
 *   synced; the turn's commit makes them all durable in one pass (fdatasync of each blob
 *   written or reused, fsync of their directories) before its fsync'd manifest.
 *   Everything written is in the page cache, which outlives the process: a kill -9, OOM
 *   kill or crash of the broker loses no acknowledged backup, and other processes
 *   (`backups list`, `restore`, GC) read the open turn exactly as under `each`. Only a
 *   power cut or kernel crash during a turn differs: the changes the turn made may reach
 *   the disk while some of its backups do not. Such a backup is never trusted (blobs are
 *   hash-verified on reuse and restore; a torn journal line is ignored): it is reported
 *   lost, never restored wrong.
 * - `each`: before the backup is acknowledged, so before the file changes: the blob
 *   (fsync, rename, fsync of its directory) and its journal line (fdatasync). About
 *   2 fsync + 1 fdatasync per backup. A power cut or kernel crash at any moment leaves
 *   every change it kept with its backup on disk. A project may choose it.
 *
 * A store opened without a choice syncs each backup (STORE_DURABILITY_UNSET): a caller
 * that says nothing gets the side that survives a power cut; the configuration, and the
 * plugin that opens the store for a broker, choose DEFAULT_DURABILITY.
 */
export const durabilitySchema = z.enum(['each', 'turn']);
export type Durability = z.infer<typeof durabilitySchema>;
export const DEFAULT_DURABILITY: Durability = 'turn';
export const STORE_DURABILITY_UNSET: Durability = 'each';

/** Normalised settings, as the store holds them. */
export const backupSettingsSchema = z.strictObject({
  enabled: z.boolean(),
  fileBackupMaxSizeMB: z.number().min(FILE_BACKUP_MAX_SIZE_MB.min).max(FILE_BACKUP_MAX_SIZE_MB.max),
  /** 'deny' (default) refuses the modification; 'skip' records metadata without content. */
  oversize: oversizePolicySchema,
});
export type BackupSettings = z.infer<typeof backupSettingsSchema>;

/**
 * What a control command may carry (`EnableModifyBackup`). Loose on purpose: values are
 * normalised rather than rejected, like the reference's enable command.
 */
export const backupSettingsInputSchema = z.looseObject({
  enabled: z.unknown().optional(),
  fileBackupMaxSizeMB: z.unknown().optional(),
  oversize: z.unknown().optional(),
});
export type BackupSettingsInput = z.input<typeof backupSettingsInputSchema>;

export const DEFAULT_BACKUP_SETTINGS: BackupSettings = Object.freeze({
  enabled: true,
  fileBackupMaxSizeMB: FILE_BACKUP_MAX_SIZE_MB.default,
  oversize: 'deny',
});

/** Clamp to [min, max]; non-numbers (and NaN/Infinity) become the default. */
export function normaliseMaxSizeMB(value: unknown): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) return FILE_BACKUP_MAX_SIZE_MB.default;
  return Math.min(FILE_BACKUP_MAX_SIZE_MB.max, Math.max(FILE_BACKUP_MAX_SIZE_MB.min, value));
}

/**
 * Turn whatever an enable command carried into settings. Backup stays on unless
 * `enabled` is exactly `false`; an unknown oversize policy falls back to 'deny'
 * (refusing is the safe default).
 */
export function normaliseBackupSettings(input: unknown = {}): BackupSettings {
  const parsed = backupSettingsInputSchema.safeParse(input);
  const raw = parsed.success ? parsed.data : {};
  const oversize = oversizePolicySchema.safeParse(raw.oversize);
  return backupSettingsSchema.parse({
    enabled: raw.enabled !== false,
    fileBackupMaxSizeMB: normaliseMaxSizeMB(raw.fileBackupMaxSizeMB),
    oversize: oversize.success ? oversize.data : 'deny',
  });
}

/** The cap in bytes (whole bytes; fractional megabytes are allowed). */
export function maxBytesOf(settings: Pick<BackupSettings, 'fileBackupMaxSizeMB'>): number {
  return Math.floor(settings.fileBackupMaxSizeMB * 1024 * 1024);
}
