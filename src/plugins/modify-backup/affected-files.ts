import { promises as fs } from 'node:fs';
import { dirname, join } from 'node:path';
import { BrokerError, ErrorCodes, type Operation, type ResolvedRequest } from '../../core/index.js';

/**
 * What a request is about to change, as the backup store records it before the change
 * (rewinding the turn undoes each):
 *
 * - `content`: existing files and symlinks it overwrites, truncates, renames or deletes,
 *   and symlinks whose metadata it changes — backed up with their content; and FIFOs,
 *   sockets and device nodes it renames, deletes or changes the metadata of — their type
 *   and metadata, so a rewind makes them again (writing into one changes no name: nothing);
 * - `metadata`: regular files whose mode, owner, times or xattrs alone it changes — their
 *   metadata, not their bytes (a later change to the bytes in the turn keeps those too);
 * - `directories`: existing directories it deletes, renames away or changes (chmod,
 *   chown, touch, xattrs) — their mode, owner, times and xattrs (fdatasync'd);
 * - `created`: paths that do not exist and are about to — `absent` entries, so a rewind
 *   removes them (no blob, no fdatasync of their own);
 * - `parents`: directories a name is about to be added to or removed from, whose times
 *   move — recorded like `directories` but without their own fdatasync.
 *
 * A directory renamed whole is one record (`renames`): a rewind renames it back, and
 * its names are listed, not copied. A directory deleted whole (a recursive host delete)
 * or copied is walked: its files are backed up and its directories recorded, and each
 * path it will occupy at the destination is recorded as created, so a rewind can rebuild
 * the source and empty the destination without guessing.
 */
export interface RecordPlan {
  content: string[];
  /** Regular files whose mode, owner, times or xattrs alone change: their metadata is kept, not their bytes. */
  metadata: string[];
  /** Directories renamed whole (to an absent name or over an empty directory), kept as they are in one record each. */
  renames: Array<{ from: string; to: string; tree: string[] }>;
  directories: string[];
  created: string[];
  parents: string[];
  /** Paths left out of the record because an `exempt` tap named them (parents not included), with the name. */
  exempted: Array<{ path: string; by: string }>;
  /**
   * The regular file of `content` that the change itself removes or replaces (an unlink's
   * path, the `to` of a rename over a file), with its role: a performer that can move it
   * into the store keeps it whole instead of having it copied.
   */
  victim?: { role: 'path' | 'to'; path: string };
}

/**
 * The name of what keeps a path, and everything beneath it, out of the record; undefined
 * when it is recorded as usual. Asked for every path of every modifying request: no I/O.
 */
export type ExemptFrom = (path: string) => string | undefined;

/** Operations that change only a file's mode, owner, times or xattrs, never its bytes. */
const METADATA_ONLY: ReadonlySet<Operation> = new Set<Operation>(['chmod', 'chown', 'touch', 'xattr']);

/** Operations that change an existing directory's or special file's own metadata (or remove it). */
const NODE_CHANGES: ReadonlySet<Operation> = new Set<Operation>(['delete', 'rename', 'chmod', 'chown', 'touch', 'xattr']);

export async function recordPlan(resolved: ResolvedRequest, exempt?: ExemptFrom): Promise<RecordPlan> {
  const { request, targets } = resolved;
  const plan: RecordPlan = { content: [], metadata: [], renames: [], directories: [], created: [], parents: [], exempted: [] };
  const record = recorder(plan, exempt);
  const outside = (p: string) => exempt?.(p) !== undefined;
  const from = targets.find((t) => t.role === 'from');
  const to = targets.find((t) => t.role === 'to');
  for (const target of targets) {
    if (target.access === 'read') continue;
    const file = target.resolved;
    const by = exempt?.(file);
    if (by !== undefined) {
      // Named with everything beneath it, and the name it adds or removes in its folder with it: nothing to walk or record.
      plan.exempted.push({ path: file, by });
      continue;
    }
    if (target.kind === 'file' && METADATA_ONLY.has(request.operation)) record.metadata(file);
    else if (target.kind === 'file' || target.kind === 'symlink') record.content(file);
    else if (target.kind === 'other') {
      if (NODE_CHANGES.has(request.operation) || target.access === 'delete') record.content(file);
    } else if (target.kind === 'absent' && target.access === 'write') record.created(file);
    else if (target.kind === 'directory') {
      if (NODE_CHANGES.has(request.operation)) record.directories(file);
      // An O_TMPFILE open, a mkdir that will fail with EEXIST, a copy into it: names may appear in it.
      else record.parents(file);
      if (request.operation === 'delete' && request.options.recursive) await walkInto(file, record);
    }
    // Names are added or removed in the parent: a new path, a deletion, either end of a rename.
    if (target.kind === 'absent' || target.access === 'delete' || request.operation === 'rename') record.parents(dirname(file));
  }
  const victim = victimOf(request, targets);
  if (victim && plan.content.includes(victim.path)) plan.victim = victim;
  if (request.operation === 'rename' && from?.kind === 'directory' && to && to.kind !== 'file' && to.kind !== 'symlink' && !(outside(from.resolved) && outside(to.resolved))) {
    // The whole tree leaves `from` and appears under `to` (which is absent, or an empty directory it replaces).
    const replaces = to.kind === 'absent' || (to.kind === 'directory' && (await isEmptyDirectory(to.resolved)));
    if (replaces && !outside(from.resolved)) {
      // Kept as it is, in one record: a rewind renames it back. Its names are listed, not copied.
      plan.renames.push({ from: from.resolved, to: to.resolved, tree: (await treeOf(from.resolved)).map((item) => (item.type === 'directory' ? `${item.path}/` : item.path)) });
    } else {
      const tree = await walkInto(from.resolved, record);
      if (replaces) for (const rel of tree) record.created(join(to.resolved, rel));
    }
  }
  if (request.operation === 'copy' && request.options.recursive && from?.kind === 'directory' && to && (to.kind === 'directory' || to.kind === 'absent') && !outside(to.resolved)) {
    // A tree copy overwrites the destination's files that share a relative path with the source, and creates the rest.
    for (const rel of await treeOf(from.resolved)) {
      const destination = join(to.resolved, rel.path);
      const kind = to.kind === 'absent' ? 'absent' : await kindOf(destination);
      if (kind === 'absent') record.created(destination);
      else if (kind === 'file') record.content(destination);
    }
  }
  return plan;
}

/** The file a plain unlink or a rename removes or replaces by its name alone (a recursive or trashing delete is the host's own walk). */
function victimOf(request: ResolvedRequest['request'], targets: ResolvedRequest['targets']): RecordPlan['victim'] {
  if (request.operation === 'delete' && !request.options.recursive && request.options.deleteMode !== 'trash') {
    const target = targets.find((t) => t.role === 'path');
    return target?.kind === 'file' && (target.links ?? 1) === 1 ? { role: 'path', path: target.resolved } : undefined;
  }
  if (request.operation === 'rename') {
    const from = targets.find((t) => t.role === 'from');
    const to = targets.find((t) => t.role === 'to');
    // Two names of one file: the rename changes nothing, so nothing is removed.
    if (!from || !to || to.kind !== 'file' || from.kind === 'directory' || (to.links ?? 1) !== 1) return undefined;
    return { role: 'to', path: to.resolved };
  }
  return undefined;
}

type Recorder = Record<'content' | 'metadata' | 'directories' | 'created' | 'parents', (path: string) => void>;

/** Adds paths to the plan's lists, leaving out (and noting) those an exempt tap names. */
function recorder(plan: RecordPlan, exempt: ExemptFrom | undefined): Recorder {
  const list = (name: keyof Recorder): ((path: string) => void) => {
    const into = plan[name];
    if (!exempt) return (path) => void into.push(path);
    return (path) => {
      const by = exempt(path);
      if (by === undefined) into.push(path);
      // A parent only has its times moved: not a change of its own to count.
      else if (name !== 'parents') plan.exempted.push({ path, by });
    };
  };
  return { content: list('content'), metadata: list('metadata'), directories: list('directories'), created: list('created'), parents: list('parents') };
}

interface TreeItem {
  /** Relative to the walked directory. */
  path: string;
  /** 'other': a FIFO, socket or device node (kept like a file: type and metadata). */
  type: 'file' | 'directory' | 'other';
}

/**
 * Every path under `dir` (not following symlinks), parents before their contents. Names
 * are read as bytes: one that is not valid UTF-8 would be decoded into another name, and
 * its file recorded (and restored) under it, so the tree is refused instead (EILSEQ),
 * as a direct change to such a name is.
 */
async function treeOf(dir: string): Promise<TreeItem[]> {
  const out: TreeItem[] = [];
  const walk = async (rel: string) => {
    for (const entry of await fs.readdir(join(dir, rel), { withFileTypes: true, encoding: 'buffer' })) {
      const name = entry.name.toString('utf8');
      if (!Buffer.from(name, 'utf8').equals(entry.name)) {
        throw new BrokerError(ErrorCodes.BACKUP_FAILED, `a name in ${join(dir, rel)} is not valid UTF-8, so its file cannot be recorded`, { errno: 'EILSEQ' });
      }
      const child = rel === '' ? name : join(rel, name);
      if (entry.isDirectory()) {
        out.push({ path: child, type: 'directory' });
        await walk(child);
      } else out.push({ path: child, type: entry.isFile() || entry.isSymbolicLink() ? 'file' : 'other' });
    }
  };
  await walk('');
  return out;
}

/** Add a tree's files (content) and directories to the plan; returns its relative paths. */
async function walkInto(dir: string, record: Recorder): Promise<string[]> {
  const tree = await treeOf(dir);
  for (const item of tree) {
    const file = join(dir, item.path);
    if (item.type === 'directory') record.directories(file);
    else record.content(file);
  }
  return tree.map((item) => item.path);
}

async function isEmptyDirectory(dir: string): Promise<boolean> {
  return (await fs.readdir(dir).catch(() => ['?'])).length === 0;
}

async function kindOf(path: string): Promise<'file' | 'absent' | 'other'> {
  try {
    const info = await fs.lstat(path);
    return info.isFile() || info.isSymbolicLink() ? 'file' : 'other';
  } catch {
    return 'absent';
  }
}
