import { z } from 'zod';
import { sessionIdSchema, sha256Schema, turnIdSchema } from './layout.js';

/** Bump when the manifest format changes in a way old readers would misread. */
export const MANIFEST_VERSION = 1;

const nsSchema = z.string().regex(/^-?\d+$/, 'not a decimal nanosecond count');
/** ISO 8601 date-time with an optional offset (exported for the journal header). */
export const isoSchema = z.iso.datetime({ offset: true });
const modeSchema = z.number().int().min(0).max(0o7777);
const sizeSchema = z.number().int().min(0);
const absolutePath = z
  .string()
  .min(1)
  .max(4096)
  .refine((v) => v.startsWith('/') && !v.includes('\0'), 'not an absolute path');

/**
 * What was at a path when the turn was committed. Restore compares the present with
 * it: a difference means someone changed the file after the turn.
 */
export const afterStateSchema = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('absent') }),
  z.strictObject({
    type: z.literal('file'),
    size: sizeSchema,
    /** null when the file was too large to hash at commit; size+mode+mtime then decide. */
    sha256: sha256Schema.nullable(),
    mode: modeSchema,
    mtimeNs: nsSchema,
  }),
  z.strictObject({ type: z.literal('symlink'), target: z.string() }),
  z.strictObject({
    type: z.literal('other'),
    fileType: z.enum(['directory', 'fifo', 'socket', 'char-device', 'block-device', 'unknown']),
  }),
]);
export type AfterState = z.infer<typeof afterStateSchema>;

/** One path's state before the turn changed it. */
export const backupEntrySchema = z.strictObject({
  path: absolutePath,
  /** What the broker was about to do (open, truncate, rename, delete, …, or 'restore'). */
  operation: z.string().regex(/^[a-z][a-z0-9-]{0,31}$/),
  kind: z.enum(['file', 'symlink']),
  /** Content length (for a symlink: the length of its target). */
  size: sizeSchema,
  /** null for symlinks and for files skipped as too large. */
  sha256: sha256Schema.nullable(),
  /** Relative to the store root, e.g. `blobs/ab/<sha256>`; null when there is no content. */
  blob: z.string().regex(/^blobs\/[0-9a-f]{2}\/[0-9a-f]{64}$/).nullable(),
  mode: modeSchema,
  uid: z.number().int().min(0),
  gid: z.number().int().min(0),
  mtime: isoSchema,
  mtimeNs: nsSchema,
  atime: isoSchema,
  atimeNs: nsSchema,
  /** name → base64 value; null when no xattr access was available (not recorded). */
  xattrs: z.record(z.string(), z.base64()).nullable(),
  linkTarget: z.string().optional(),
  /** Set when the file was over the size cap and the policy was 'skip': metadata only. */
  skipped: z.literal('too-large').optional(),
  toolCallId: z.string().max(256).optional(),
  traceId: z.string().max(256).optional(),
  backedUpAt: isoSchema,
  /** Filled in at commit; null before (or when the state could not be read). */
  after: afterStateSchema.nullable(),
});
export type BackupEntry = z.infer<typeof backupEntrySchema>;

export const turnKindSchema = z.enum(['turn', 'restore']);
export type TurnKind = z.infer<typeof turnKindSchema>;

export const turnManifestSchema = z
  .strictObject({
    version: z.literal(MANIFEST_VERSION),
    id: turnIdSchema,
    sessionId: sessionIdSchema,
    kind: turnKindSchema,
    /** The turn a 'restore' manifest undid part of. */
    restoreOf: turnIdSchema.optional(),
    message: z.string().nullable(),
    startedAt: isoSchema,
    committedAt: isoSchema.nullable(),
    files: z.array(backupEntrySchema),
  })
  .refine((m) => new Set(m.files.map((f) => f.path)).size === m.files.length, 'a path appears twice in one turn');
export type TurnManifest = z.infer<typeof turnManifestSchema>;

/** One multi-line message from a failed parse (rspack's validate habit). */
export function describeIssues(error: z.ZodError): string {
  return error.issues.map((issue) => `  - ${issue.path.join('.') || '(root)'}: ${issue.message}`).join('\n');
}
