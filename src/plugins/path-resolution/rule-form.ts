export interface RuleFormOptions {
  /** The home directory that becomes `~`. */
  home: string;
}

/** BSD `sed -i` writes `.!<pid>!<name>` next to `<name>` and renames it over. */
const SED_TEMP = /^\.!\d+!(.+)$/;

/**
 * The form file-safety rules are matched against: backslashes become `/`, a BSD sed
 * temp name becomes the name it stands for, and the home directory becomes `~` (at a
 * component boundary only: `/root2` is not under `/root`). Pure and idempotent.
 * `..` is deliberately not collapsed: a rewrite must never move a path into another
 * directory whose rules it would then borrow.
 */
export function normaliseForRuleMatch(p: string, options: RuleFormOptions): string {
  let form = p.replace(/\\/g, '/');
  form = undoSedTempName(form);
  return abbreviateHome(form, options.home.replace(/\\/g, '/'));
}

function undoSedTempName(p: string): string {
  const cut = p.lastIndexOf('/');
  let name = p.slice(cut + 1);
  // Repeat so the result is a fixed point (`.!1!.!2!x` → `x`): idempotence.
  for (let match = SED_TEMP.exec(name); match; match = SED_TEMP.exec(name)) {
    name = match[1] as string;
  }
  return p.slice(0, cut + 1) + name;
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
