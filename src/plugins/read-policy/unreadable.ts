import { lstat, readdir, realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import { BrokerError, ErrorCodes } from '../../core/index.js';
import { globsFor, isWithin } from '../file-safety/patterns.js';
import { literalBase } from '../file-safety/glob.js';
import { mountAliases } from './mount-aliases.js';
import { entryDenies, type ReadDenial, type ReadPolicy, type ReadRule, type SecretEntry } from './policy.js';

/**
 * What the kernel is told, when a command starts, it may not read: the policy's entries
 * and rules turned into the real paths that exist now. Landlock judges the file a read
 * reaches, so each is a real path (a symlink a rule names stands for its target), and a
 * second mount of the same files elsewhere is denied there too.
 */
export interface UnreadablePath {
  /** Real and absolute. */
  readonly path: string;
  readonly denial: ReadDenial;
  /** The same file under another mount point: the path it was found as. */
  readonly aliasOf?: string;
  /** A file with other hard links: how many. Those names are elsewhere, and reading through them is not refused. */
  readonly otherLinks?: number;
}

/** Most entries looked at, per command start, to match the read rules' globs against the tree. */
export const READ_WALK_LIMIT = 200_000;

export async function unreadableNow(policy: ReadPolicy, limit = READ_WALK_LIMIT): Promise<UnreadablePath[]> {
  const found = new Map<string, UnreadablePath>();
  const deny = (p: string, denial: ReadDenial) => {
    if (!found.has(p)) found.set(p, { path: p, denial });
  };
  for (const entry of policy.entries) for (const p of await entryPaths(entry)) deny(p, entry.denial);
  const budget = { left: limit };
  for (const rule of policy.rules) for (const p of await rulePaths(rule, policy, budget)) deny(p, rule.denial);
  const direct = [...found.values()];
  for (const alias of await mountAliases(direct.map((entry) => entry.path))) {
    const of = found.get(alias.of);
    if (of && !found.has(alias.path)) found.set(alias.path, { path: alias.path, denial: of.denial, aliasOf: alias.of });
  }
  return Promise.all([...found.values()].map(withLinks));
}

async function withLinks(entry: UnreadablePath): Promise<UnreadablePath> {
  const stats = await lstat(entry.path).catch(() => undefined);
  return stats?.isFile() && stats.nlink > 1 ? { ...entry, otherLinks: stats.nlink - 1 } : entry;
}

async function realOf(p: string): Promise<string | undefined> {
  return realpath(p).catch(() => undefined);
}

/**
 * An entry's real paths: the whole of it, or, where it keeps names readable, each entry
 * inside it that it does not keep (a folder holding a kept path is looked into).
 */
async function entryPaths(entry: SecretEntry): Promise<string[]> {
  const real = await realOf(entry.path);
  if (real === undefined) return [];
  const keeps = entry.keepNames.length > 0 || entry.keepPaths.length > 0;
  if (!keeps || !(await stat(real)).isDirectory()) return [real];
  const out: string[] = [];
  const visit = async (dir: string): Promise<void> => {
    for (const name of await readdir(dir).catch(() => [])) {
      const child = path.posix.join(dir, name);
      if (!entryDenies({ ...entry, path: real, real }, child)) continue;
      const holdsKept = entry.keepPaths.some((kept) => kept !== child && isWithin(kept, child));
      const directory = holdsKept && (await lstat(child).catch(() => undefined))?.isDirectory() === true;
      if (directory) await visit(child);
      else out.push((await realOf(child)) ?? child);
    }
  };
  await visit(real);
  return out;
}

/** What a read rule names now: its literal path, or what its globs match in the tree below their literal start. */
async function rulePaths(rule: ReadRule, policy: ReadPolicy, budget: { left: number }): Promise<string[]> {
  const out: string[] = [];
  for (const glob of globsFor(rule.pattern, policy.homes)) {
    const base = glob.startsWith('/') ? literalBase(glob) || '/' : undefined;
    if (base !== undefined && literalBase(glob) === unescaped(glob)) {
      const real = await realOf(base);
      if (real !== undefined) out.push(real);
      continue;
    }
    const starts = base === undefined ? policy.roots : [base];
    for (const start of starts) out.push(...(await walkMatches(start, rule, budget)));
  }
  return out;
}

const unescaped = (glob: string) => glob.replace(/\\(.)/g, '$1');

/**
 * Every path below `start` the rule matches, top down: a matched folder is taken whole
 * and not looked into; a matched symlink stands for its target; links are not followed.
 */
async function walkMatches(start: string, rule: ReadRule, budget: { left: number }): Promise<string[]> {
  const out: string[] = [];
  if (rule.matches(start)) {
    const real = await realOf(start);
    return real === undefined ? [] : [real];
  }
  const pending = [start];
  for (let dir = pending.pop(); dir !== undefined; dir = pending.pop()) {
    const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
    budget.left -= entries.length;
    if (budget.left < 0) {
      throw new BrokerError(
        ErrorCodes.INVALID_OPTIONS,
        `the read rule ${rule.denial.by} is matched against the files at each command's start, and more than ${READ_WALK_LIMIT} were looked at (below ${start}): name its paths without wildcards, or start the pattern with a folder (an absolute or ~/ pattern)`,
        { details: { rule: rule.index, start, limit: READ_WALK_LIMIT } },
      );
    }
    for (const entry of entries) {
      const child = path.posix.join(dir, entry.name);
      if (rule.matches(child)) {
        const real = await realOf(child);
        if (real !== undefined) out.push(real);
      } else if (entry.isDirectory()) pending.push(child);
    }
  }
  return out;
}
