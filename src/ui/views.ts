/** What the page shows of the data: plain JSON shapes, built from manifests and the disk. */
import {
  beforeStateOf,
  describeState,
  observeState,
  stateDifference,
  turnEntries,
  type AfterState,
  type SessionBackupStore,
  type SetTimesNs,
  type TurnEntry,
  type TurnManifest,
} from '../backup/index.js';
import { entryDiff } from '../agent/turn-diff.js';


export interface TurnSummary {
  id: string;
  sessionId: string;
  kind: TurnManifest['kind'];
  message: string | null;
  startedAt: string;
  committedAt: string | null;
  restoreOf?: string;
  /** Files and symlinks backed up with their content (what `backups list` counts). */
  fileCount: number;
  /** Paths recorded without content: created by the turn, or directories. */
  otherCount: number;
}

export function turnSummary(manifest: TurnManifest): TurnSummary {
  return {
    id: manifest.id,
    sessionId: manifest.sessionId,
    kind: manifest.kind,
    message: manifest.message,
    startedAt: manifest.startedAt,
    committedAt: manifest.committedAt,
    ...(manifest.restoreOf === undefined ? {} : { restoreOf: manifest.restoreOf }),
    fileCount: manifest.files.length,
    otherCount: manifest.structure?.length ?? 0,
  };
}

/**
 * Where a file stands against its backup, which is what a restore would do with it:
 * - `as-before`: already as it was before the turn (restore skips it);
 * - `as-turn-left`: as the turn left it (restore puts the backup back);
 * - `changed-since`: changed after the turn (restore needs force);
 * - `not-committed`: the turn is still open (restore needs force);
 * - `no-content`: over the size cap when the turn ran, only metadata was kept.
 */
export type FileStatus = 'as-before' | 'as-turn-left' | 'changed-since' | 'not-committed' | 'no-content';

export interface FileView {
  path: string;
  operation: string;
  /** What was there before the turn: a file or symlink (with content), a directory, a special file, or nothing (the turn created the path). */
  kind: TurnEntry['kind'];
  /** Special files: a FIFO, socket or device. */
  fileType?: string;
  /** Files and symlinks: content length. */
  size?: number;
  /** Files, directories and special files: permission bits. */
  mode?: number;
  sha256?: string | null;
  linkTarget?: string;
  now: AfterState;
  status: FileStatus;
  /** Why `changed-since`: what differs from how the turn left the path. */
  detail?: string;
}

export interface TurnView extends TurnSummary {
  files: FileView[];
}

/** Files looked at (stat and hash) at once. */
const LOOK_CONCURRENCY = 8;

export async function turnView(manifest: TurnManifest, setTimesNs: SetTimesNs | undefined): Promise<TurnView> {
  const entries = turnEntries(manifest);
  const files = new Array<FileView>(entries.length);
  let next = 0;
  const worker = async () => {
    while (next < entries.length) {
      const index = next++;
      const entry = entries[index];
      if (entry) files[index] = await fileView(entry, setTimesNs);
    }
  };
  await Promise.all(Array.from({ length: Math.min(LOOK_CONCURRENCY, entries.length) }, worker));
  return { ...turnSummary(manifest), files };
}

function describeEntry(entry: TurnEntry): Omit<FileView, 'now' | 'status' | 'detail'> {
  const base = { path: entry.path, operation: entry.operation, kind: entry.kind };
  switch (entry.kind) {
    case 'absent':
      return base;
    case 'directory':
    case 'renamed':
      return { ...base, mode: entry.mode };
    case 'special':
      return { ...base, fileType: entry.fileType, mode: entry.mode };
    case 'metadata':
      return { ...base, size: entry.size, mode: entry.mode };
    default:
      return {
        ...base,
        size: entry.size,
        mode: entry.mode,
        sha256: entry.sha256,
        ...(entry.linkTarget === undefined ? {} : { linkTarget: entry.linkTarget }),
      };
  }
}

async function fileView(entry: TurnEntry, setTimesNs: SetTimesNs | undefined): Promise<FileView> {
  const now = await observeState(entry.path, setTimesNs === undefined ? {} : { setTimesNs });
  const base = { ...describeEntry(entry), now };
  if (entry.kind === 'file' && (entry.skipped === 'too-large' || entry.sha256 === null)) return { ...base, status: 'no-content' };
  if (stateDifference(beforeStateOf(entry), now) === undefined) return { ...base, status: 'as-before' };
  if (entry.after === null) return { ...base, status: 'not-committed' };
  const detail = stateDifference(entry.after, now);
  return detail === undefined ? { ...base, status: 'as-turn-left' } : { ...base, status: 'changed-since', detail };
}

/** One line of a diff, classified for colouring. */
export interface DiffLine {
  kind: 'head' | 'hunk' | 'add' | 'del' | 'ctx' | 'note';
  text: string;
}

export interface DiffView {
  lines: DiffLine[];
  /** Lines left out past the page's limit. */
  omitted: number;
}

/** A page stays usable: longer diffs are cut here (`backups diff` on the terminal shows all). */
export const DIFF_LINE_LIMIT = 5000;
const LINE_CHAR_LIMIT = 4000;

/**
 * The diff `backups diff` prints for a file or symlink (the same function), as
 * classified lines; for a path without content, what it was and what is there now.
 */
export async function diffView(store: SessionBackupStore, entry: TurnEntry, setTimesNs: SetTimesNs | undefined): Promise<DiffView> {
  if (entry.kind === 'absent' || entry.kind === 'directory' || entry.kind === 'special' || entry.kind === 'metadata' || entry.kind === 'renamed') {
    const now = describeState(await observeState(entry.path, setTimesNs === undefined ? {} : { setTimesNs }));
    const what = entry.kind === 'special' ? `a ${entry.fileType}` : entry.kind === 'metadata' ? 'a file (only its metadata was kept)' : 'a directory';
    const before = entry.kind === 'absent' ? 'nothing was here before the turn (it created this path)' : `${what}, mode ${entry.mode.toString(8).padStart(4, '0')}, before the turn`;
    return { lines: [{ kind: 'note', text: `${before}; now: ${now}` }], omitted: 0 };
  }
  const lines = classifyDiff(await entryDiff(store, entry, { color: false }));
  const shown = lines.slice(0, DIFF_LINE_LIMIT).map((line) => (line.text.length > LINE_CHAR_LIMIT ? { ...line, text: `${line.text.slice(0, LINE_CHAR_LIMIT)}…` } : line));
  return { lines: shown, omitted: lines.length - shown.length };
}

/**
 * Classify the lines of `backups diff` output. Before the first hunk only the file
 * headers (`--- `, `+++ `), mode lines, a symlink's `-`/`+` lines and one-line verdicts
 * (unchanged, binary, too large) appear; inside hunks the first character decides.
 */
export function classifyDiff(text: string): DiffLine[] {
  let inHunks = false;
  return text.split('\n').map((line): DiffLine => {
    if (line.startsWith('@@')) {
      inHunks = true;
      return { kind: 'hunk', text: line };
    }
    if (!inHunks) {
      if (line.startsWith('--- ') || line.startsWith('+++ ') || line.startsWith('old mode ') || line.startsWith('new mode ')) return { kind: 'head', text: line };
      if (line.startsWith('+')) return { kind: 'add', text: line };
      if (line.startsWith('-')) return { kind: 'del', text: line };
      return { kind: 'note', text: line };
    }
    if (line.startsWith('+')) return { kind: 'add', text: line };
    if (line.startsWith('-')) return { kind: 'del', text: line };
    if (line.startsWith('\\')) return { kind: 'note', text: line };
    return { kind: 'ctx', text: line };
  });
}
