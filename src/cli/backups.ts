import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { BackupHome, type BackupEntry, type TurnManifest } from '../backup/index.js';
import { ExitCode } from './exit-codes.js';
import { nativeMetadataOps } from '../native/metadata-ops.js';
import { printJson, table, type Io } from './output.js';
import { renderDiff } from './render-diff.js';

function home(env: NodeJS.ProcessEnv): BackupHome {
  return new BackupHome({ metadata: nativeMetadataOps(), ...(env.BROKERED_SHELL_HOME ? { home: env.BROKERED_SHELL_HOME } : {}) });
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
    files: manifest.files.map(fileJson),
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
  const turns = await home(env).listTurns(options.session ? { sessionId: options.session } : {});
  if (options.json) {
    printJson(io, { turns: turns.map(turnJson) });
    return ExitCode.OK;
  }
  if (turns.length === 0) {
    io.out('no backups yet');
    return ExitCode.OK;
  }
  const rows = turns.map((t) => [t.id, t.sessionId, t.committedAt ?? 'open', String(t.files.length), t.kind === 'restore' ? `[restore] ${t.message ?? ''}` : (t.message ?? '')]);
  io.out(table([['TURN', 'SESSION', 'COMMITTED', 'FILES', 'MESSAGE'], ...rows]));
  return ExitCode.OK;
}

export async function showCommand(io: Io, ref: string, options: { json?: boolean }, env = process.env): Promise<number> {
  const { manifest } = await home(env).findTurn(ref);
  if (options.json) {
    printJson(io, turnJson(manifest));
    return ExitCode.OK;
  }
  io.out(`turn ${manifest.id} (session ${manifest.sessionId})`);
  io.out(`message:   ${manifest.message ?? '(not committed)'}`);
  io.out(`started:   ${manifest.startedAt}`);
  io.out(`committed: ${manifest.committedAt ?? 'no'}`);
  if (manifest.files.length === 0) {
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
  io.out(table([['OPERATION', 'SIZE', 'MODE', 'SHA256', 'PATH'], ...rows]));
  return ExitCode.OK;
}

export async function diffCommand(io: Io, ref: string, path: string | undefined, options: { color?: boolean }, env = process.env): Promise<number> {
  const { store, manifest } = await home(env).findTurn(ref);
  const wanted = path ? resolve(path) : undefined;
  const entries = manifest.files.filter((f) => !wanted || f.path === wanted);
  if (wanted && entries.length === 0) {
    io.err(`${wanted} was not touched in turn ${manifest.id}`);
    return ExitCode.FAILURE;
  }
  for (const entry of entries) {
    const before = entry.kind === 'file' && entry.sha256 ? await store.readBlob(entry.sha256) : Buffer.from(entry.linkTarget ?? '');
    const now = await currentBytes(entry);
    io.out(renderDiff(entry.path, before, now, { color: options.color ?? false }));
  }
  return ExitCode.OK;
}

async function currentBytes(entry: BackupEntry): Promise<Buffer | undefined> {
  try {
    return await readFile(entry.path);
  } catch {
    return undefined;
  }
}

export async function restoreCommand(
  io: Io,
  ref: string,
  paths: string[],
  options: { dryRun?: boolean; force?: boolean; json?: boolean },
  env = process.env,
): Promise<number> {
  const { store, manifest } = await home(env).findTurn(ref);
  const report = await store.restore(manifest, {
    ...(paths.length > 0 ? { paths: paths.map((p) => resolve(p)) } : {}),
    dryRun: options.dryRun ?? false,
    force: options.force ?? false,
  });
  if (options.json) printJson(io, report);
  else {
    const verb = report.dryRun ? 'would restore' : 'restored';
    for (const item of report.restored) io.out(`${verb} ${item.path}${item.forced ? ' (forced)' : ''}`);
    for (const item of report.skipped) io.out(`skipped ${item.path}: ${item.detail}`);
    for (const item of report.conflicts) io.err(`conflict ${item.path}: ${item.detail} (${item.reason}; --force to restore anyway)`);
    for (const item of report.failed) io.err(`failed ${item.path}: ${item.message} [${item.code}]`);
    for (const path of report.notInTurn) io.err(`not in turn ${manifest.id}: ${path}`);
    if (report.rescueTurnId) io.out(`what was replaced is kept in turn ${report.rescueTurnId} (restore it to undo)`);
  }
  if (report.failed.length > 0 || report.notInTurn.length > 0) return ExitCode.FAILURE;
  return report.conflicts.length > 0 ? ExitCode.CONFLICTS : ExitCode.OK;
}
