import fs from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { BrokerError, ErrorCodes } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import { errorCode, removeQuietly, writeFileAtomic } from './fs-util.js';
import { journalPath, parseJournal } from './journal.js';
import { leaseRecordFiles, readLeaseRecords, turnOfLeaseRecords, withLeaseRecords } from './lease-records.js';
import { JOURNAL_SUFFIX, MANIFEST_SUFFIX, manifestFileName, turnIdSchema, type StoreLayout } from './layout.js';
import { describeIssues, turnManifestSchema, type TurnManifest } from './manifest-schema.js';

/**
 * Validate the whole manifest (once, at commit), then write it atomically: a manifest on
 * disk is always whole and always valid. Compact JSON: it is written once per turn and
 * read by programs (the CLI pretty-prints what it shows).
 */
export async function writeManifest(layout: StoreLayout, manifest: TurnManifest): Promise<void> {
  const checked = turnManifestSchema.safeParse(manifest);
  if (!checked.success) {
    throw new BrokerError(ErrorCodes.BACKUP_FAILED, `refusing to write an invalid manifest for turn ${manifest.id}:\n${describeIssues(checked.error)}`);
  }
  const target = path.join(layout.turns, manifestFileName(manifest.id));
  await writeFileAtomic(target, `${JSON.stringify(checked.data)}\n`, layout.tmp);
}

/** A turn as read from disk. */
export interface TurnRecord {
  manifest: TurnManifest;
  /** Set when it came from the journal of an open turn. */
  journal?: {
    /** Length of the trusted part. */
    wholeBytes: number;
    /** Whether something after it (a torn last line) was ignored. */
    tornTail: boolean;
  };
}

/**
 * One turn: its committed manifest, else its journal (an open turn), else a manifest
 * with committedAt null (an open turn as stores before the journal wrote it).
 * TURN_NOT_FOUND when there is none, BACKUP_FAILED when what is there is damaged,
 * STORE_UNAVAILABLE when it cannot be read. A torn last journal line is logged on `log`.
 */
export async function readTurnRecord(layout: StoreLayout, sessionId: string, turnId: string, log?: Logger): Promise<TurnRecord> {
  const manifest = await readManifestIfAny(layout, sessionId, turnId);
  if (manifest && manifest.committedAt !== null) return { manifest };
  // An open turn: its journal, and after it what a supervisor recorded under a lease that the broker may not have read.
  const records = await readLeaseRecords(layout, sessionId, turnId);
  const journal = await readJournalIfAny(layout, sessionId, turnId, log);
  if (journal) return Object.assign(journal, { manifest: withLeaseRecords(journal.manifest, records) });
  if (manifest) return { manifest: withLeaseRecords(manifest, records) };
  if (records.length > 0) {
    const header = await firstRecordsHeader(layout, sessionId, turnId);
    if (header) return { manifest: withLeaseRecords(header, records) };
  }
  // A commit may have renamed the manifest in and removed the journal between our two reads.
  const committed = await readManifestIfAny(layout, sessionId, turnId);
  if (committed) return { manifest: committed };
  throw new BrokerError(ErrorCodes.TURN_NOT_FOUND, `no turn ${turnId} in session ${sessionId}`, { details: { turnId, sessionId } });
}

/** One turn's manifest (committed or open); see readTurnRecord. */
export async function readManifestFile(layout: StoreLayout, sessionId: string, turnId: string, log?: Logger): Promise<TurnManifest> {
  return (await readTurnRecord(layout, sessionId, turnId, log)).manifest;
}

async function readFileIfAny(file: string): Promise<Buffer | undefined> {
  try {
    return await fs.readFile(file);
  } catch (error) {
    if (errorCode(error) === 'ENOENT') return undefined;
    throw new BrokerError(ErrorCodes.STORE_UNAVAILABLE, `cannot read ${file}: ${String(error)}`, { cause: error, errno: errorCode(error) });
  }
}

/** The `.json` manifest through the schema; undefined when there is none. */
async function readManifestIfAny(layout: StoreLayout, sessionId: string, turnId: string): Promise<TurnManifest | undefined> {
  const file = path.join(layout.turns, manifestFileName(turnId));
  const data = await readFileIfAny(file);
  if (data === undefined) return undefined;
  let json: unknown;
  try {
    json = JSON.parse(data.toString('utf8'));
  } catch (error) {
    throw new BrokerError(ErrorCodes.BACKUP_FAILED, `manifest of turn ${turnId} is not valid JSON`, { cause: error });
  }
  const parsed = turnManifestSchema.safeParse(json);
  if (!parsed.success) {
    throw new BrokerError(ErrorCodes.BACKUP_FAILED, `manifest of turn ${turnId} is damaged:\n${describeIssues(parsed.error)}`);
  }
  if (parsed.data.id !== turnId || parsed.data.sessionId !== sessionId) {
    throw new BrokerError(ErrorCodes.BACKUP_FAILED, `manifest ${file} names turn ${parsed.data.id} of session ${parsed.data.sessionId}`);
  }
  return parsed.data;
}

async function readJournalIfAny(layout: StoreLayout, sessionId: string, turnId: string, log: Logger | undefined): Promise<TurnRecord | undefined> {
  const file = journalPath(layout, turnId);
  const data = await readFileIfAny(file);
  if (data === undefined) return undefined;
  const parsed = parseJournal(data, { turnId, sessionId });
  if (parsed.ignored) {
    log?.warn(
      { turnId, file: { path: file }, ignored: parsed.ignored },
      'ignoring the torn last line of a turn journal (a backup interrupted by a crash; it was never acknowledged)',
    );
  }
  return { manifest: parsed.manifest, journal: { wholeBytes: parsed.wholeBytes, tornTail: parsed.ignored !== undefined } };
}

/** An open turn as the header of its first records file says (a turn whose every record a supervisor made). */
async function firstRecordsHeader(layout: StoreLayout, sessionId: string, turnId: string): Promise<TurnManifest | undefined> {
  for (const file of await leaseRecordFiles(layout, turnId)) {
    const data = await readFileIfAny(file);
    if (data && data.length > 0) return parseJournal(data, { turnId, sessionId }).manifest;
  }
  return undefined;
}

/** A turn (or a stray file among them) that could not be read, and why. */
export const damagedTurnSchema = z.strictObject({
  sessionId: z.string(),
  /** The turn id, or the file's name when it is not a turn's. */
  name: z.string(),
  reason: z.string(),
});
export type DamagedTurn = z.infer<typeof damagedTurnSchema>;

export interface ReadManifestsOptions {
  /** 'skip' logs and leaves damaged turns out (listing); 'throw' fails (anything that deletes). */
  onDamaged: 'skip' | 'throw';
  log: Logger;
  /** With 'skip': where the damaged ones are reported, for a caller that must not act as if they were not there. */
  damaged?: DamagedTurn[];
}

/** Every turn of a store, committed (manifest) or open (journal), ordered by start time, then id. */
export async function readManifestsIn(layout: StoreLayout, sessionId: string, options: ReadManifestsOptions): Promise<TurnManifest[]> {
  let names: string[];
  try {
    names = await fs.readdir(layout.turns);
  } catch (error) {
    if (errorCode(error) === 'ENOENT') return [];
    throw new BrokerError(ErrorCodes.STORE_UNAVAILABLE, `cannot list ${layout.turns}: ${String(error)}`, { cause: error, errno: errorCode(error) });
  }
  const damaged = (name: string, error: unknown) => {
    if (options.onDamaged === 'throw') throw error;
    options.log.warn({ file: { name }, err: error }, 'skipping a damaged turn');
    options.damaged?.push({ sessionId, name, reason: error instanceof Error ? error.message : String(error) });
  };
  const turnIds = new Set<string>();
  for (const name of names) {
    const leased = turnOfLeaseRecords(name);
    if (leased !== undefined) {
      turnIds.add(leased);
      continue;
    }
    const suffix = name.endsWith(MANIFEST_SUFFIX) ? MANIFEST_SUFFIX : name.endsWith(JOURNAL_SUFFIX) ? JOURNAL_SUFFIX : undefined;
    if (suffix === undefined) continue;
    const turnId = name.slice(0, -suffix.length);
    if (turnIdSchema.safeParse(turnId).success) turnIds.add(turnId);
    else damaged(name, new BrokerError(ErrorCodes.BACKUP_FAILED, `unexpected file ${name} among manifests`));
  }
  const out: TurnManifest[] = [];
  for (const turnId of turnIds) {
    try {
      out.push(await readManifestFile(layout, sessionId, turnId, options.log));
    } catch (error) {
      // Gone since the listing (removed by someone else): not a turn any more.
      if (error instanceof BrokerError && error.code === ErrorCodes.TURN_NOT_FOUND) continue;
      damaged(turnId, error);
    }
  }
  return sortTurns(out);
}

/**
 * Remove journals left beside a committed manifest (a crash between the commit's rename
 * and the journal's removal). Readers already ignore them; this only tidies. Anything
 * unreadable is left alone.
 */
export async function removeStaleJournals(layout: StoreLayout, sessionId: string): Promise<void> {
  const names = new Set(await fs.readdir(layout.turns));
  for (const name of names) {
    if (!name.endsWith(JOURNAL_SUFFIX)) continue;
    const turnId = name.slice(0, -JOURNAL_SUFFIX.length);
    if (!names.has(`${turnId}${MANIFEST_SUFFIX}`) || !turnIdSchema.safeParse(turnId).success) continue;
    const manifest = await readManifestIfAny(layout, sessionId, turnId).catch(() => undefined);
    if (manifest && manifest.committedAt !== null) await removeQuietly(path.join(layout.turns, name));
  }
}

export function sortTurns(turns: TurnManifest[]): TurnManifest[] {
  return turns.sort((a, b) => compareTimes(a.startedAt, b.startedAt) || compare(a.sessionId, b.sessionId) || compare(a.id, b.id));
}

/** ISO times may carry offsets, so compare instants, not strings. */
export function compareTimes(a: string, b: string): number {
  return Date.parse(a) - Date.parse(b);
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
