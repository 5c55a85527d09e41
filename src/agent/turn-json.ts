import { join } from 'node:path';
import type { BackupEntry, MetadataEntry, RenamedEntry, StructureEntry, TurnManifest } from '../backup/manifest-schema.js';

/** The shape `backups list --json` promises (more fields allowed, these exact). */
export function turnJson(manifest: TurnManifest) {
  return {
    id: manifest.id,
    sessionId: manifest.sessionId,
    kind: manifest.kind,
    message: manifest.message,
    startedAt: manifest.startedAt,
    committedAt: manifest.committedAt,
    ...(manifest.restoreOf ? { restoreOf: manifest.restoreOf } : {}),
    // A file whose metadata alone the turn kept is a file of the turn too (sha256 null: no content kept).
    files: [...manifest.files.map(fileJson), ...metadataOnly(manifest).map(metadataJson)],
    structure: (manifest.structure ?? []).filter((entry) => entry.kind !== 'metadata').flatMap(structureJsonItems),
    ...(manifest.connections ? { connections: manifest.connections } : {}),
  };
}

/**
 * A structure entry's items: one, or for a directory the turn renamed whole, its record and
 * each name the rename put under the new name (created there: a rewind takes them away).
 */
function structureJsonItems(entry: StructureEntry): StructureItem[] {
  if (entry.kind !== 'renamed') return [structureJson(entry)];
  if (entry.expanded) return [];
  const own = { path: entry.path, operation: entry.operation, kind: entry.kind, to: entry.to, size: 0, sha256: null, mode: entry.mode, mtime: entry.mtime, ...(entry.toolCallId ? { toolCallId: entry.toolCallId } : {}) };
  const created = entry.tree.map((item) => ({ path: join(entry.to, item.replace(/\/$/, '')), operation: entry.operation, kind: 'absent' as const, size: 0, sha256: null, mode: 0 }));
  return [own, ...created];
}

/** One row of a turn's `structure` in `backups list --json`. */
export type StructureItem =
  | ReturnType<typeof structureJson>
  | { path: string; operation: string; kind: 'renamed'; to: string; size: number; sha256: null; mode: number; mtime: string; toolCallId?: string }
  | { path: string; operation: string; kind: 'absent'; size: number; sha256: null; mode: number };

/**
 * A path recorded without content, with the contract fields of a file entry: an absent
 * one (the turn created it) has size 0, sha256 null and mode 0; a directory or special
 * file its mode (and a special file its type).
 */
function structureJson(entry: Exclude<StructureEntry, RenamedEntry>) {
  return {
    path: entry.path,
    operation: entry.operation,
    kind: entry.kind,
    ...(entry.kind === 'special' ? { fileType: entry.fileType } : {}),
    size: 0,
    sha256: null,
    mode: entry.kind === 'absent' ? 0 : entry.mode,
    ...(entry.kind === 'absent' ? {} : { mtime: entry.mtime }),
    ...(entry.toolCallId ? { toolCallId: entry.toolCallId } : {}),
  };
}

/** The metadata entries of a turn with no content entry after them (the file's bytes were left as they were). */
export function metadataOnly(manifest: TurnManifest): MetadataEntry[] {
  const withContent = new Set(manifest.files.map((file) => file.path));
  return (manifest.structure ?? []).filter((entry): entry is MetadataEntry => entry.kind === 'metadata' && !withContent.has(entry.path));
}

function metadataJson(entry: MetadataEntry) {
  return {
    path: entry.path,
    operation: entry.operation,
    kind: entry.kind,
    size: entry.size,
    sha256: null,
    mode: entry.mode,
    mtime: entry.mtime,
    ...(entry.toolCallId ? { toolCallId: entry.toolCallId } : {}),
  };
}

function fileJson(entry: BackupEntry) {
  return {
    path: entry.path,
    operation: entry.operation,
    kind: entry.kind,
    size: entry.size,
    sha256: entry.sha256,
    mode: entry.mode,
    mtime: entry.mtime,
    ...(entry.linkTarget === undefined ? {} : { linkTarget: entry.linkTarget }),
    ...(entry.skipped ? { skipped: entry.skipped } : {}),
    ...(entry.toolCallId ? { toolCallId: entry.toolCallId } : {}),
  };
}

/** A turn as `backups list --json` prints it. */
export type TurnJson = ReturnType<typeof turnJson>;
