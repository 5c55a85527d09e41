import fs from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { BrokerError, ErrorCodes } from '../core/errors.js';
import { silentLogger, type Logger } from '../core/logger.js';
import { errorCode, fsyncDir, mkdirPrivate } from './fs-util.js';
import {
  GC_GRACE_MS,
  acquireSessionLock,
  blobsOfTurn,
  collectLocked,
  isRecent,
  listBlobsOnDisk,
  maintenancePaths,
  selectSessions,
  sessionLayout,
  staleTemps,
  type BlobOnDisk,
  type GcReport,
  type SessionLock,
} from './gc.js';
import { journalFileName, manifestFileName, type StoreLayout } from './layout.js';
import { readManifestsIn } from './manifest-io.js';
import { turnKindSchema, turnManifestSchema, type TurnManifest } from './manifest-schema.js';
import type { MetadataOps } from './metadata-ops.js';

/**
 * Retention: which turns go (`pruneBackups`), then blob GC (gc.ts) for every session
 * in scope.
 *
 * Which turns go. A turn's time is its commit time (an open turn's: its start). Per
 * session, the turns are ranked newest first. `keepLast` keeps the first N; `olderThan`
 * keeps everything at or after the cutoff; given both, a turn goes only when both let it
 * go. `maxSizeBytes` then drops the oldest remaining turns (across the sessions in scope)
 * until the blobs that would stay fit the budget. Always kept, whatever the criteria:
 *   - open (uncommitted) turns: a broker may be writing them. `includeOpen` lets those
 *     whose journal has not changed within the grace period go (a crashed broker's);
 *   - the newest committed turn of each session, unless `includeNewest`;
 *   - with `keepLast`, the last N (also against the budget).
 *
 * How a turn goes (crash consistency). A committed turn is its manifest; removing it is
 * one rename of `turns/<id>.json` into `pruned/`, which is atomic: the turn is listed
 * whole or not at all. A stale journal beside the manifest is unlinked first (else the
 * turn would come back as an open one). `turns/` is fsynced before any blob is removed,
 * so after a crash no manifest can reappear whose blobs are gone; at worst blobs stay
 * unreferenced and the next GC takes them. `pruned/` is emptied right after, and swept
 * by every GC (a crash in between leaves only files nobody reads).
 */

// ---------------------------------------------------------------------------------------
// Parsing what people type

export type OlderThan = { kind: 'date'; at: Date } | { kind: 'duration'; ms: number };

const DURATION_UNITS: Record<string, number> = {
  s: 1000,
  m: 60 * 1000,
  h: 60 * 60 * 1000,
  d: 24 * 60 * 60 * 1000,
  w: 7 * 24 * 60 * 60 * 1000,
};

const isoDateTime = z.iso.datetime({ offset: true });

/**
 * `30d`, `12h`, `90m`, `45s`, `2w` (relative to now), `2026-11-01` (midnight UTC) or a
 * full ISO date-time with offset. Throws INVALID_OPTIONS.
 */
export function parseOlderThan(text: string): OlderThan {
  const value = text.trim();
  const duration = /^(\d+)([smhdw])$/.exec(value);
  if (duration) {
    const ms = Number(duration[1]) * (DURATION_UNITS[duration[2] ?? ''] ?? Number.NaN);
    if (Number.isSafeInteger(ms)) return { kind: 'duration', ms };
  }
  const day = /^(\d{4})-(\d{2})-(\d{2})$/.exec(value);
  if (day) {
    const at = new Date(Date.UTC(Number(day[1]), Number(day[2]) - 1, Number(day[3])));
    if (at.toISOString().slice(0, 10) === value) return { kind: 'date', at };
  }
  if (isoDateTime.safeParse(value).success) return { kind: 'date', at: new Date(value) };
  throw new BrokerError(
    ErrorCodes.INVALID_OPTIONS,
    `invalid age ${JSON.stringify(text)}: give a duration (30d, 12h, 90m, 45s, 2w) or a date (2026-11-01, 2026-11-01T12:00:00Z)`,
  );
}

/** The instant before which a turn is "older than". */
export function cutoffOf(spec: OlderThan, now: Date): Date {
  return spec.kind === 'date' ? spec.at : new Date(now.getTime() - spec.ms);
}

const SIZE_UNITS: Record<string, number> = { '': 1, K: 1024, M: 1024 ** 2, G: 1024 ** 3, T: 1024 ** 4 };

/** `500M`, `1.5G`, `64K`, `2T`, `1000` (bytes); units are powers of 1024, `B`/`iB` may follow. */
export function parseSize(text: string): number {
  const match = /^(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)(?:i?[bB])?$/.exec(text.trim());
  const bytes = match ? Math.floor(Number(match[1]) * (SIZE_UNITS[(match[2] ?? '').toUpperCase()] ?? Number.NaN)) : Number.NaN;
  if (!Number.isSafeInteger(bytes)) {
    throw new BrokerError(ErrorCodes.INVALID_OPTIONS, `invalid size ${JSON.stringify(text)}: give bytes or a number with K, M, G or T (e.g. 500M)`);
  }
  return bytes;
}

/** A whole number of turns, 0 or more. */
export function parseCount(text: string): number {
  const value = text.trim();
  const count = /^\d+$/.test(value) ? Number(value) : Number.NaN;
  if (!Number.isSafeInteger(count)) throw new BrokerError(ErrorCodes.INVALID_OPTIONS, `invalid count ${JSON.stringify(text)}: give a whole number`);
  return count;
}

// ---------------------------------------------------------------------------------------
// The report

export const pruneReasonSchema = z.enum(['keep-last', 'older-than', 'max-size']);
export type PruneReason = z.infer<typeof pruneReasonSchema>;

export const prunedTurnSchema = z.strictObject({
  sessionId: z.string(),
  turnId: z.string(),
  kind: turnKindSchema,
  open: z.boolean(),
  startedAt: z.string(),
  committedAt: z.string().nullable(),
  message: z.string().nullable(),
  files: z.number().int().min(0),
  /** The criteria that let it go. */
  reasons: z.array(pruneReasonSchema),
});
export type PrunedTurn = z.infer<typeof prunedTurnSchema>;

/** Why a turn the criteria would take was kept, and the flag that would let it go (null: none). */
export const heldTurnSchema = z.strictObject({
  sessionId: z.string(),
  turnId: z.string(),
  why: z.enum(['newest', 'open', 'open-active']),
  flag: z.enum(['--include-newest', '--include-open']).nullable(),
});
export type HeldTurn = z.infer<typeof heldTurnSchema>;

export const pruneReportSchema = z.strictObject({
  dryRun: z.boolean(),
  /** The sessions looked at. */
  sessions: z.array(z.string()),
  criteria: z.strictObject({
    keepLast: z.number().int().min(0).nullable(),
    /** The cutoff instant (ISO) of olderThan. */
    olderThan: z.string().nullable(),
    maxSizeBytes: z.number().int().min(0).nullable(),
    includeNewest: z.boolean(),
    includeOpen: z.boolean(),
  }),
  pruned: z.array(prunedTurnSchema),
  held: z.array(heldTurnSchema),
  /** Turns left in the sessions looked at. */
  keptTurns: z.number().int().min(0),
  /** Blob GC over the sessions looked at (in a dry run: what it would do). */
  gc: z.strictObject({
    blobsRemoved: z.number().int().min(0),
    bytesFreed: z.number().int().min(0),
    blobsKeptRecent: z.number().int().min(0),
    bytesKeptRecent: z.number().int().min(0),
    tempsRemoved: z.number().int().min(0),
  }),
  /** Bytes of blobs on disk before and after (in a dry run: as projected). */
  storedBytes: z.strictObject({ before: z.number().int().min(0), after: z.number().int().min(0) }),
  /** With maxSizeBytes: whether what stays fits. */
  budget: z.strictObject({ maxBytes: z.number().int().min(0), met: z.boolean() }).nullable(),
});
export type PruneReport = z.infer<typeof pruneReportSchema>;

export interface PruneOptions {
  home: string;
  /** Only this session (default: every session under home). */
  sessionId?: string;
  keepLast?: number;
  olderThan?: OlderThan;
  maxSizeBytes?: number;
  /** Let the newest committed turn of a session go too. */
  includeNewest?: boolean;
  /** Let open turns go whose journal has been idle for the grace period. */
  includeOpen?: boolean;
  dryRun?: boolean;
  /** Blob grace period (gc.ts); also how long an open turn must be idle for includeOpen. */
  graceMs?: number;
  /** What a duration in olderThan counts back from (default: now). */
  now?: () => Date;
  logger?: Logger;
  metadata?: MetadataOps;
}

// ---------------------------------------------------------------------------------------
// Planning

interface TurnView {
  manifest: TurnManifest;
  open: boolean;
  /** committedAt, else startedAt, in ms. */
  time: number;
  blobs: Set<string>;
  /** Why it stays whatever the criteria say; undefined: it may go. */
  guard?: 'newest' | 'open' | 'open-active' | 'keep-last';
  /** Position among the session's turns that may go, newest first. */
  rank: number;
  reasons: PruneReason[];
}

interface SessionPlan {
  sessionId: string;
  layout: StoreLayout;
  turns: TurnView[];
  blobs: Map<string, BlobOnDisk>;
}

const newestFirst = (a: TurnView, b: TurnView) => b.time - a.time || compareIds(b.manifest.id, a.manifest.id);
const oldestFirst = (a: TurnView, b: TurnView) =>
  a.time - b.time || compareIds(a.manifest.sessionId, b.manifest.sessionId) || compareIds(a.manifest.id, b.manifest.id);

function compareIds(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

async function readSession(home: string, sessionId: string, startedMs: number, graceMs: number, log: Logger): Promise<SessionPlan> {
  const layout = sessionLayout(home, sessionId);
  let manifests: TurnManifest[];
  try {
    // Anything that deletes must see every turn: a damaged one stops the prune before it changes anything.
    manifests = await readManifestsIn(layout, sessionId, { onDamaged: 'throw', log });
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    throw new BrokerError(ErrorCodes.BACKUP_FAILED, `session ${sessionId} has a turn that cannot be read, so nothing was pruned: ${why}`, {
      cause: error,
      details: { sessionId },
    });
  }
  const turns: TurnView[] = [];
  for (const manifest of manifests) {
    const open = manifest.committedAt === null;
    const view: TurnView = {
      manifest,
      open,
      time: Date.parse(manifest.committedAt ?? manifest.startedAt),
      blobs: blobsOfTurn(manifest),
      rank: 0,
      reasons: [],
    };
    if (open) view.guard = (await idleSince(layout, manifest.id, startedMs, graceMs)) ? 'open' : 'open-active';
    turns.push(view);
  }
  const blobs = new Map((await listBlobsOnDisk(layout)).map((b) => [b.sha256, b] as const));
  return { sessionId, layout, turns, blobs };
}

/** Whether an open turn's journal (or old-style open manifest) has not changed within the grace period. */
async function idleSince(layout: StoreLayout, turnId: string, startedMs: number, graceMs: number): Promise<boolean> {
  for (const name of [journalFileName(turnId), manifestFileName(turnId)]) {
    const stats = await fs.lstat(path.join(layout.turns, name)).catch(() => undefined);
    if (stats) return !isRecent(stats.mtimeMs, startedMs, graceMs);
  }
  return false;
}

interface Criteria {
  keepLast: number | undefined;
  cutoff: number | undefined;
  maxSizeBytes: number | undefined;
  includeNewest: boolean;
  includeOpen: boolean;
}

/** Guards and rule matches of one session; returns the turns the rules take and the ones held back. */
function applyRules(session: SessionPlan, criteria: Criteria): { take: TurnView[]; held: TurnView[] } {
  const { turns } = session;
  const committed = turns.filter((t) => !t.open).sort(newestFirst);
  const newest = committed[0];
  if (newest && !criteria.includeNewest) newest.guard = 'newest';
  // Idle open turns may go when asked; active ones never.
  if (criteria.includeOpen) for (const t of turns) if (t.guard === 'open') delete t.guard;
  // Committed turns, and open ones allowed to go; an open turn that must stay is ranked but never counted.
  const mayGo = (t: TurnView) => !t.open || t.guard === undefined;
  const ranked = [...turns].sort(newestFirst);
  let newer = 0;
  for (const t of ranked) {
    t.rank = newer;
    if (!mayGo(t)) continue;
    newer++;
    if (criteria.keepLast !== undefined && t.rank < criteria.keepLast) t.guard ??= 'keep-last';
  }

  const take: TurnView[] = [];
  const held: TurnView[] = [];
  if (criteria.keepLast === undefined && criteria.cutoff === undefined) return { take, held };
  for (const t of ranked) {
    const reasons: PruneReason[] = [];
    if (criteria.keepLast !== undefined) {
      if (t.rank < criteria.keepLast) continue;
      reasons.push('keep-last');
    }
    if (criteria.cutoff !== undefined) {
      if (t.time >= criteria.cutoff) continue;
      reasons.push('older-than');
    }
    if (t.guard === undefined) {
      t.reasons = reasons;
      take.push(t);
    } else if (t.guard !== 'keep-last') held.push(t);
  }
  return { take, held };
}

/** Bytes of the blobs that would stay: referenced by a turn that stays, or too recent for GC. */
class Projection {
  readonly #refs = new Map<string, Map<string, number>>();
  readonly #sessions: Map<string, SessionPlan>;
  readonly #startedMs: number;
  readonly #graceMs: number;
  bytes = 0;

  constructor(sessions: SessionPlan[], taken: Set<TurnView>, startedMs: number, graceMs: number) {
    this.#sessions = new Map(sessions.map((s) => [s.sessionId, s]));
    this.#startedMs = startedMs;
    this.#graceMs = graceMs;
    for (const session of sessions) {
      const refs = new Map<string, number>();
      for (const t of session.turns) if (!taken.has(t)) for (const sha of t.blobs) refs.set(sha, (refs.get(sha) ?? 0) + 1);
      this.#refs.set(session.sessionId, refs);
      for (const blob of session.blobs.values()) if (this.#stays(blob, refs)) this.bytes += blob.size;
    }
  }

  #stays(blob: BlobOnDisk, refs: Map<string, number>): boolean {
    return (refs.get(blob.sha256) ?? 0) > 0 || isRecent(blob.mtimeMs, this.#startedMs, this.#graceMs);
  }

  /** Take one more turn out. */
  drop(turn: TurnView): void {
    const session = this.#sessions.get(turn.manifest.sessionId);
    const refs = this.#refs.get(turn.manifest.sessionId);
    if (!session || !refs) return;
    for (const sha of turn.blobs) {
      const count = (refs.get(sha) ?? 0) - 1;
      refs.set(sha, count);
      const blob = session.blobs.get(sha);
      if (count === 0 && blob && !this.#stays(blob, refs)) this.bytes -= blob.size;
    }
  }

  /** What GC would do, per the projection. */
  gc(): Pick<GcReport, 'blobsRemoved' | 'bytesFreed' | 'blobsKeptRecent' | 'bytesKeptRecent'> {
    const out = { blobsRemoved: 0, bytesFreed: 0, blobsKeptRecent: 0, bytesKeptRecent: 0 };
    for (const session of this.#sessions.values()) {
      const refs = this.#refs.get(session.sessionId) ?? new Map<string, number>();
      for (const blob of session.blobs.values()) {
        if ((refs.get(blob.sha256) ?? 0) > 0) continue;
        if (isRecent(blob.mtimeMs, this.#startedMs, this.#graceMs)) {
          out.blobsKeptRecent++;
          out.bytesKeptRecent += blob.size;
        } else {
          out.blobsRemoved++;
          out.bytesFreed += blob.size;
        }
      }
    }
    return out;
  }
}

// ---------------------------------------------------------------------------------------
// Pruning

/** Prune turns by the criteria, then collect each session's garbage. See the top of this file. */
export async function pruneBackups(options: PruneOptions): Promise<PruneReport> {
  const home = path.resolve(options.home);
  const log = (options.logger ?? silentLogger()).child({ phase: 'prune' });
  const now = (options.now ?? (() => new Date()))();
  // The grace period compares mtimes, which the system clock sets: never the injected one.
  const startedMs = Date.now();
  const graceMs = options.graceMs ?? GC_GRACE_MS;
  const dryRun = options.dryRun ?? false;
  const criteria: Criteria = {
    keepLast: options.keepLast,
    cutoff: options.olderThan === undefined ? undefined : cutoffOf(options.olderThan, now).getTime(),
    maxSizeBytes: options.maxSizeBytes,
    includeNewest: options.includeNewest ?? false,
    includeOpen: options.includeOpen ?? false,
  };
  for (const [name, value] of [['keepLast', criteria.keepLast], ['maxSizeBytes', criteria.maxSizeBytes]] as const) {
    if (value !== undefined && !(Number.isSafeInteger(value) && value >= 0)) {
      throw new BrokerError(ErrorCodes.INVALID_OPTIONS, `${name} must be a whole number, 0 or more`);
    }
  }
  if (criteria.cutoff !== undefined && !Number.isFinite(criteria.cutoff)) throw new BrokerError(ErrorCodes.INVALID_OPTIONS, 'invalid olderThan');

  const sessionIds = await selectSessions(home, options.sessionId);

  // Locked before reading, so the plan is not made stale by another prune; a dry run changes nothing, not even a lock.
  const locks: SessionLock[] = [];
  try {
    if (!dryRun) for (const id of sessionIds) locks.push(await acquireSessionLock(sessionLayout(home, id), id));

    const sessions: SessionPlan[] = [];
    for (const id of sessionIds) sessions.push(await readSession(home, id, startedMs, graceMs, log));

    const taken = new Set<TurnView>();
    const held = new Set<TurnView>();
    for (const session of sessions) {
      const ruled = applyRules(session, criteria);
      for (const t of ruled.take) taken.add(t);
      for (const t of ruled.held) held.add(t);
    }
    let projection = new Projection(sessions, taken, startedMs, graceMs);
    const storedBefore = sessions.reduce((sum, s) => sum + [...s.blobs.values()].reduce((n, b) => n + b.size, 0), 0);

    let budget: PruneReport['budget'] = null;
    if (criteria.maxSizeBytes !== undefined) {
      const candidates = sessions
        .flatMap((s) => s.turns)
        .filter((t) => t.guard === undefined && !taken.has(t))
        .sort(oldestFirst);
      // Oldest first until it fits. Bytes only go down, and a turn may free nothing on its own
      // (its blobs shared with a later one, or too recent for GC): when the budget cannot be
      // met, stop after the last turn that still freed something, not at the end of the list.
      let take = 0;
      let fits = projection.bytes <= criteria.maxSizeBytes;
      for (let i = 0; i < candidates.length && !fits; i++) {
        const before = projection.bytes;
        projection.drop(candidates[i] as TurnView);
        if (projection.bytes < before) take = i + 1;
        fits = projection.bytes <= criteria.maxSizeBytes;
      }
      for (const t of candidates.slice(0, take)) {
        t.reasons = ['max-size'];
        taken.add(t);
      }
      projection = new Projection(sessions, taken, startedMs, graceMs);
      budget = { maxBytes: criteria.maxSizeBytes, met: projection.bytes <= criteria.maxSizeBytes };
      // Over budget: say what holds the rest (what --keep-last keeps was asked for).
      if (!budget.met) for (const s of sessions) for (const t of s.turns) if (t.guard !== undefined && t.guard !== 'keep-last') held.add(t);
    }

    const order = (ts: Iterable<TurnView>) => [...ts].sort(oldestFirst);
    let pruned: TurnView[] = order(taken);
    let gc: PruneReport['gc'];
    let storedAfter: number;
    if (dryRun) {
      let temps = 0;
      for (const s of sessions) temps += (await staleTemps(s.layout, startedMs)).length;
      gc = { ...projection.gc(), tempsRemoved: temps };
      storedAfter = projection.bytes;
    } else {
      const removed = new Set<TurnView>();
      gc = { blobsRemoved: 0, bytesFreed: 0, blobsKeptRecent: 0, bytesKeptRecent: 0, tempsRemoved: 0 };
      storedAfter = 0;
      for (const session of sessions) {
        for (const t of await removeTurns(session.layout, session.turns.filter((t) => taken.has(t)))) removed.add(t);
        const report = await collectLocked({
          home,
          sessionId: session.sessionId,
          graceMs,
          ...(options.logger ? { logger: options.logger } : {}),
          ...(options.metadata ? { metadata: options.metadata } : {}),
        });
        gc.blobsRemoved += report.blobsRemoved;
        gc.bytesFreed += report.bytesFreed;
        gc.blobsKeptRecent += report.blobsKeptRecent;
        gc.bytesKeptRecent += report.bytesKeptRecent;
        gc.tempsRemoved += report.tempsRemoved;
        storedAfter += (await listBlobsOnDisk(session.layout)).reduce((n, b) => n + b.size, 0);
      }
      // A turn someone else removed meanwhile was not pruned by us.
      pruned = pruned.filter((t) => removed.has(t));
    }

    const report: PruneReport = {
      dryRun,
      sessions: sessionIds,
      criteria: {
        keepLast: criteria.keepLast ?? null,
        olderThan: criteria.cutoff === undefined ? null : new Date(criteria.cutoff).toISOString(),
        maxSizeBytes: criteria.maxSizeBytes ?? null,
        includeNewest: criteria.includeNewest,
        includeOpen: criteria.includeOpen,
      },
      pruned: pruned.map(prunedJson),
      held: order(held).map(heldJson),
      keptTurns: sessions.reduce((n, s) => n + s.turns.length, 0) - pruned.length,
      gc,
      storedBytes: { before: storedBefore, after: storedAfter },
      budget,
    };
    log.info({ prune: { dryRun, pruned: report.pruned.length, gc } }, dryRun ? 'backup prune planned' : 'backups pruned');
    return report;
  } finally {
    for (const lock of locks.reverse()) await lock.release();
  }
}

function prunedJson(t: TurnView): PrunedTurn {
  const m = t.manifest;
  return {
    sessionId: m.sessionId,
    turnId: m.id,
    kind: m.kind,
    open: t.open,
    startedAt: m.startedAt,
    committedAt: m.committedAt,
    message: m.message,
    files: m.files.length,
    reasons: t.reasons,
  };
}

function heldJson(t: TurnView): HeldTurn {
  const why = t.guard === 'newest' || t.guard === 'open' ? t.guard : 'open-active';
  const flag = why === 'newest' ? '--include-newest' : why === 'open' ? '--include-open' : null;
  return { sessionId: t.manifest.sessionId, turnId: t.manifest.id, why, flag };
}

/**
 * Remove turns from one store (see the top of this file for the order and why); returns
 * those that were there to remove.
 */
async function removeTurns(layout: StoreLayout, turns: TurnView[]): Promise<TurnView[]> {
  if (turns.length === 0) return [];
  const { pruned } = maintenancePaths(layout);
  await mkdirPrivate(pruned);
  const removed: TurnView[] = [];
  const moved: string[] = [];
  const move = async (name: string): Promise<boolean> => {
    const to = path.join(pruned, name);
    try {
      await fs.rename(path.join(layout.turns, name), to);
    } catch (error) {
      if (errorCode(error) === 'ENOENT') return false;
      throw error;
    }
    moved.push(to);
    return true;
  };
  for (const t of turns) {
    const id = t.manifest.id;
    if (!t.open) {
      // Superseded by the manifest; left behind, it would bring the turn back as an open one.
      await unlinkIfAny(path.join(layout.turns, journalFileName(id)));
      if (await move(manifestFileName(id))) removed.push(t);
      continue;
    }
    let gone = await move(journalFileName(id));
    // An old-style open manifest, but never one a commit has written meanwhile.
    if (await isOpenManifest(path.join(layout.turns, manifestFileName(id)))) gone = (await move(manifestFileName(id))) || gone;
    if (gone) removed.push(t);
  }
  // Durable before GC removes any blob: a manifest must never come back without its blobs.
  await fsyncDir(layout.turns);
  await fsyncDir(pruned);
  for (const file of moved) await fs.rm(file, { force: true });
  return removed;
}

async function unlinkIfAny(file: string): Promise<void> {
  try {
    await fs.unlink(file);
  } catch (error) {
    if (errorCode(error) !== 'ENOENT') throw error;
  }
}

async function isOpenManifest(file: string): Promise<boolean> {
  try {
    const parsed = turnManifestSchema.safeParse(JSON.parse(await fs.readFile(file, 'utf8')));
    return parsed.success && parsed.data.committedAt === null;
  } catch {
    return false;
  }
}
