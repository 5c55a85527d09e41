import { z } from 'zod';
import { decodeTrashPath, encodeTrashPath } from './path-encoding.js';

/**
 * The `.trashinfo` file: a desktop-entry style group `[Trash Info]` with `Path=` and
 * `DeletionDate=`. Writing is strict; reading is tolerant of what other implementations
 * produce (CRLF, comments, extra keys, the spec example's basic date form) and reports
 * a problem instead of throwing, so one broken file never hides the rest of a trash.
 */

export const TRASH_INFO_GROUP = '[Trash Info]';

/** `YYYY-MM-DDThh:mm:ss`, also `YYYYMMDDThh:mm:ss` (the form used in the spec's own example). */
const DELETION_DATE = /^(\d{4})-?(\d{2})-?(\d{2})T(\d{2}):(\d{2}):(\d{2})$/;

export const rawTrashInfoSchema = z.strictObject({
  path: z.string().min(1, 'Path= is empty'),
  deletionDate: z.string().regex(DELETION_DATE, 'DeletionDate= is not YYYY-MM-DDThh:mm:ss'),
});
const KEY_NAMES: Record<string, string> = { path: 'Path=', deletionDate: 'DeletionDate=' };

export type RawTrashInfo = z.infer<typeof rawTrashInfoSchema>;

export interface TrashInfo {
  /** Decoded `Path=`: absolute, or relative to the trash's top directory. */
  path: string;
  /** `Path=` exactly as stored. */
  encodedPath: string;
  /** Local time, whole seconds (the file has no time zone). */
  deletedAt: Date;
}

export type TrashInfoParse = { ok: true; info: TrashInfo } | { ok: false; problem: string };

const pad = (n: number, width = 2): string => String(n).padStart(width, '0');

/** Local wall-clock time, as the spec asks, without a zone suffix. */
export function formatDeletionDate(date: Date): string {
  return (
    `${pad(date.getFullYear(), 4)}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}` +
    `T${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`
  );
}

export function parseDeletionDate(text: string): Date | undefined {
  const m = DELETION_DATE.exec(text);
  if (m === null) return undefined;
  const [year, month, day, hour, minute, second] = m.slice(1).map(Number) as [number, number, number, number, number, number];
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) return undefined;
  return new Date(year, month - 1, day, hour, minute, Math.min(second, 59));
}

/** `path` is what goes into `Path=` before encoding (absolute or top-dir relative). */
export function formatTrashInfo(path: string, deletedAt: Date): string {
  return `${TRASH_INFO_GROUP}\nPath=${encodeTrashPath(path)}\nDeletionDate=${formatDeletionDate(deletedAt)}\n`;
}

/** Keys of the `[Trash Info]` group; the first occurrence of a key wins. */
function readGroup(text: string): Map<string, string> | undefined {
  let inGroup = false;
  let sawGroup = false;
  const keys = new Map<string, string>();
  for (const rawLine of text.split('\n')) {
    const line = rawLine.endsWith('\r') ? rawLine.slice(0, -1) : rawLine;
    if (line.trim() === '' || line.startsWith('#')) continue;
    if (line.startsWith('[')) {
      inGroup = line.trim() === TRASH_INFO_GROUP;
      sawGroup ||= inGroup;
      continue;
    }
    if (!inGroup) continue;
    const eq = line.indexOf('=');
    if (eq <= 0) continue;
    const key = line.slice(0, eq).trim();
    if (!keys.has(key)) keys.set(key, line.slice(eq + 1).trim());
  }
  return sawGroup ? keys : undefined;
}

export function parseTrashInfo(text: string): TrashInfoParse {
  const keys = readGroup(text);
  if (keys === undefined) return { ok: false, problem: `no ${TRASH_INFO_GROUP} group` };
  const parsed = rawTrashInfoSchema.safeParse({ path: keys.get('Path'), deletionDate: keys.get('DeletionDate') });
  if (!parsed.success) {
    const problem = parsed.error.issues
      .map((issue) => (issue.code === 'invalid_type' ? `${KEY_NAMES[String(issue.path[0])] ?? 'a key'} is missing` : issue.message))
      .join('; ');
    return { ok: false, problem };
  }
  const deletedAt = parseDeletionDate(parsed.data.deletionDate);
  if (deletedAt === undefined) return { ok: false, problem: `DeletionDate= is out of range: ${parsed.data.deletionDate}` };
  let path: string;
  try {
    path = decodeTrashPath(parsed.data.path);
  } catch (error) {
    return { ok: false, problem: error instanceof Error ? error.message : String(error) };
  }
  return { ok: true, info: { path, encodedPath: parsed.data.path, deletedAt } };
}
