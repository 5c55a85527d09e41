import { closeSync, constants as C, ftruncateSync, openSync, writeSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { BrokerError, ErrorCodes } from '../core/errors.js';
import { fdatasyncFd, settleAll, writeFileAtomic } from './fs-util.js';
import { journalFileName, sessionIdSchema, turnIdSchema, type StoreLayout } from './layout.js';
import {
  MANIFEST_VERSION,
  backupEntrySchema,
  describeIssues,
  STRUCTURE_KINDS,
  followsFor,
  isRenameRecord,
  isStructureEntry,
  isoSchema,
  structureEntrySchema,
  turnKindSchema,
  type BackupEntry,
  type StructureEntry,
  type TurnEntry,
  type TurnManifest,
} from './manifest-schema.js';

/**
 * The journal of an open turn, `turns/<turn-id>.journal`: JSON lines, each ending in "\n".
 *
 *   line 1    the header: {"journal":1,"id":…,"sessionId":…,"kind":…,["restoreOf":…,]"startedAt":…}
 *   line 2…   one entry each, in the order they were taken, `after` null: a backup with
 *             content (backupEntrySchema, kind file/symlink) or a path recorded without
 *             content (structureEntrySchema, kind absent/directory)
 *
 * A backup appends its one line with a single write (O_APPEND) and fdatasyncs it before
 * it returns, so the cost of a backup does not depend on how many the turn already has.
 * Some lines are appended without their own fdatasync (an `absent` entry: losing it in a
 * crash only leaves a created file behind on rewind, it loses no data); the next synced
 * append or the commit makes them durable, since fdatasync flushes the whole file.
 * The journal is only ever created whole (temp file, fsync, rename), by the turn's first
 * entry, so it always starts with a complete header; a turn that records nothing has no
 * journal and, once committed, only its manifest. The last line may be torn by a crash
 * in the middle of an append; that backup was never acknowledged, so the line is ignored
 * (with a warning) and never trusted. Any other unreadable line makes the turn damaged.
 *
 * The commit writes `turns/<turn-id>.json` (the manifest, with after-states) once and then
 * removes the journal; a journal left beside a committed manifest is stale and ignored.
 */
export const JOURNAL_VERSION = 1;

export const journalHeaderSchema = z.strictObject({
  journal: z.literal(JOURNAL_VERSION),
  id: turnIdSchema,
  sessionId: sessionIdSchema,
  kind: turnKindSchema,
  restoreOf: turnIdSchema.optional(),
  startedAt: isoSchema,
});
export type JournalHeader = z.infer<typeof journalHeaderSchema>;

export function journalPath(layout: StoreLayout, turnId: string): string {
  return path.join(layout.turns, journalFileName(turnId));
}

export function journalHeaderOf(manifest: TurnManifest): JournalHeader {
  const header: JournalHeader = {
    journal: JOURNAL_VERSION,
    id: manifest.id,
    sessionId: manifest.sessionId,
    kind: manifest.kind,
    startedAt: manifest.startedAt,
  };
  if (manifest.restoreOf !== undefined) header.restoreOf = manifest.restoreOf;
  return header;
}

/** The schema a journal line of this kind must satisfy. */
function lineSchemaFor(kind: unknown): z.ZodType<TurnEntry> {
  return typeof kind === 'string' && STRUCTURE_KINDS.has(kind) ? structureEntrySchema : backupEntrySchema;
}

/** One entry as its journal line, validated on its own (never the whole turn). */
export function encodeEntryLine(entry: TurnEntry): string {
  const checked = lineSchemaFor(entry.kind).safeParse(entry);
  if (!checked.success) {
    throw new BrokerError(ErrorCodes.BACKUP_FAILED, `refusing to record an invalid entry for ${entry.path}:\n${describeIssues(checked.error)}`);
  }
  return `${JSON.stringify(checked.data)}\n`;
}

/**
 * A whole journal: the header, the entries already recorded (they were validated when
 * they were taken or read) and optionally one more, already encoded line.
 */
export function journalText(header: JournalHeader, entries: Iterable<TurnEntry>, extraLine = ''): string {
  const checked = journalHeaderSchema.safeParse(header);
  if (!checked.success) {
    throw new BrokerError(ErrorCodes.BACKUP_FAILED, `refusing to write an invalid journal header for turn ${header.id}:\n${describeIssues(checked.error)}`);
  }
  const lines = [JSON.stringify(checked.data)];
  for (const entry of entries) lines.push(JSON.stringify(entry));
  return `${lines.join('\n')}\n${extraLine}`;
}

/**
 * Create or replace a journal whole (temp, fsync, rename, fsync `turns/`; no sync with
 * `sync: false`), running `alongside` as writeFileAtomic does. Used by a turn's first
 * backup, and to repair a journal after a failed append or a torn tail. Returns its
 * length in bytes.
 */
export async function writeJournal(
  layout: StoreLayout,
  turnId: string,
  text: string,
  options: { sync?: boolean; alongside?: (() => Promise<void>) | undefined } = {},
): Promise<number> {
  const data = Buffer.from(text, 'utf8');
  await writeFileAtomic(journalPath(layout, turnId), data, layout.tmp, options);
  return data.length;
}

/**
 * Append one encoded line with a single write and make it durable (fdatasync: data and
 * length) unless `sync` is false; run `alongside` (another sync the line depends on) with
 * it, started after the write, so that one journal commit of the file system can serve
 * both. `wholeBytes` is the journal's length before; on failure of either the file is cut
 * back to it (best effort), so no half line stays behind. Returns the new length.
 */
export async function appendJournalLine(
  file: string,
  line: string,
  wholeBytes: number,
  options: { sync?: boolean; alongside?: (() => Promise<void>) | undefined } = {},
): Promise<number> {
  const data = Buffer.from(line, 'utf8');
  // open/write/close are synchronous (a page-cache append); only the fdatasync waits on the pool.
  const fd = openSync(file, C.O_WRONLY | C.O_APPEND | C.O_NOFOLLOW);
  try {
    try {
      const written = writeSync(fd, data, 0, data.length);
      if (written !== data.length) throw new Error(`short write to ${file}: ${written} of ${data.length} bytes`);
      // Both syncs run at once, after the write: the line counts only if both succeed.
      await settleAll([options.alongside?.(), options.sync !== false ? fdatasyncFd(fd) : undefined]);
    } catch (error) {
      try {
        ftruncateSync(fd, wholeBytes);
      } catch {
        // best effort: a torn last line is ignored by the reader anyway
      }
      throw error;
    }
  } finally {
    closeSync(fd);
  }
  return wholeBytes + data.length;
}

export interface ParsedJournal {
  /** The open turn as a manifest: committedAt and message null, after-states null. */
  manifest: TurnManifest;
  /** The same entries in the order of their lines. */
  entries: TurnEntry[];
  /** Length of the part that was trusted (through the last good line's "\n"). */
  wholeBytes: number;
  /** What was ignored after it: a torn or unreadable last line. */
  ignored?: { bytes: number; line: number; reason: string };
}

const NEWLINE = 0x0a;

/**
 * Read a journal (see the format above). Throws BACKUP_FAILED when it is damaged: a bad
 * header, a bad line before the last, a path recorded twice, or a header naming another
 * turn or session.
 */
export function parseJournal(data: Buffer, expected: { turnId: string; sessionId: string }): ParsedJournal {
  const { turnId, sessionId } = expected;
  const damaged = (why: string) => new BrokerError(ErrorCodes.BACKUP_FAILED, `journal of turn ${turnId} is damaged: ${why}`);

  // "\n" never occurs inside a multi-byte UTF-8 sequence, and JSON.stringify escapes it in strings.
  const lines: Array<{ start: number; end: number }> = [];
  let offset = 0;
  while (offset < data.length) {
    const end = data.indexOf(NEWLINE, offset);
    if (end === -1) break;
    lines.push({ start: offset, end });
    offset = end + 1;
  }
  const tornBytes = data.length - offset;

  const headerLine = lines[0];
  if (headerLine === undefined) throw damaged(data.length === 0 ? 'the file is empty' : 'the header line is incomplete');
  const header = parseLine(data, headerLine, journalHeaderSchema);
  if (!header.ok) throw damaged(`line 1 (header): ${header.reason}`);
  if (header.value.id !== turnId || header.value.sessionId !== sessionId) {
    throw damaged(`its header names turn ${header.value.id} of session ${header.value.sessionId}`);
  }

  const files: BackupEntry[] = [];
  const structure: StructureEntry[] = [];
  const entries: TurnEntry[] = [];
  const seen = new Map<string, TurnEntry>();
  let wholeBytes = headerLine.end + 1;
  let ignored: ParsedJournal['ignored'];
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i] as { start: number; end: number };
    const entry = parseEntryLine(data, line);
    if (!entry.ok) {
      if (i === lines.length - 1 && tornBytes === 0) {
        // The last line: an append the crash interrupted, never acknowledged.
        ignored = { bytes: data.length - line.start, line: i + 1, reason: entry.reason };
        break;
      }
      throw damaged(`line ${i + 1}: ${entry.reason}`);
    }
    if (!isRenameRecord(entry.value)) {
      const earlier = seen.get(entry.value.path);
      if (earlier && !followsFor(earlier, entry.value)) throw damaged(`line ${i + 1}: ${entry.value.path} is recorded twice`);
      seen.set(entry.value.path, entry.value);
    }
    if (isStructureEntry(entry.value)) structure.push(entry.value);
    else files.push(entry.value);
    entries.push(entry.value);
    wholeBytes = line.end + 1;
  }
  if (tornBytes > 0) ignored = { bytes: tornBytes, line: lines.length + 1, reason: 'no end of line (torn by an interrupted write)' };

  const manifest: TurnManifest = {
    version: MANIFEST_VERSION,
    id: header.value.id,
    sessionId: header.value.sessionId,
    kind: header.value.kind,
    message: null,
    startedAt: header.value.startedAt,
    committedAt: null,
    files,
  };
  if (header.value.restoreOf !== undefined) manifest.restoreOf = header.value.restoreOf;
  if (structure.length > 0) manifest.structure = structure;
  return ignored === undefined ? { manifest, entries, wholeBytes } : { manifest, entries, wholeBytes, ignored };
}

type LineResult<T> = { ok: true; value: T } | { ok: false; reason: string };

/** An entry line of either kind (chosen by its `kind`). */
function parseEntryLine(data: Buffer, line: { start: number; end: number }): LineResult<TurnEntry> {
  let json: unknown;
  try {
    json = JSON.parse(data.toString('utf8', line.start, line.end));
  } catch (error) {
    return { ok: false, reason: `not valid JSON (${error instanceof Error ? error.message : String(error)})` };
  }
  const kind = typeof json === 'object' && json !== null && 'kind' in json ? (json as { kind: unknown }).kind : undefined;
  const parsed = lineSchemaFor(kind).safeParse(json);
  return parsed.success ? { ok: true, value: parsed.data } : { ok: false, reason: `invalid:\n${describeIssues(parsed.error)}` };
}

function parseLine<T>(data: Buffer, line: { start: number; end: number }, schema: z.ZodType<T>): LineResult<T> {
  let json: unknown;
  try {
    json = JSON.parse(data.toString('utf8', line.start, line.end));
  } catch (error) {
    return { ok: false, reason: `not valid JSON (${error instanceof Error ? error.message : String(error)})` };
  }
  const parsed = schema.safeParse(json);
  return parsed.success ? { ok: true, value: parsed.data } : { ok: false, reason: `invalid:\n${describeIssues(parsed.error)}` };
}
