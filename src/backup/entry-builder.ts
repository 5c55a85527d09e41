import type { BigIntStats } from 'node:fs';
import { BrokerError, ErrorCodes } from '../core/errors.js';
import { isoFromNs, permissionBits } from './fs-util.js';
import type { AbsentEntry, BackupEntry, DirectoryEntry, MetadataEntry, RenamedEntry, SpecialEntry, SpecialFileType } from './manifest-schema.js';

/** Who asked for a backup and why: the validated caller-supplied part of an entry. */
export interface EntryBase {
  path: string;
  operation: string;
  toolCallId: string | undefined;
  traceId: string | undefined;
  /** Where the file is now, when that is not `path` (a directory the turn renamed took it along: renames.ts). */
  source?: string;
}

/** What was captured of the path itself. */
export interface EntryContent {
  kind: BackupEntry['kind'];
  sha256: string | null;
  blob: string | null;
  xattrs: Record<string, string> | null;
  linkTarget?: string;
}

export interface EntryRequest {
  operation: string;
  toolCallId?: string | undefined;
  traceId?: string | undefined;
}

/**
 * Check what a caller hands us before touching the file system. Everything fails with
 * BACKUP_FAILED: the broker turns that into "deny the modification".
 */
export function entryBase(file: string, request: EntryRequest): EntryBase {
  return {
    path: checkTargetPath(file),
    operation: checkOperation(request.operation),
    toolCallId: checkAttribution('toolCallId', request.toolCallId),
    traceId: checkAttribution('traceId', request.traceId),
  };
}

/** Paths are used as given (the caller resolved symlinks), so they must already be canonical in form. */
export function checkTargetPath(file: string): string {
  if (typeof file !== 'string' || !isNormalAbsolute(file) || file.includes('\0') || file.length > 4096) {
    throw new BrokerError(ErrorCodes.BACKUP_FAILED, `backup needs an absolute, normalised path, got ${JSON.stringify(file)}`);
  }
  return file;
}

/** An empty, `.` or `..` component. */
const NOT_NORMAL = /\/\/|\/\.{1,2}(?:\/|$)/;

/**
 * What `path.resolve(p) === p` says of an absolute path (no empty, `.` or `..` component, no
 * trailing slash but the root's), without building the resolved string: ≈ 0.1 against
 * 1 µs, for every path a turn records.
 */
export function isNormalAbsolute(p: string): boolean {
  return p.startsWith('/') && (p === '/' || (!p.endsWith('/') && !NOT_NORMAL.test(p)));
}

function checkOperation(operation: string): string {
  if (typeof operation !== 'string' || !/^[a-z][a-z0-9-]{0,31}$/.test(operation)) {
    throw new BrokerError(ErrorCodes.BACKUP_FAILED, `invalid operation name ${JSON.stringify(operation)}`);
  }
  return operation;
}

function checkAttribution(name: string, value: string | undefined): string | undefined {
  if (value !== undefined && (typeof value !== 'string' || value.length > 256)) {
    throw new BrokerError(ErrorCodes.BACKUP_FAILED, `${name} must be a string of at most 256 characters`);
  }
  return value;
}

/**
 * Mode, owner and times as a manifest records them (ns as strings, ISO strings for people),
 * written into the entry: on Node 20's V8 a literal that spreads an object and goes on with
 * more fields pays a runtime call per field, and every backup and created file makes one.
 */
function withMetadata<T extends object>(entry: T, stats: BigIntStats): T & Metadata {
  const out = entry as T & Metadata;
  out.mode = permissionBits(stats);
  out.uid = Number(stats.uid);
  out.gid = Number(stats.gid);
  out.mtime = isoFromNs(stats.mtimeNs);
  out.mtimeNs = stats.mtimeNs.toString();
  out.atime = isoFromNs(stats.atimeNs);
  out.atimeNs = stats.atimeNs.toString();
  return out;
}
type Metadata = Pick<BackupEntry, 'mode' | 'uid' | 'gid' | 'mtime' | 'mtimeNs' | 'atime' | 'atimeNs'>;

/** The entry with the request's tool call and trace ids, where it had them. */
function attributed<T extends { toolCallId?: string; traceId?: string }>(entry: T, base: EntryBase): T {
  if (base.toolCallId !== undefined) entry.toolCallId = base.toolCallId;
  if (base.traceId !== undefined) entry.traceId = base.traceId;
  return entry;
}

/** One manifest entry from the stats taken before the content was read (a read must not alter them). */
export function buildEntry(base: EntryBase, stats: BigIntStats, content: EntryContent, backedUpAt: string): BackupEntry {
  // The fields after the metadata are set next, keeping the order a journal line has always had.
  const entry = withMetadata(
    { path: base.path, operation: base.operation, kind: content.kind, size: Number(stats.size), sha256: content.sha256, blob: content.blob },
    stats,
  ) as BackupEntry;
  entry.xattrs = content.xattrs;
  entry.backedUpAt = backedUpAt;
  entry.after = null;
  if (content.linkTarget !== undefined) entry.linkTarget = content.linkTarget;
  return attributed(entry, base);
}

/** A path the turn found empty (it is about to create it). */
export function buildAbsentEntry(base: EntryBase, backedUpAt: string): AbsentEntry {
  const entry: AbsentEntry = { path: base.path, operation: base.operation, kind: 'absent', backedUpAt, after: null };
  return attributed(entry, base);
}

/** A directory's metadata before the turn changed it or a name in it. */
export function buildDirectoryEntry(base: EntryBase, stats: BigIntStats, xattrs: Record<string, string> | null, backedUpAt: string): DirectoryEntry {
  const entry = withMetadata({ path: base.path, operation: base.operation, kind: 'directory' as const }, stats) as DirectoryEntry;
  entry.xattrs = xattrs;
  entry.backedUpAt = backedUpAt;
  entry.after = null;
  return attributed(entry, base);
}

/** A regular file's size, mode, owner, times and xattrs before the turn changed only those. */
export function buildMetadataEntry(base: EntryBase, stats: BigIntStats, xattrs: Record<string, string> | null, backedUpAt: string): MetadataEntry {
  const entry = withMetadata({ path: base.path, operation: base.operation, kind: 'metadata' as const, size: Number(stats.size) }, stats) as MetadataEntry;
  entry.xattrs = xattrs;
  entry.backedUpAt = backedUpAt;
  entry.after = null;
  return attributed(entry, base);
}

/** A directory renamed whole to `to`: its metadata, and the names it holds (`tree`). */
export function buildRenamedEntry(base: EntryBase, to: string, tree: readonly string[], stats: BigIntStats, xattrs: Record<string, string> | null, backedUpAt: string): RenamedEntry {
  const entry = withMetadata({ path: base.path, operation: base.operation, kind: 'renamed' as const, to, tree: [...tree] }, stats) as RenamedEntry;
  entry.xattrs = xattrs;
  entry.backedUpAt = backedUpAt;
  entry.after = null;
  return attributed(entry, base);
}

/** A FIFO, socket or device node's type, device number and metadata before the turn changed it. */
export function buildSpecialEntry(base: EntryBase, stats: BigIntStats, fileType: SpecialFileType, xattrs: Record<string, string> | null, backedUpAt: string): SpecialEntry {
  const entry = withMetadata({ path: base.path, operation: base.operation, kind: 'special' as const, fileType, rdev: Number(stats.rdev) }, stats) as SpecialEntry;
  entry.xattrs = xattrs;
  entry.backedUpAt = backedUpAt;
  entry.after = null;
  return attributed(entry, base);
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
