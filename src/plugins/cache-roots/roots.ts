import path from 'node:path';
import { realOfDeepestExisting } from '../../requests/deepest-real.js';
import { isBeneath, isWithin } from '../file-safety/patterns.js';
import { CACHE_ROOT_DEFAULT_NAMES, presentDefaults, type PresentDefault } from './defaults.js';
import type { CacheRootsSettings } from './options.js';

/** One cache root: where writes need no question and no backup. */
export interface CacheRoot {
  /** As configured or located, `~` expanded. */
  readonly path: string;
  /** Its real path (of the deepest existing folder, plus the rest): what resolved paths are compared with. */
  readonly real: string;
  /** The default it comes from (`npm`, …), or `add`. */
  readonly from: string;
}

/** A folder inside a cache root that is not part of it. */
export interface KeptOut {
  readonly path: string;
  readonly real: string;
  readonly why: string;
}

/** The effective cache roots of a session, fixed at its start. Lookups do no I/O. */
export interface CacheRootSet {
  readonly roots: readonly CacheRoot[];
  readonly keptOut: readonly KeptOut[];
  /**
   * The root a resolved path is in, or undefined: outside every root, or in a kept-out
   * folder. The most specific entry decides: a root inside a kept-out folder lets in again.
   */
  rootOf(resolved: string): CacheRoot | undefined;
  /** The kept-out folder a path is in (inside a root), or undefined. */
  keptOutOf(resolved: string): KeptOut | undefined;
  /** The kept-out folder that lies strictly beneath the path (moving, linking or removing it moves that too), if any. */
  keptOutBeneath(resolved: string): KeptOut | undefined;
}

export interface CacheRootPlace {
  /** Whose `~` the entries mean, and where the tools' defaults are. */
  readonly home: string;
  /** The environment the commands run with: the tools' own variables. */
  readonly env: Readonly<Record<string, string | undefined>>;
}

/** `~/x` → `<home>/x`, normalised, without a trailing slash. */
export function expandHome(entry: string, home: string): string {
  const expanded = entry === '~' ? home : entry.startsWith('~/') ? path.posix.join(home, entry.slice(2)) : entry;
  const normal = path.posix.normalize(expanded);
  return normal.length > 1 ? normal.replace(/\/+$/, '') : normal;
}

const isName = (entry: string) => CACHE_ROOT_DEFAULT_NAMES.includes(entry);

/**
 * The defaults present on this machine (unless `defaults: false`) less those removed, plus
 * the added roots. A removed path drops the defaults at or beneath it and, inside a root,
 * is kept out of it; an added path is never dropped, and lets in a folder a default keeps
 * out. Where entries nest, the most specific decides. Looks at the disk here, once: which
 * defaults exist, and every real path.
 */
export function compileCacheRoots(settings: CacheRootsSettings, place: CacheRootPlace): CacheRootSet {
  const removedNames = new Set(settings.remove.filter(isName));
  const removed = settings.remove
    .filter((entry) => !isName(entry))
    .map((entry) => {
      const p = expandHome(entry, place.home);
      return { path: p, real: realOfDeepestExisting(p) };
    });
  const located: PresentDefault[] = settings.defaults ? presentDefaults(place.env, place.home, removedNames) : [];
  const added = settings.add.map((entry) => expandHome(entry, place.home));
  const addedReal = new Set(added.map(realOfDeepestExisting));

  const roots: CacheRoot[] = [];
  const keptOut: KeptOut[] = [];
  const seen = new Set<string>();
  const addRoot = (p: string, from: string) => {
    const real = realOfDeepestExisting(p);
    if (seen.has(real) || (from !== 'add' && removed.some((entry) => isWithin(real, entry.real)))) return;
    seen.add(real);
    roots.push({ path: p, real, from });
  };
  for (const entry of located) {
    for (const p of entry.paths) addRoot(p, entry.name);
    for (const exception of entry.except) {
      const real = realOfDeepestExisting(exception.path);
      if (!addedReal.has(real)) keptOut.push({ path: exception.path, real, why: exception.why });
    }
  }
  for (const p of added) addRoot(p, 'add');
  for (const entry of removed) if (!addedReal.has(entry.real)) keptOut.push({ ...entry, why: 'removed by cacheRoots.remove' });
  // A kept-out folder outside every root changes nothing; leaving it out keeps the lookups short.
  const kept = dedupe(keptOut.filter((out) => roots.some((root) => isBeneath(out.real, root.real))));
  return makeSet(Object.freeze(roots), Object.freeze(kept));
}

function makeSet(roots: readonly CacheRoot[], keptOut: readonly KeptOut[]): CacheRootSet {
  const innermostRoot = (resolved: string): CacheRoot | undefined => {
    let best: CacheRoot | undefined;
    for (const root of roots) if (isWithin(resolved, root.real) && (!best || root.real.length > best.real.length)) best = root;
    return best;
  };
  // A kept-out folder at least as deep as the root wins: a root inside it lets in again.
  const keptOutFrom = (resolved: string, root: CacheRoot) => keptOut.find((out) => out.real.length >= root.real.length && isWithin(resolved, out.real));
  return Object.freeze({
    roots,
    keptOut,
    rootOf(resolved: string): CacheRoot | undefined {
      const best = innermostRoot(resolved);
      return best && !keptOutFrom(resolved, best) ? best : undefined;
    },
    keptOutOf(resolved: string): KeptOut | undefined {
      const best = innermostRoot(resolved);
      return best && keptOutFrom(resolved, best);
    },
    keptOutBeneath(resolved: string): KeptOut | undefined {
      return keptOut.find((out) => isBeneath(out.real, resolved));
    },
  });
}

function dedupe(entries: KeptOut[]): KeptOut[] {
  const seen = new Set<string>();
  return entries.filter((entry) => !seen.has(entry.real) && (seen.add(entry.real), true));
}

