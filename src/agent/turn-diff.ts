import { createHash } from 'node:crypto';
import { createReadStream, type Stats } from 'node:fs';
import { lstat, readlink, realpath } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { describeState, observeState } from '../backup/file-state.js';
import type { AbsentEntry, BackupEntry, DirectoryEntry, MetadataEntry, SpecialEntry, TurnManifest } from '../backup/manifest-schema.js';
import type { SessionBackupStore } from '../backup/session-store.js';
import { printable } from '../core/printable.js';
import { contentNow } from './content-now.js';
import { octal, renderDiff, renderDiffBytes, renderLinkDiff } from './render-diff.js';
import { metadataOnly } from './turn-json.js';

/** One path of a turn's diff: a unified diff, or a line saying what is there instead (a directory, a special file, no content saved). */
export interface FileDiff {
  path: string;
  /** A unified diff from before the turn to now (from /dev/null for a path the turn created), or one line saying why there is none. */
  diff: string;
}

/** What a turn changed, against what is on disk now. */
export interface TurnDiff {
  turnId: string;
  sessionId: string;
  /** Empty when the turn backed up no file and left none it created. */
  files: FileDiff[];
}

/** What the CLI's diff writes: as `TurnDiff`, a raw diff's bytes kept exact. */
export interface TurnDiffOutput {
  files: Array<{ path: string; diff: string | Buffer }>;
  /** A path was named and the turn did not touch it. */
  notTouched?: string;
}

/**
 * A turn's diff: each backed-up file against what is there now, each file the turn
 * created (from /dev/null) and, in a line each, the special files it recorded. For the
 * whole turn, created paths that are gone again (temp files) or are directories are left
 * out; a path named is always answered (`notTouched` when the turn did not touch it).
 */
export async function diffTurnEntries(store: SessionBackupStore, manifest: TurnManifest, path: string | undefined, options: DiffStyle = {}): Promise<TurnDiffOutput> {
  const entries = path === undefined ? await withContentNow(diffableEntries(manifest)) : await entriesFor(manifest, path);
  if (path !== undefined && entries.length === 0) {
    const recorded = await recordedWithoutContent(manifest, path);
    if (recorded) return { files: [{ path: recorded.path, diff: await noContentLine(recorded) }] };
    return { files: [], notTouched: resolve(path) };
  }
  const specials = path === undefined ? (manifest.structure ?? []).filter((entry): entry is SpecialEntry => entry.kind === 'special') : [];
  const style = { color: options.color ?? false, raw: options.raw ?? false };
  const files: TurnDiffOutput['files'] = [];
  for (const entry of entries) files.push({ path: entry.path, diff: await entryDiff(store, entry, style) });
  for (const entry of specials) files.push({ path: entry.path, diff: await noContentLine(entry) });
  if (path === undefined) for (const entry of metadataOnly(manifest)) files.push({ path: entry.path, diff: await metadataLine(entry) });
  return { files };
}

/** A file whose metadata alone the turn kept: what of it changed since. */
async function metadataLine(entry: MetadataEntry): Promise<string> {
  const shown = printable(entry.path);
  const stats = await lstat(entry.path, { bigint: true }).catch(() => undefined);
  if (!stats?.isFile()) return `${shown}: a regular file of ${entry.size} B before the turn (only its metadata was kept); now ${stats ? describeType(stats) : 'gone'}`;
  const lines = [`${shown}: only its metadata was kept (the turn left its content as it was)`];
  const mode = Number(stats.mode & 0o7777n);
  if (mode !== entry.mode) lines.push(`old mode ${octal(entry.mode)}`, `new mode ${octal(mode)}`);
  if (Number(stats.uid) !== entry.uid || Number(stats.gid) !== entry.gid) lines.push(`old owner ${entry.uid}:${entry.gid}`, `new owner ${stats.uid}:${stats.gid}`);
  if (stats.mtimeNs.toString() !== entry.mtimeNs) lines.push(`old mtime ${entry.mtime}`, `new mtime ${stats.mtime.toISOString()}`);
  return lines.join('\n');
}

/** A directory, special file or file's metadata the turn recorded: what it was, and what is there now. */
async function noContentLine(entry: DirectoryEntry | SpecialEntry | MetadataEntry): Promise<string> {
  const what = entry.kind === 'special' ? `a ${entry.fileType}` : entry.kind === 'metadata' ? `a file (only its mode ${octal(entry.mode)}, owner, times and xattrs were kept)` : 'a directory';
  return `${printable(entry.path)}: ${what} before the turn, no content to diff; now ${describeState(await observeState(entry.path))}`;
}

/** What a diff can speak of: backed-up files and paths the turn created. */
function diffableEntries(manifest: TurnManifest): Array<BackupEntry | AbsentEntry> {
  return [...manifest.files, ...(manifest.structure ?? []).filter((entry): entry is AbsentEntry => entry.kind === 'absent')];
}

/** Backed-up files, and the created paths that hold a file or a symlink now. */
async function withContentNow(entries: Array<BackupEntry | AbsentEntry>): Promise<Array<BackupEntry | AbsentEntry>> {
  const kept = await Promise.all(entries.map(async (entry) => (entry.kind !== 'absent' || (await holdsContent(entry.path)) ? entry : undefined)));
  return kept.filter((entry) => entry !== undefined);
}

async function holdsContent(file: string): Promise<boolean> {
  const stats = await lstat(file).catch(() => undefined);
  return stats !== undefined && (stats.isFile() || stats.isSymbolicLink());
}

/**
 * The entry for a path as a person names it: manifests hold symlink-resolved paths, so
 * a name through a symlinked directory (or a relative one) is resolved the same way.
 */
async function entriesFor(manifest: TurnManifest, path: string): Promise<Array<BackupEntry | AbsentEntry>> {
  const names = await namesOf(path);
  return diffableEntries(manifest).filter((f) => names.includes(f.path));
}

/** A directory or special file the turn recorded at `path`: named, it is answered, not called untouched. */
async function recordedWithoutContent(manifest: TurnManifest, path: string): Promise<DirectoryEntry | SpecialEntry | MetadataEntry | undefined> {
  const names = await namesOf(path);
  return (manifest.structure ?? []).find((entry): entry is DirectoryEntry | SpecialEntry | MetadataEntry => entry.kind !== 'absent' && entry.kind !== 'renamed' && names.includes(entry.path));
}

/** A path as given (made absolute) and with its parent resolved, as manifests record it. */
async function namesOf(path: string): Promise<string[]> {
  const absolute = resolve(path);
  const canonical = await realpath(dirname(absolute)).then(
    (dir) => join(dir, basename(absolute)),
    () => absolute,
  );
  return [absolute, canonical];
}

/** Above this a text diff is not attempted (the diff algorithm is quadratic in the worst case). */
const DIFF_TEXT_LIMIT = 16 * 1024 * 1024;

/**
 * How a diff is written: `color` for a terminal; `raw` puts the files' bytes out exactly
 * (a pipe: a patch that applies), where otherwise control characters and bytes that are
 * not UTF-8 in them are shown as escapes (see `escapeContent`).
 */
export interface DiffStyle {
  color?: boolean;
  raw?: boolean;
}

/**
 * One entry as `backups diff` shows it: a unified diff from the backup to what is on disk
 * now, or from /dev/null for a path the turn created. Only a raw diff of text is a Buffer.
 */
export async function entryDiff(store: SessionBackupStore, entry: BackupEntry | AbsentEntry, style: DiffStyle & { raw?: false }): Promise<string>;
export async function entryDiff(store: SessionBackupStore, entry: BackupEntry | AbsentEntry, style: DiffStyle): Promise<string | Buffer>;
export async function entryDiff(store: SessionBackupStore, entry: BackupEntry | AbsentEntry, style: DiffStyle): Promise<string | Buffer> {
  const color = style.color ?? false;
  const shown = printable(entry.path);
  const stats = await lstat(entry.path).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT' || error.code === 'ENOTDIR') return undefined;
    throw error;
  });
  if (entry.kind === 'absent') return createdDiff(entry.path, shown, stats, style);
  if (entry.kind === 'symlink') {
    return renderLinkDiff(shown, printable(entry.linkTarget ?? ''), await linkNow(entry.path, stats), { color });
  }
  if (entry.skipped === 'too-large' || entry.sha256 === null) {
    return `${shown}: no content was backed up (over the size cap when the turn ran); nothing to diff`;
  }
  if (stats && !stats.isFile()) return `${shown}: was a regular file of ${entry.size} B (backup); now ${describeType(stats)}`;
  const modes = { before: entry.mode, ...(stats ? { now: stats.mode & 0o7777 } : {}) };
  if (entry.size > DIFF_TEXT_LIMIT || (stats && stats.size > DIFF_TEXT_LIMIT)) {
    const same = stats !== undefined && stats.size === entry.size && (await sha256Of(entry.path)) === entry.sha256;
    const verdict = !stats ? 'removed since the backup' : same ? 'content unchanged since the backup' : `content differs (now ${stats.size} B)`;
    return `${shown}: ${entry.size} B backup, too large to diff; ${verdict}`;
  }
  const before = await store.readBlob(entry.sha256);
  const now = stats ? await contentNow(entry.path, stats.size) : undefined;
  if (typeof now === 'string') return `${shown}: ${now}`;
  return style.raw ? renderDiffBytes(shown, before, now, { modes }) : renderDiff(shown, before, now, { color, modes });
}

/** A path the turn created, as it is now. */
async function createdDiff(file: string, shown: string, stats: Stats | undefined, style: DiffStyle): Promise<string | Buffer> {
  const color = style.color ?? false;
  if (!stats) return `${shown}: created by the turn, gone again`;
  if (stats.isSymbolicLink()) return renderLinkDiff(shown, undefined, await linkNow(file, stats), { color });
  if (!stats.isFile()) return `${shown}: created by the turn; now ${describeType(stats)}`;
  if (stats.size > DIFF_TEXT_LIMIT) return `${shown}: created by the turn, ${stats.size} B now, too large to diff`;
  const now = await contentNow(file, stats.size);
  if (typeof now === 'string') return `${shown}: created by the turn; ${now}`;
  return style.raw ? renderDiffBytes(shown, undefined, now, {}) : renderDiff(shown, undefined, now, { color });
}

/** What stands at a symlink's path now, its target made printable. */
async function linkNow(file: string, stats: Stats | undefined) {
  if (!stats) return { type: 'absent' } as const;
  if (!stats.isSymbolicLink()) return { type: 'other', what: describeType(stats) } as const;
  return { type: 'symlink', target: printable(await readlink(file)) } as const;
}

function describeType(stats: { isDirectory(): boolean; isFile(): boolean; isSymbolicLink(): boolean }): string {
  if (stats.isDirectory()) return 'a directory';
  if (stats.isSymbolicLink()) return 'a symlink';
  return stats.isFile() ? 'a regular file' : 'a special file';
}

async function sha256Of(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}
