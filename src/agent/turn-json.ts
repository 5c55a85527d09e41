import type { BackupEntry, StructureEntry, TurnManifest } from '../backup/manifest-schema.js';

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
    files: manifest.files.map(fileJson),
    structure: (manifest.structure ?? []).map(structureJson),
    ...(manifest.connections ? { connections: manifest.connections } : {}),
  };
}

/**
 * A path recorded without content, with the contract fields of a file entry: an absent
 * one (the turn created it) has size 0, sha256 null and mode 0; a directory or special
 * file its mode (and a special file its type).
 */
function structureJson(entry: StructureEntry) {
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
