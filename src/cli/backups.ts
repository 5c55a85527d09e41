import { resolve } from 'node:path';
import { keptFileCount, validateSessionId, type BackupHome, type DirectoryEntry, type RestoreReport, type RewindReport, type TurnManifest } from '../backup/index.js';
import type { DamagedTurn } from '../backup/manifest-io.js';
import { firstLine } from '../core/printable.js';
import { noticeFor, stoppedOperationsAround } from '../plugins/git-plan-notice/index.js';
import { octal } from '../agent/render-diff.js';
import { diffTurnEntries, type DiffStyle } from '../agent/turn-diff.js';
import { openBackupHome, restoreTurnFiles } from '../agent/turn-history.js';
import { turnJson } from '../agent/turn-json.js';
import { ExitCode } from './exit-codes.js';
import { nameDamagedTurns, printJson, printable, table, type Io } from './output.js';

/** The store every `backups` command (and the `backups ui` page) reads and restores from. */
export function home(env: NodeJS.ProcessEnv): BackupHome {
  return openBackupHome(env.BROKERED_SHELL_HOME || undefined);
}


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
  const connections = manifest.connections ?? [];
  if (connections.length > 0) {
    // Where the turn's commands connected or tried to, each target once with how many times.
    const where = (c: (typeof connections)[number]) => {
      const address = c.address.includes(':') ? `[${c.address}]` : c.address;
      return c.kind === 'dns' ? `${c.host ?? ''} (via ${address})` : `${c.host ? `${c.host} ` : ''}${c.host ? `(${address})` : address}:${c.port ?? ''}`;
    };
    const rows = connections.map((c) => [c.verdict, c.kind === 'dns' ? 'dns' : c.protocol, printable(where(c)), String(c.count), printable(c.reason)]);
    io.out(table([['NETWORK', 'PROTO', 'WHERE', 'COUNT', 'WHY'], ...rows]));
  }
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
 * created (from /dev/null) and, in a line each, the special files it recorded
 * (src/agent/turn-diff.ts). A PATH named is always answered.
 */
export async function diffCommand(io: Io, ref: string, path: string | undefined, options: DiffStyle, env = process.env): Promise<number> {
  const { store, manifest } = await home(env).findTurn(ref);
  const out = await diffTurnEntries(store, manifest, path, options);
  if (out.notTouched !== undefined) {
    io.err(`${printable(out.notTouched)} was not touched in turn ${manifest.id}`);
    return ExitCode.FAILURE;
  }
  if (out.files.length === 0) io.out(`turn ${manifest.id} backed up no files and left no file it created`);
  for (const file of out.files) io.out(file.diff);
  return ExitCode.OK;
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
