import { z } from 'zod';
import { sessionIdSchema, sha256Schema, turnIdSchema } from './layout.js';

/** Bump when the manifest format changes in a way old readers would misread. */
export const MANIFEST_VERSION = 1;

const nsSchema = z.string().regex(/^-?\d+$/, 'not a decimal nanosecond count');
/** ISO 8601 date-time with an optional offset (exported for the journal header). */
export const isoSchema = z.iso.datetime({ offset: true });
const modeSchema = z.number().int().min(0).max(0o7777);
const sizeSchema = z.number().int().min(0);
const operationSchema = z.string().regex(/^[a-z][a-z0-9-]{0,31}$/);
const absolutePath = z
  .string()
  .min(1)
  .max(4096)
  .refine((v) => v.startsWith('/') && !v.includes('\0'), 'not an absolute path');

/** name → base64 value, sorted by name. */
export const xattrMapSchema = z.record(z.string(), z.base64());
const ownerFields = {
  /** Absent in manifests written before owners were compared. */
  uid: z.number().int().min(0).optional(),
  gid: z.number().int().min(0).optional(),
};

/**
 * What was at a path when the turn was committed. Restore compares the present with
 * it: a difference means someone changed the file after the turn. Owner and xattrs
 * are compared when both sides recorded them (older manifests did not); `xattrs` is
 * null when there was no xattr access.
 */
export const afterStateSchema = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('absent') }),
  z.strictObject({
    type: z.literal('file'),
    size: sizeSchema,
    /** null when the file was too large to hash at commit, or was created by the turn (never hashed): size+mode+mtime then decide. */
    sha256: sha256Schema.nullable(),
    mode: modeSchema,
    mtimeNs: nsSchema,
    /** The inode and its status change time, which no one can set: they tell a same-size rewrite when there is no hash (older manifests: absent). */
    ino: z.string().regex(/^\d+$/).optional(),
    /** With `ino`, which file this is: inode numbers are reused ("0" where the file system keeps no birth time). */
    btimeNs: nsSchema.optional(),
    ctimeNs: nsSchema.optional(),
    ...ownerFields,
    xattrs: xattrMapSchema.nullable().optional(),
  }),
  z.strictObject({ type: z.literal('symlink'), target: z.string(), ...ownerFields }),
  z.strictObject({
    type: z.literal('other'),
    fileType: z.enum(['directory', 'fifo', 'socket', 'char-device', 'block-device', 'unknown']),
    /** Recorded for directories and special files (older manifests: type only). A directory's mtime is not compared: it moves with every name added or removed. */
    mode: modeSchema.optional(),
    ...ownerFields,
    mtimeNs: nsSchema.optional(),
    /** A device's number (special files; 0 for a FIFO or socket). */
    rdev: z.number().int().min(0).optional(),
    xattrs: xattrMapSchema.nullable().optional(),
    /** The inode number of a directory the turn renamed whole: a rename back moves only that directory. */
    ino: z.string().regex(/^\d+$/).optional(),
  }),
]);
export type AfterState = z.infer<typeof afterStateSchema>;

/** Mode, owner and times, as files and directories record them. */
const metadataFields = {
  mode: modeSchema,
  uid: z.number().int().min(0),
  gid: z.number().int().min(0),
  mtime: isoSchema,
  mtimeNs: nsSchema,
  atime: isoSchema,
  atimeNs: nsSchema,
};

/** One path's state before the turn changed it. */
export const backupEntrySchema = z.strictObject({
  path: absolutePath,
  /** What the broker was about to do (open, truncate, rename, delete, …, or 'restore'). */
  operation: operationSchema,
  kind: z.enum(['file', 'symlink']),
  /** Content length (for a symlink: the length of its target). */
  size: sizeSchema,
  /** null for symlinks and for files skipped as too large. */
  sha256: sha256Schema.nullable(),
  /** Relative to the store root, e.g. `blobs/ab/<sha256>`; null when there is no content. */
  blob: z.string().regex(/^blobs\/[0-9a-f]{2}\/[0-9a-f]{64}$/).nullable(),
  ...metadataFields,
  /** name → base64 value; null when no xattr access was available (not recorded). */
  xattrs: xattrMapSchema.nullable(),
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

const attributionFields = {
  toolCallId: z.string().max(256).optional(),
  traceId: z.string().max(256).optional(),
};

/**
 * A path the turn found empty: nothing was there when the turn first touched it (it
 * created the path: a new file, link, FIFO or directory, or the destination of a
 * rename). Rewinding the turn removes what is there (kept in the rescue turn first).
 * It holds no content, so `backups list --json` shows it with size 0, sha256 null and
 * mode 0.
 */
export const absentEntrySchema = z.strictObject({
  path: absolutePath,
  operation: operationSchema,
  kind: z.literal('absent'),
  ...attributionFields,
  backedUpAt: isoSchema,
  after: afterStateSchema.nullable(),
});
export type AbsentEntry = z.infer<typeof absentEntrySchema>;

/**
 * A directory as it was before the turn changed it or a name in it: deleted (`rm -rf`,
 * rmdir), renamed away, its mode, owner, times or xattrs changed, or an entry added to
 * or removed from it (which moves its mtime). Rewinding recreates it when it is gone
 * and puts its metadata back.
 */
export const directoryEntrySchema = z.strictObject({
  path: absolutePath,
  operation: operationSchema,
  kind: z.literal('directory'),
  ...metadataFields,
  xattrs: xattrMapSchema.nullable(),
  ...attributionFields,
  backedUpAt: isoSchema,
  after: afterStateSchema.nullable(),
});
export type DirectoryEntry = z.infer<typeof directoryEntrySchema>;

/** The file types a special entry records: those `mknod` can make again. */
export const specialFileTypeSchema = z.enum(['fifo', 'socket', 'char-device', 'block-device']);
export type SpecialFileType = z.infer<typeof specialFileTypeSchema>;
const SPECIAL_FILE_TYPES: ReadonlySet<string> = new Set(specialFileTypeSchema.options);
export const isSpecialFileType = (type: string): type is SpecialFileType => SPECIAL_FILE_TYPES.has(type);

/**
 * A FIFO, socket or device node as it was before the turn deleted, replaced, renamed or
 * changed it. It holds no content; rewinding makes it again (`mknod`) with its mode,
 * owner and times. `rdev` is the device number (0 for a FIFO or socket).
 */
export const specialEntrySchema = z.strictObject({
  path: absolutePath,
  operation: operationSchema,
  kind: z.literal('special'),
  fileType: specialFileTypeSchema,
  rdev: z.number().int().min(0),
  ...metadataFields,
  /** name → base64 value; null when no xattr access was available (not recorded). */
  xattrs: xattrMapSchema.nullable(),
  ...attributionFields,
  backedUpAt: isoSchema,
  after: afterStateSchema.nullable(),
});
export type SpecialEntry = z.infer<typeof specialEntrySchema>;

/**
 * A regular file's mode, owner, times and xattrs before the turn changed only those (chmod,
 * chown, touch, an xattr): its content was not kept, for the change left it as it was. If
 * the turn then changes the content too, a content entry (`files`) follows for the same
 * path, taken before that change: a rewind takes the bytes from it and the metadata from
 * this one. Without one, a rewind puts the metadata back on the file that is there.
 */
export const metadataEntrySchema = z.strictObject({
  path: absolutePath,
  operation: operationSchema,
  kind: z.literal('metadata'),
  size: sizeSchema,
  ...metadataFields,
  xattrs: xattrMapSchema.nullable(),
  ...attributionFields,
  backedUpAt: isoSchema,
  after: afterStateSchema.nullable(),
});
export type MetadataEntry = z.infer<typeof metadataEntrySchema>;

/**
 * A directory the turn renamed (`path`, as it was named then) to `to`, kept as it is, in
 * one record: a rewind renames it back before anything else, and what the turn changed in
 * it afterwards has entries of its own at the names it had before the rename. `tree`
 * lists, relative to it, what it held when it was renamed (directories, with a `/` at the
 * end, before what they hold), so what the rename put under `to` can be named. `expanded` marks a later line
 * for the same rename: the turn then reused the name it left, and every path of the tree
 * was recorded on its own from there (`path` is no longer renamed back whole).
 */
export const renamedEntrySchema = z.strictObject({
  path: absolutePath,
  operation: operationSchema,
  kind: z.literal('renamed'),
  to: absolutePath,
  tree: z.array(z.string().min(1).max(4096)),
  ...metadataFields,
  xattrs: xattrMapSchema.nullable(),
  expanded: z.literal(true).optional(),
  ...attributionFields,
  backedUpAt: isoSchema,
  after: afterStateSchema.nullable(),
});
export type RenamedEntry = z.infer<typeof renamedEntrySchema>;

/** The entries of a turn that hold no content: see `TurnManifest.structure`. */
export const structureEntrySchema = z.discriminatedUnion('kind', [absentEntrySchema, directoryEntrySchema, specialEntrySchema, metadataEntrySchema, renamedEntrySchema]);
export type StructureEntry = z.infer<typeof structureEntrySchema>;

/** The kinds of structure entries (journal lines of these kinds are read with structureEntrySchema). */
export const STRUCTURE_KINDS: ReadonlySet<string> = new Set(['absent', 'directory', 'special', 'metadata', 'renamed']);

/** Any entry of a turn: one path's state before the turn. */
export type TurnEntry = BackupEntry | StructureEntry;

export function isStructureEntry(entry: TurnEntry): entry is StructureEntry {
  return STRUCTURE_KINDS.has(entry.kind);
}

/**
 * A connection target of the turn (the network policy's record, NetworkPlugin): counted
 * once per kind, protocol, host, address, port and verdict. It holds nothing a restore
 * uses; it says where the turn's commands reached, or tried to.
 */
export const connectionEntrySchema = z.strictObject({
  kind: z.enum(['connect', 'datagram', 'dns']),
  protocol: z.enum(['tcp', 'udp', 'icmp', 'other']),
  host: z.string().max(256).optional(),
  address: z.string().max(64),
  /** Absent for a DNS query (no port named yet). */
  port: z.number().int().min(0).max(65535).optional(),
  verdict: z.enum(['allow', 'deny']),
  reason: z.string().max(1000),
  count: z.number().int().min(1),
  /** The process that made the first. */
  pid: z.number().int().min(0),
  toolCallId: z.string().max(256).optional(),
  firstAt: isoSchema,
});
export type ConnectionEntry = z.infer<typeof connectionEntrySchema>;

/**
 * Whether `later` may be recorded for a path `earlier` holds already: only a content
 * entry after a metadata one (the turn changed the file's metadata first, then its bytes).
 */
export function followsFor(earlier: TurnEntry, later: TurnEntry): boolean {
  return earlier.kind === 'metadata' && (later.kind === 'file' || later.kind === 'symlink');
}

/** Rename records stand beside a path's own entries: its directory entry, say, or a second rename of it. */
export const isRenameRecord = (entry: TurnEntry): entry is RenamedEntry => entry.kind === 'renamed';

export const turnKindSchema = z.enum(['turn', 'restore']);
export type TurnKind = z.infer<typeof turnKindSchema>;

export const turnManifestSchema = z
  .strictObject({
    version: z.literal(MANIFEST_VERSION),
    id: turnIdSchema,
    sessionId: sessionIdSchema,
    kind: turnKindSchema,
    /** The turn a 'restore' manifest undid part of (for a multi-turn rewind: the oldest). */
    restoreOf: turnIdSchema.optional(),
    message: z.string().nullable(),
    startedAt: isoSchema,
    committedAt: isoSchema.nullable(),
    /** Files and symlinks with their content: what `backups list` counts as the turn's files. */
    files: z.array(backupEntrySchema),
    /**
     * Paths recorded without content: absent before the turn, directories, or special
     * files. Absent in manifests written before rewinds knew about them (and when there
     * are none), so those still read; a path appears at most once across `files` and
     * `structure`.
     */
    structure: z.array(structureEntrySchema).optional(),
    /** Where the turn's commands connected or tried to (absent in manifests written before, and when there were none). */
    connections: z.array(connectionEntrySchema).optional(),
  })
  .refine((m) => {
    // A content entry may follow a metadata entry of the same path (followsFor); nothing else repeats.
    const structure = (m.structure ?? []).filter((e) => !isRenameRecord(e));
    const metadata = new Set(structure.filter((e) => e.kind === 'metadata').map((e) => e.path));
    const paths = new Set<string>();
    for (const entry of structure) paths.add(entry.path);
    let repeats = 0;
    for (const file of m.files) {
      if (!paths.has(file.path)) paths.add(file.path);
      else if (metadata.has(file.path)) repeats += 1;
      else return false;
    }
    return paths.size + repeats === m.files.length + structure.length;
  }, 'a path appears twice in one turn');
export type TurnManifest = z.infer<typeof turnManifestSchema>;

/**
 * The files a turn keeps something of, each once: with their content (but those over the
 * cap, when `unsaved` is left out), special files, and files whose metadata alone it kept.
 */
export function keptFileCount(manifest: Pick<TurnManifest, 'files' | 'structure'>, options: { unsaved?: boolean } = {}): number {
  const withContent = new Set(manifest.files.map((file) => file.path));
  const others = (manifest.structure ?? []).filter((entry) => entry.kind === 'special' || (entry.kind === 'metadata' && !withContent.has(entry.path))).length;
  const files = options.unsaved === false ? manifest.files.filter((file) => file.skipped !== 'too-large').length : manifest.files.length;
  return files + others;
}

/** Every entry of a turn, content first, in the order each list recorded them. */
export function turnEntries(manifest: TurnManifest): TurnEntry[] {
  return [...manifest.files, ...(manifest.structure ?? [])];
}

/** One multi-line message from a failed parse (rspack's validate habit). */
export function describeIssues(error: z.ZodError): string {
  return error.issues.map((issue) => `  - ${issue.path.join('.') || '(root)'}: ${issue.message}`).join('\n');
}
