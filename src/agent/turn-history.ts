import { resolve } from 'node:path';
import { BackupHome, type FoundTurn } from '../backup/backup-home.js';
import { compareTimes } from '../backup/manifest-io.js';
import type { TurnManifest } from '../backup/manifest-schema.js';
import type { MetadataOps } from '../backup/metadata-ops.js';
import type { RestoreReport, RewindReport } from '../backup/restore.js';
import { BrokerError, ErrorCodes } from '../core/errors.js';
import { firstLine, printable } from '../core/printable.js';
import { native } from '../native/loader.js';
import { nativeMetadataOps } from '../native/metadata-ops.js';
import { diffTurnEntries, type TurnDiff } from './turn-diff.js';

/** The addon's metadata operations plus xattr removal, which a rewind needs to put a directory's xattrs back. */
function restoreMetadataOps(): MetadataOps {
  const ops = nativeMetadataOps();
  if (!ops.xattrs) return ops;
  return { ...ops, xattrs: { ...ops.xattrs, remove: (path, name) => native().removeXattr(path, name) } };
}

/** The store under `home` (default: `$BROKERED_SHELL_HOME`, else `~/.brokered-shell`), able to restore every kind of path it records. */
export function openBackupHome(home?: string): BackupHome {
  return new BackupHome({ metadata: restoreMetadataOps(), ...(home === undefined ? {} : { home }) });
}

/** How a restore goes: only some paths (and what lies under them), only a look, or over later changes too. */
export interface TurnRestoreOptions {
  /** Only these paths (relative ones from the current directory) and what lies under them; default: every path the turn touched. */
  paths?: readonly string[];
  /** Change nothing; the report says what would happen. */
  dryRun?: boolean;
  /** Also restore paths that changed since the turn (or whose turn was never committed). */
  force?: boolean;
}

export interface RestoreOutcome {
  manifest: TurnManifest;
  report: RestoreReport;
  /** Some named paths are not in the turn, so nothing was changed; `report` is the dry-run check. */
  refused: boolean;
}

/**
 * A found turn's files, or only `paths`, back to their state before the turn. Named paths
 * are all checked first, so a mistyped one changes nothing.
 */
export async function restoreFound(found: FoundTurn, options: TurnRestoreOptions = {}): Promise<RestoreOutcome> {
  const { store, manifest } = found;
  const paths = options.paths ?? [];
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

/**
 * What `backups restore` does, without the printing (the `backups ui` page calls it too):
 * `ref` looked up under the whole home, or in `sessionId` only.
 */
export async function restoreTurnFiles(backupHome: BackupHome, ref: string, paths: string[], options: { dryRun?: boolean; force?: boolean; sessionId?: string }): Promise<RestoreOutcome> {
  const found = await backupHome.findTurn(ref, options.sessionId === undefined ? {} : { sessionId: options.sessionId });
  return restoreFound(found, { paths, ...(options.dryRun === undefined ? {} : { dryRun: options.dryRun }), ...(options.force === undefined ? {} : { force: options.force }) });
}

const isNotFound = (error: unknown) => error instanceof BrokerError && error.code === ErrorCodes.TURN_NOT_FOUND && !(error.details && 'candidates' in error.details);

/**
 * The turns of some sessions of one store: a library session's own, or every session run
 * in one workspace (the MCP server). A turn is named by its id, a unique prefix of one,
 * or `latest` (the last committed), and only among these sessions.
 */
export class TurnHistory {
  readonly backupHome: BackupHome;
  readonly #sessions: () => Promise<readonly string[]>;

  constructor(backupHome: BackupHome, sessions: () => Promise<readonly string[]>) {
    this.backupHome = backupHome;
    this.#sessions = sessions;
  }

  /** Every turn of the sessions (open ones too), oldest first. */
  async list(): Promise<TurnManifest[]> {
    const known = new Set(await this.backupHome.listSessions());
    const turns: TurnManifest[] = [];
    for (const sessionId of await this.#sessions()) if (known.has(sessionId)) turns.push(...(await this.backupHome.listTurns({ sessionId })));
    return turns.sort((a, b) => compareTimes(a.startedAt, b.startedAt) || a.id.localeCompare(b.id));
  }

  /** A turn by id, unique prefix or `latest`; TURN_NOT_FOUND when none or several match. */
  async find(ref: string): Promise<FoundTurn> {
    const found = await this.#each((sessionId) => this.backupHome.findTurn(ref, { sessionId }));
    if (ref === 'latest') {
      const latest = found.sort((a, b) => compareTimes(a.manifest.committedAt ?? '', b.manifest.committedAt ?? '')).at(-1);
      if (!latest) throw new BrokerError(ErrorCodes.TURN_NOT_FOUND, 'no committed turn yet');
      return latest;
    }
    const [only, ...others] = found;
    if (!only) throw new BrokerError(ErrorCodes.TURN_NOT_FOUND, `no turn matches ${JSON.stringify(ref)}`, { details: { ref } });
    if (others.length > 0) {
      const candidates = found.map((f) => ({ id: f.manifest.id, sessionId: f.manifest.sessionId, message: f.manifest.message }));
      const listed = candidates.map((c) => `  ${c.id}  (session ${printable(c.sessionId)})${c.message === null ? '' : `  ${printable(firstLine(c.message))}`}`).join('\n');
      throw new BrokerError(ErrorCodes.TURN_NOT_FOUND, `turn reference ${JSON.stringify(ref)} is ambiguous; it matches:\n${listed}`, { details: { ref, candidates } });
    }
    return only;
  }

  /** What the turn changed, against what is on disk now (`path`: that file only). */
  async diff(ref: string, options: { path?: string } = {}): Promise<TurnDiff> {
    const { store, manifest } = await this.find(ref);
    const out = await diffTurnEntries(store, manifest, options.path);
    if (out.notTouched !== undefined) throw new BrokerError(ErrorCodes.TURN_NOT_FOUND, `${out.notTouched} was not touched in turn ${manifest.id}`, { details: { path: out.notTouched } });
    return { turnId: manifest.id, sessionId: manifest.sessionId, files: out.files.map((file) => ({ path: file.path, diff: String(file.diff) })) };
  }

  /** The turn's files back as they were before it; what is replaced is kept in a rescue turn (`report.rescueTurnId`). */
  async restore(ref: string, options: TurnRestoreOptions = {}): Promise<RestoreReport> {
    return (await restoreFound(await this.find(ref), options)).report;
  }

  /** The turn and every later turn of its session undone, newest first, in one rescue turn. */
  async rewind(ref: string, options: TurnRestoreOptions = {}): Promise<RewindReport> {
    const { manifest } = await this.find(ref);
    const { store, turns } = await this.backupHome.rewindPlan(manifest.id, { sessionId: manifest.sessionId });
    const paths = options.paths ?? [];
    return store.rewind(turns, { dryRun: options.dryRun ?? false, force: options.force ?? false, ...(paths.length > 0 ? { paths: paths.map((p) => resolve(p)) } : {}) });
  }

  /** The last restore undone (its rescue turn restored); doing it again redoes the restore. */
  async undoLast(options: TurnRestoreOptions = {}): Promise<RestoreReport> {
    const restores = await this.#each((sessionId) => this.backupHome.lastRestore({ sessionId }));
    const last = restores.sort((a, b) => compareTimes(a.manifest.committedAt ?? '', b.manifest.committedAt ?? '')).at(-1);
    if (!last) throw new BrokerError(ErrorCodes.TURN_NOT_FOUND, 'no restore to undo');
    return (await restoreFound(last, options)).report;
  }

  /** What `lookup` finds in each session that has a store; a session where it finds nothing is left out. */
  async #each(lookup: (sessionId: string) => Promise<FoundTurn>): Promise<FoundTurn[]> {
    const known = new Set(await this.backupHome.listSessions());
    const found: FoundTurn[] = [];
    for (const sessionId of await this.#sessions()) {
      if (!known.has(sessionId)) continue;
      try {
        found.push(await lookup(sessionId));
      } catch (error) {
        if (!isNotFound(error)) throw error;
      }
    }
    return found;
  }
}
