import { randomBytes } from 'node:crypto';
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { errorCode } from './fs-util.js';
import { parseJournal } from './journal.js';
import { turnIdSchema, validateTurnId, type StoreLayout } from './layout.js';
import { followsFor, isRenameRecord, isStructureEntry, type TurnEntry, type TurnManifest } from './manifest-schema.js';

/**
 * What the kernel supervisor records under a lease (lease plugin): changes it decided and
 * made itself, one JSON line each, appended to `turns/<turn-id>.lease-<tag>.records` in
 * the journal's own format (a header line, then entry lines; journal.ts), each line
 * written before the change it describes. The broker reads them as they come (into the
 * turn and its journal); readers of an open turn read them too, after the journal, so a
 * broker killed before it read them loses none. The commit folds them into the manifest
 * and removes the files.
 */
export const LEASE_RECORDS_SUFFIX = '.records';
const LEASE_INFIX = '.lease-';

export function leaseRecordsName(turnId: string): string {
  return `${validateTurnId(turnId)}${LEASE_INFIX}${randomBytes(6).toString('hex')}${LEASE_RECORDS_SUFFIX}`;
}

/** The turn a records file belongs to, or undefined when the name is not one of them. */
export function turnOfLeaseRecords(name: string): string | undefined {
  if (!name.endsWith(LEASE_RECORDS_SUFFIX)) return undefined;
  const at = name.lastIndexOf(LEASE_INFIX);
  const turnId = at > 0 ? name.slice(0, at) : '';
  return turnIdSchema.safeParse(turnId).success ? turnId : undefined;
}

/** The records files of one turn, by name. */
export async function leaseRecordFiles(layout: StoreLayout, turnId: string): Promise<string[]> {
  const names = await fs.readdir(layout.turns).catch((error: unknown) => {
    if (errorCode(error) === 'ENOENT') return [] as string[];
    throw error;
  });
  return names.filter((name) => turnOfLeaseRecords(name) === turnId).sort().map((name) => path.join(layout.turns, name));
}

/** Every entry of the turn's records files, in their order (a torn last line is left out, as in a journal). */
export async function readLeaseRecords(layout: StoreLayout, sessionId: string, turnId: string): Promise<TurnEntry[]> {
  const out: TurnEntry[] = [];
  for (const file of await leaseRecordFiles(layout, turnId)) {
    const data = await fs.readFile(file).catch(() => undefined);
    if (!data || data.length === 0) continue;
    out.push(...parseJournal(data, { turnId, sessionId }).entries);
  }
  return out;
}

/** Whether `entry` adds to what `has` holds for its path (the same rules as a journal: first wins, content may follow metadata). */
export function addsTo(has: ReadonlyMap<string, TurnEntry>, entry: TurnEntry): boolean {
  if (isRenameRecord(entry)) return false;
  const earlier = has.get(entry.path);
  return earlier === undefined || followsFor(earlier, entry);
}

/** The turn with the records' entries it does not hold yet appended (an open turn as its readers see it). */
export function withLeaseRecords(manifest: TurnManifest, records: readonly TurnEntry[]): TurnManifest {
  if (records.length === 0) return manifest;
  const has = new Map<string, TurnEntry>();
  for (const entry of [...manifest.files, ...(manifest.structure ?? [])]) if (!isRenameRecord(entry)) has.set(entry.path, entry);
  const files = [...manifest.files];
  const structure = [...(manifest.structure ?? [])];
  for (const entry of records) {
    if (!addsTo(has, entry)) continue;
    has.set(entry.path, entry);
    if (isStructureEntry(entry)) structure.push(entry);
    else files.push(entry);
  }
  const merged: TurnManifest = { ...manifest, files };
  if (structure.length > 0) merged.structure = structure;
  return merged;
}

/**
 * Reads what was appended to a records file since `offset`: the complete lines (the
 * header, at offset 0, is checked and left out) and the offset after the last of them.
 */
export function readNewRecords(file: string, offset: number, expected: { turnId: string; sessionId: string }): { entries: TurnEntry[]; offset: number } {
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch (error) {
    if (errorCode(error) === 'ENOENT') return { entries: [], offset };
    throw error;
  }
  try {
    const size = fstatSync(fd).size;
    if (size <= offset) return { entries: [], offset };
    const data = Buffer.allocUnsafe(size - offset);
    let got = 0;
    while (got < data.length) {
      const n = readSync(fd, data, got, data.length - got, offset + got);
      if (n === 0) break;
      got += n;
    }
    const end = data.lastIndexOf(0x0a, got - 1);
    if (end < 0) return { entries: [], offset };
    const whole = data.subarray(0, end + 1);
    if (offset === 0) return { entries: parseJournal(whole, expected).entries, offset: end + 1 };
    // Lines after the header: parsed under a header of their own making, so the journal's checks apply.
    const header = `${JSON.stringify({ journal: 1, id: expected.turnId, sessionId: expected.sessionId, kind: 'turn', startedAt: new Date(0).toISOString() })}\n`;
    return { entries: parseJournal(Buffer.concat([Buffer.from(header), whole]), expected).entries, offset: offset + end + 1 };
  } finally {
    closeSync(fd);
  }
}
