import { createHash } from 'node:crypto';
import { createReadStream, type Stats } from 'node:fs';
import { lstat, readlink, realpath } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import {
  BackupHome,
  describeState,
  keptFileCount,
  observeState,
  validateSessionId,
  type AbsentEntry,
  type BackupEntry,
  type DirectoryEntry,
  type RestoreReport,
  type RewindReport,
  type SessionBackupStore,
  type MetadataEntry,
  type RenamedEntry,
  type SpecialEntry,
  type StructureEntry,
  type TurnManifest,
} from '../backup/index.js';
import { ExitCode } from './exit-codes.js';
import type { DamagedTurn } from '../backup/manifest-io.js';
import type { MetadataOps } from '../backup/metadata-ops.js';
import { native } from '../native/loader.js';
import { nativeMetadataOps } from '../native/metadata-ops.js';
import { firstLine } from '../core/printable.js';
import { noticeFor, stoppedOperationsAround } from '../plugins/git-plan-notice/index.js';
import { nameDamagedTurns, printJson, printable, table, type Io } from './output.js';
import { contentNow } from './content-now.js';
import { renderDiff, renderDiffBytes, renderLinkDiff } from './render-diff.js';

/** The store every `backups` command (and the `backups ui` page) reads and restores from. */
export function home(env: NodeJS.ProcessEnv): BackupHome {
  return new BackupHome({ metadata: restoreMetadataOps(), ...(env.BROKERED_SHELL_HOME ? { home: env.BROKERED_SHELL_HOME } : {}) });
}

/** The addon's metadata operations plus xattr removal, which a rewind needs to put a directory's xattrs back. */
function restoreMetadataOps(): MetadataOps {
  const ops = nativeMetadataOps();
  if (!ops.xattrs) return ops;
  return { ...ops, xattrs: { ...ops.xattrs, remove: (path, name) => native().removeXattr(path, name) } };
}

/** The shape `backups list --json` promises (more fields allowed, these exact). */
function turnJson(manifest: TurnManifest) {
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
  };
}

/**
 * A path recorded without content, with the contract fields of a file entry: an absent
 * one (the turn created it) has size 0, sha256 null and mode 0; a directory or special
 * file its mode (and a special file its type).
 */
/**
 * A structure entry's items: one, or for a directory the turn renamed whole, its record and
 * each name the rename put under the new name (created there: a rewind takes them away).
 */
function structureJsonItems(entry: StructureEntry): object[] {
  if (entry.kind !== 'renamed') return [structureJson(entry)];
  if (entry.expanded) return [];
  const own = { path: entry.path, operation: entry.operation, kind: entry.kind, to: entry.to, size: 0, sha256: null, mode: entry.mode, mtime: entry.mtime, ...(entry.toolCallId ? { toolCallId: entry.toolCallId } : {}) };
  const created = entry.tree.map((item) => ({ path: join(entry.to, item.replace(/\/$/, '')), operation: entry.operation, kind: 'absent' as const, size: 0, sha256: null, mode: 0 }));
  return [own, ...created];
}

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
function metadataOnly(manifest: TurnManifest): MetadataEntry[] {
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

const octal = (mode: number) => mode.toString(8).padStart(4, '0');

export async function listCommand(io: Io, options: { session?: string; json?: boolean }, env = process.env): Promise<number> {
  const backupHome = home(env);
  let turns: TurnManifest[];
  const damaged: DamagedTurn[] = [];
  if (options.session === undefined) turns = await backupHome.listTurns({ damaged });
  else {
    // A session with no backups yet is an empty list, not an error.
    const session = validateSessionId(options.session);
    turns = (await backupHome.listSessions()).includes(session) ? await backupHome.listTurns({ sessionId: session, damaged }) : [];
  }
  const status = nameDamagedTurns(io, damaged);
  if (options.json) {
    printJson(io, { turns: turns.map(turnJson), ...(damaged.length > 0 ? { damaged } : {}) });
    return status;
  }
  if (turns.length === 0) {
    io.out(options.session === undefined ? 'no backups yet' : `no backups for session ${printable(options.session)}`);
    return status;
  }
  const rows = turns.map((t) => [
    t.id,
    t.sessionId,
    t.committedAt ?? 'open',
    // A FIFO, socket or device the turn removed or changed, and a file whose metadata alone it changed, are files a rewind brings back too.
    String(keptFileCount(t)),
    // Paths the turn made where nothing was: an undo removes them, though no file was backed up.
    String((t.structure ?? []).filter((entry) => entry.kind === 'absent').length),
    t.kind === 'restore' ? `[restore] ${firstLine(t.message)}` : firstLine(t.message),
  ]);
  io.out(table([['TURN', 'SESSION', 'COMMITTED', 'FILES', 'CREATED', 'MESSAGE'], ...rows]));
  return status;
}

export async function showCommand(io: Io, ref: string, options: { json?: boolean }, env = process.env): Promise<number> {
  const { manifest } = await home(env).findTurn(ref);
  if (options.json) {
    printJson(io, turnJson(manifest));
    return ExitCode.OK;
  }
  io.out(`turn ${manifest.id} (session ${manifest.sessionId})`);
  if (manifest.kind === 'restore') io.out(`restore of turn ${manifest.restoreOf ?? '(unknown)'}; restore this turn to undo it`);
  io.out(`message:   ${manifest.message === null ? '(not committed)' : printable(manifest.message)}`);
  io.out(`started:   ${manifest.startedAt}`);
  io.out(`committed: ${manifest.committedAt ?? 'no'}`);
  const structure = manifest.structure ?? [];
  if (manifest.files.length === 0 && structure.length === 0) {
    io.out('no files were backed up in this turn');
    return ExitCode.OK;
  }
  const rows = manifest.files.map((f) => [
    f.operation,
    f.kind === 'symlink' ? `-> ${f.linkTarget ?? ''}` : f.skipped ? 'skipped (too large)' : `${f.size} B`,
    octal(f.mode),
    f.sha256?.slice(0, 12) ?? '-',
    f.path,
  ]);
  // Paths without content: what the turn created (a rewind removes it), directories and special files (mode and times kept).
  for (const entry of structure) {
    const size =
      entry.kind === 'absent'
        ? '(created)'
        : entry.kind === 'special'
          ? `(${entry.fileType})`
          : entry.kind === 'metadata'
            ? '(metadata)'
            : entry.kind === 'renamed'
              ? `(directory, renamed to ${printable(entry.to)}${entry.expanded ? ', recorded path by path' : ''})`
              : `(${directoryFate(entry)})`;
    rows.push([entry.operation, size, entry.kind === 'absent' ? '-' : octal(entry.mode), '-', entry.path]);
  }
  io.out(table([['OPERATION', 'SIZE', 'MODE', 'SHA256', 'PATH'], ...rows]));
  return ExitCode.OK;
}

/**
 * What became of a directory the turn recorded. The operation is the one that touched it or
 * a name in it, so `delete` on a directory that is still there means something in it went.
 */
function directoryFate(entry: DirectoryEntry): string {
  const after = entry.after;
  if (after === null) return 'directory';
  if (after.type === 'absent') return 'directory, removed';
  if (after.type !== 'other' || after.fileType !== 'directory') return 'directory, replaced';
  const changed = [
    after.mode !== undefined && after.mode !== entry.mode ? 'mode' : '',
    (after.uid !== undefined && after.uid !== entry.uid) || (after.gid !== undefined && after.gid !== entry.gid) ? 'owner' : '',
  ].filter(Boolean);
  return changed.length > 0 ? `directory, ${changed.join(' and ')} changed` : 'directory, kept';
}

/**
 * `backups diff`: each backed-up file against what is there now, each file the turn
 * created (from /dev/null) and, in a line each, the special files it recorded. For the
 * whole turn, created paths that are gone again (temp files) or are directories are left
 * out; a PATH named is always answered.
 */
export async function diffCommand(io: Io, ref: string, path: string | undefined, options: DiffStyle, env = process.env): Promise<number> {
  const { store, manifest } = await home(env).findTurn(ref);
  const entries = path === undefined ? await withContentNow(diffableEntries(manifest)) : await entriesFor(manifest, path);
  if (path !== undefined && entries.length === 0) {
    const recorded = await recordedWithoutContent(manifest, path);
    if (recorded) {
      io.out(await noContentLine(recorded));
      return ExitCode.OK;
    }
    io.err(`${printable(resolve(path))} was not touched in turn ${manifest.id}`);
    return ExitCode.FAILURE;
  }
  const specials = path === undefined ? (manifest.structure ?? []).filter((entry): entry is SpecialEntry => entry.kind === 'special') : [];
  if (entries.length + specials.length === 0) io.out(`turn ${manifest.id} backed up no files and left no file it created`);
  const style = { color: options.color ?? false, raw: options.raw ?? false };
  for (const entry of entries) io.out(await entryDiff(store, entry, style));
  for (const entry of specials) io.out(await noContentLine(entry));
  if (path === undefined) for (const entry of metadataOnly(manifest)) io.out(await metadataLine(entry));
  return ExitCode.OK;
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
  return (manifest.structure ?? []).find((entry): entry is DirectoryEntry | SpecialEntry | MetadataEntry => entry.kind !== 'absent' && names.includes(entry.path));
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

export interface RestoreOutcome {
  manifest: TurnManifest;
  report: RestoreReport;
  /** Some named paths are not in the turn, so nothing was changed; `report` is the dry-run check. */
  refused: boolean;
}

/**
 * What `backups restore` does, without the printing (the `backups ui` page calls it too):
 * the turn's files, or only `paths`, back to their state before the turn (`sessionId`
 * narrows where `ref` is looked up). Named paths are all checked first, so a mistyped
 * one changes nothing.
 */
export async function restoreTurnFiles(
  backupHome: BackupHome,
  ref: string,
  paths: string[],
  options: { dryRun?: boolean; force?: boolean; sessionId?: string },
): Promise<RestoreOutcome> {
  const { store, manifest } = await backupHome.findTurn(ref, options.sessionId === undefined ? {} : { sessionId: options.sessionId });
  const restoreOptions = {
    ...(paths.length > 0 ? { paths: paths.map((p) => resolve(p)) } : {}),
    dryRun: options.dryRun ?? false,
    force: options.force ?? false,
  };
  if (paths.length > 0 && !restoreOptions.dryRun) {
    // A mistyped path must not leave a half-done restore: check every name before changing anything.
    const check = await store.restore(manifest, { ...restoreOptions, dryRun: true });
    if (check.notInTurn.length > 0) return { manifest, report: check, refused: true };
  }
  return { manifest, report: await store.restore(manifest, restoreOptions), refused: false };
}

export interface RestoreCommandOptions {
  dryRun?: boolean;
  force?: boolean;
  json?: boolean;
  /** Rewind TURN and every later turn of its session, newest first. */
  to?: string;
  /** Restore the newest restore turn (undo the last restore). */
  undoLast?: boolean;
  /** Where TURN, --to and --undo-last look (default: every session). */
  session?: string;
}

/**
 * `backups restore TURN [PATH...]`, `backups restore --to TURN [PATH...]` and
 * `backups restore --undo-last [PATH...]`. `ref` is TURN (undefined with --to and
 * --undo-last, which take every positional argument as a PATH).
 */
export async function restoreCommand(io: Io, ref: string | undefined, paths: string[], options: RestoreCommandOptions, env = process.env): Promise<number> {
  const backupHome = home(env);
  const where = options.session === undefined ? {} : { sessionId: validateSessionId(options.session) };
  if (options.to !== undefined) return rewindCommand(io, backupHome, options.to, ref === undefined ? paths : [ref, ...paths], options);
  let turnRef: string;
  let named = paths;
  if (options.undoLast) {
    const { manifest } = await backupHome.lastRestore(where);
    turnRef = manifest.id;
    named = ref === undefined ? paths : [ref, ...paths];
    if (!options.json) io.out(`undoing turn ${manifest.id} (${printable(manifest.message ?? 'open restore')})`);
  } else {
    if (ref === undefined) throw new Error('a turn is needed (or --to TURN, or --undo-last)');
    turnRef = ref;
  }
  const { manifest, report, refused } = await restoreTurnFiles(backupHome, turnRef, named, {
    dryRun: options.dryRun ?? false,
    force: options.force ?? false,
    ...(where.sessionId === undefined ? {} : { sessionId: where.sessionId }),
  });
  if (refused) {
    if (options.json) printJson(io, report);
    for (const path of report.notInTurn) io.err(`not in turn ${manifest.id}: ${printable(path)}`);
    io.err('nothing was restored');
    return ExitCode.FAILURE;
  }
  if (options.json) printJson(io, report);
  else {
    printRestore(io, report, '');
    for (const path of report.notInTurn) io.err(`not in turn ${manifest.id}: ${printable(path)}`);
    if (report.rescueTurnId) io.out(`what was replaced is kept in turn ${report.rescueTurnId} (restore it to undo)`);
    if (report.dryRun) io.out('dry run: nothing was changed');
    else warnStoppedOperations(io, [report]);
    if (report.conflicts.length > 0) {
      io.err(`${report.conflicts.length} file(s) left alone: they are not as the turn left them`);
    }
  }
  // A file whose content was never saved (over the size cap) is not back: the restore is not whole.
  const unsaved = unsavedIn([report]);
  if (unsaved > 0 && !options.json) io.err(`${unsaved} file(s) not restored: the turn saved no content for them (over the size cap)`);
  if (report.failed.length > 0 || report.notInTurn.length > 0 || unsaved > 0) return ExitCode.FAILURE;
  return report.conflicts.length > 0 ? ExitCode.CONFLICTS : ExitCode.OK;
}

/** The lines of one turn's restore report (`indent` before each, for a multi-turn rewind). */
function printRestore(io: Io, report: RestoreReport, indent: string): void {
  const verb = report.dryRun ? 'would restore' : 'restored';
  for (const item of report.restored) {
    const forced = item.forced ? ' (forced)' : '';
    if (item.action === 'remove') {
      io.out(`${indent}${report.dryRun ? 'would remove' : 'removed'} ${printable(item.path)} (created by the turn)${forced}`);
      continue;
    }
    const how = [item.action === 'recreate' ? 'recreated' : '', item.forced ? 'forced' : ''].filter(Boolean).join(', ');
    const shown = item.kind === 'directory' ? `${printable(item.path)}/` : printable(item.path);
    io.out(`${indent}${verb} ${shown}${how ? ` (${how})` : ''}`);
  }
  // Paths the turn created and removed again (temp files), and directories as they were, are many and dull: counted, not listed.
  let quiet = 0;
  for (const item of report.skipped) {
    if (item.reason === 'unchanged' && item.kind !== undefined) quiet++;
    else io.out(`${indent}skipped ${printable(item.path)}: ${item.detail}`);
  }
  if (quiet > 0) io.out(`${indent}${quiet} path(s) without content (created and gone again, or directories) already as before the turn`);
  for (const item of report.conflicts) {
    const hint = item.reason === 'changed-since-turn' || item.reason === 'not-committed' || item.reason === 'occupied-by-special-file' ? '; --force to restore anyway' : '';
    io.err(`${indent}conflict ${printable(item.path)}: ${printable(item.detail)} (${item.reason}${hint})`);
  }
  for (const item of report.failed) io.err(`${indent}failed ${printable(item.path)}: ${printable(item.message)} [${item.code}]`);
}

/** `backups restore --to TURN`: TURN and every later turn of its session, newest first. */
async function rewindCommand(io: Io, backupHome: BackupHome, ref: string, paths: string[], options: RestoreCommandOptions): Promise<number> {
  const { store, target, turns } = await backupHome.rewindPlan(ref, options.session === undefined ? {} : { sessionId: validateSessionId(options.session) });
  const report: RewindReport = await store.rewind(turns, {
    dryRun: options.dryRun ?? false,
    force: options.force ?? false,
    ...(paths.length > 0 ? { paths: paths.map((p) => resolve(p)) } : {}),
  });
  if (options.json) printJson(io, report);
  else {
    if (report.notInTurn.length > 0) {
      for (const path of report.notInTurn) io.err(`not in turn ${target.id} or any later turn: ${printable(path)}`);
      io.err('nothing was restored');
    }
    for (const turn of report.turns) {
      const message = turns.find((t) => t.id === turn.turnId)?.message;
      io.out(`turn ${turn.turnId}${message ? ` (${printable(firstLine(message))})` : ''}:`);
      printRestore(io, turn, '  ');
    }
    if (report.stoppedAt !== undefined) {
      const stopped = report.turns.find((t) => t.turnId === report.stoppedAt);
      const why = stopped && stopped.conflicts.length > 0 ? `${stopped.conflicts.length} conflict(s), nothing of it was changed (--force to rewind anyway)` : 'it failed';
      io.err(`stopped at turn ${report.stoppedAt}: ${why}; older turns were not touched`);
    }
    if (report.rescueTurnId) io.out(`what was replaced is kept in turn ${report.rescueTurnId} (restore it, or --undo-last, to undo)`);
    const unsaved = unsavedIn(report.turns);
    if (unsaved > 0) io.err(`${unsaved} file(s) not restored: the turns saved no content for them (over the size cap)`);
    if (report.dryRun) io.out('dry run: nothing was changed');
    else if (report.complete && unsaved === 0) io.out(`rewound ${report.turns.length} turn(s): the files are as they were before turn ${target.id}`);
    if (!report.dryRun) warnStoppedOperations(io, report.turns);
  }
  if (report.notInTurn.length > 0 || report.turns.some((t) => t.failed.length > 0) || unsavedIn(report.turns) > 0) return ExitCode.FAILURE;
  return report.complete ? ExitCode.OK : ExitCode.CONFLICTS;
}

/**
 * A restore can bring back what a stopped rebase, am, cherry-pick or revert left (an
 * earlier turn's, aborted since), or make its folder count again by bringing back the
 * git directory's `objects` or `HEAD`: the person's `--continue` would carry it out, so
 * they hear of it as `run` would have said it, for every git directory the restore
 * wrote in.
 */
function warnStoppedOperations(io: Io, reports: readonly RestoreReport[]): void {
  const written = reports.flatMap((report) => report.restored.map((item) => item.path));
  for (const folder of stoppedOperationsAround(written)) io.err(`brokered-shell: warning: ${printable(noticeFor(folder))}`);
}

/** Files a restore could not bring back because the turn saved no content for them (over the size cap). */
function unsavedIn(reports: readonly RestoreReport[]): number {
  return reports.reduce((sum, report) => sum + report.skipped.filter((item) => item.reason === 'too-large').length, 0);
}
