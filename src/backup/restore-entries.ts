import { turnEntries, type TurnEntry, type TurnManifest } from './manifest-schema.js';

/**
 * A turn's entries as a restore takes them, one per path: a content entry that followed
 * a metadata entry of the same path (the turn changed the file's metadata, then its
 * bytes) carries the bytes and, from the metadata entry, the mode, owner, times and
 * xattrs the file had before the turn. Manifest order is kept.
 */
export function restorableEntries(manifest: TurnManifest): TurnEntry[] {
  const entries = turnEntries(manifest);
  const metadata = new Map<string, TurnEntry>();
  for (const entry of entries) if (entry.kind === 'metadata') metadata.set(entry.path, entry);
  if (metadata.size === 0) return entries;
  const withContent = new Set<string>();
  const out: TurnEntry[] = [];
  for (const entry of entries) {
    const before = metadata.get(entry.path);
    if (before?.kind === 'metadata' && (entry.kind === 'file' || entry.kind === 'symlink')) {
      withContent.add(entry.path);
      // Object.assign, not a spread: the fields the metadata entry knows replace the later ones.
      out.push(
        Object.assign({}, entry, {
          mode: before.mode,
          uid: before.uid,
          gid: before.gid,
          mtime: before.mtime,
          mtimeNs: before.mtimeNs,
          atime: before.atime,
          atimeNs: before.atimeNs,
          xattrs: before.xattrs,
        }),
      );
    } else out.push(entry);
  }
  return out.filter((entry) => entry.kind !== 'metadata' || !withContent.has(entry.path));
}
