import path from 'node:path';
import type { BigIntStats } from 'node:fs';
import { BrokerError, ErrorCodes } from '../core/errors.js';
import { isoFromNs, permissionBits } from './fs-util.js';
import type { AbsentEntry, BackupEntry, DirectoryEntry } from './manifest-schema.js';

/** Who asked for a backup and why: the validated caller-supplied part of an entry. */
export interface EntryBase {
  path: string;
  operation: string;
  toolCallId: string | undefined;
  traceId: string | undefined;
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
  if (typeof file !== 'string' || !path.isAbsolute(file) || file.includes('\0') || path.resolve(file) !== file || file.length > 4096) {
    throw new BrokerError(ErrorCodes.BACKUP_FAILED, `backup needs an absolute, normalised path, got ${JSON.stringify(file)}`);
  }
  return file;
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

/** Mode, owner and times as a manifest records them (ns as strings, ISO strings for people). */
function metadataOf(stats: BigIntStats) {
  return {
    mode: permissionBits(stats),
    uid: Number(stats.uid),
    gid: Number(stats.gid),
    mtime: isoFromNs(stats.mtimeNs),
    mtimeNs: stats.mtimeNs.toString(),
    atime: isoFromNs(stats.atimeNs),
    atimeNs: stats.atimeNs.toString(),
  };
}

/** The entry with the request's tool call and trace ids, where it had them. */
function attributed<T extends { toolCallId?: string; traceId?: string }>(entry: T, base: EntryBase): T {
  if (base.toolCallId !== undefined) entry.toolCallId = base.toolCallId;
  if (base.traceId !== undefined) entry.traceId = base.traceId;
  return entry;
}

/** One manifest entry from the stats taken before the content was read (a read must not alter them). */
export function buildEntry(base: EntryBase, stats: BigIntStats, content: EntryContent, backedUpAt: string): BackupEntry {
  const entry: BackupEntry = {
    path: base.path,
    operation: base.operation,
    kind: content.kind,
    size: Number(stats.size),
    sha256: content.sha256,
    blob: content.blob,
    ...metadataOf(stats),
    xattrs: content.xattrs,
    backedUpAt,
    after: null,
  };
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
  const entry: DirectoryEntry = {
    path: base.path,
    operation: base.operation,
    kind: 'directory',
    ...metadataOf(stats),
    xattrs,
    backedUpAt,
    after: null,
  };
  return attributed(entry, base);
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
