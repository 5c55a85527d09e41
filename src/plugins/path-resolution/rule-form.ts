import { statSync } from 'node:fs';

export interface RuleFormOptions {
  /** The home directory that becomes `~`. */
  home: string;
  /** Whether a path is a directory now (default: `stat`); only asked about sed temp names. */
  isDirectory?: (p: string) => boolean;
}

/** BSD `sed -i` writes `.!<pid>!<name>` next to `<name>` and renames it over. */
const SED_TEMP = /^\.!\d+!(.+)$/;

/**
 * The form file-safety rules are matched against: backslashes become `/` (but trailing
 * ones), a BSD sed temp name becomes the name it stands for, and the home directory
 * becomes `~` (at a component boundary only: `/root2` is not under `/root`).
 * Idempotent; pure but for a `stat` when the name is a sed temp name.
 * `..` is deliberately not collapsed: a rewrite must never move a path into another
 * directory whose rules it would then borrow.
 */
export function normaliseForRuleMatch(p: string, options: RuleFormOptions): string {
  // A name never ends in a separator: `/ws/a\\` stays a file beside `/ws/a`, not `/ws/a/`.
  const body = p.replace(/\\+$/, '');
  let form = body.replace(/\\/g, '/') + p.slice(body.length);
  const home = options.home.replace(/\\/g, '/');
  form = undoSedTempName(form, home, options.isDirectory ?? isDirectoryNow);
  return abbreviateHome(form, home);
}

/**
 * Never to `.` or `..` (another directory), nor to a directory: sed edits files only,
 * and `/w/.!1!ws` must not borrow the rules of the root `/w/ws` it sits beside.
 */
function undoSedTempName(p: string, home: string, isDirectory: (p: string) => boolean): string {
  const cut = p.lastIndexOf('/');
  const dir = p.slice(0, cut + 1);
  let name = p.slice(cut + 1);
  // Repeat so the result is a fixed point (`.!1!.!2!x` → `x`): idempotence.
  for (let match = SED_TEMP.exec(name); match; match = SED_TEMP.exec(name)) {
    const undone = match[1] as string;
    if (undone === '.' || undone === '..') break;
    // A form already abbreviated (`~/…`) is checked where it points, so a second pass agrees.
    const where = expandHome(dir + undone, home);
    if (where.startsWith('/') && isDirectory(where)) break;
    name = undone;
  }
  return dir + name;
}

function isDirectoryNow(p: string): boolean {
  try {
    return statSync(p, { throwIfNoEntry: false })?.isDirectory() ?? false;
  } catch {
    // Unreadable: treat as a file name, as before.
    return false;
  }
}

function abbreviateHome(p: string, home: string): string {
  const base = home.length > 1 ? home.replace(/\/+$/, '') : home;
  // `/` as home would turn every path into `~…`, and an empty or relative one means nothing.
  if (!base.startsWith('/') || base === '/') return p;
  if (p === base) return '~';
  if (p.startsWith(`${base}/`)) return `~${p.slice(base.length)}`;
  return p;
}

/** The inverse of the home abbreviation, for comparing a rule form with absolute paths. */
export function expandHome(p: string, home: string): string {
  if (p === '~') return home;
  if (p.startsWith('~/')) return `${home.replace(/\/+$/, '')}${p.slice(1)}`;
  return p;
}
