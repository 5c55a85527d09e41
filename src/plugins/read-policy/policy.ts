import os from 'node:os';
import path from 'node:path';
import { compileGlob, type CompiledGlob } from '../file-safety/glob.js';
import { compilePattern, isWithin, unique, type PathMatcher } from '../file-safety/patterns.js';
import { expandHome } from '../cache-roots/roots.js';
import { realOfDeepestExisting } from '../../requests/deepest-real.js';
import { readPolicyOptionsSchema, type ReadPolicyOptions, type SecretsSettings } from './options.js';
import { SECRET_DEFAULTS, SECRET_DEFAULT_NAMES } from './secrets.js';
import { parseOptions } from '../options.js';
import { ruleAccess, type FileSafetyRule } from '../file-safety/options.js';
import type { Access } from '../../core/index.js';

/** Why a path may not be read, for the denial, `run`'s hint and `config show`. */
export interface ReadDenial {
  /** What denies it: `the default secret ssh (~/.ssh)`, `fileSafety.rules[2] (.env)`. */
  readonly by: string;
  /** The decision's source: `read-policy:secrets.ssh`, `read-policy:rules[2]`. */
  readonly source: string;
  /** What would allow it, in the configuration's words (`<home>` is the brokered-shell home). */
  readonly remedy: string;
}

/** One file or folder of the secret list, with what inside it stays readable. */
export interface SecretEntry {
  /** Absolute, `~` expanded. */
  readonly path: string;
  /** Its real path (of the deepest existing folder, plus the rest). */
  readonly real: string;
  /** The default it comes from, `add`, or `store` (the broker's own, always there). */
  readonly from: string;
  /** Names directly inside it that stay readable (ssh's `known_hosts`, …). */
  readonly keepNames: readonly CompiledGlob[];
  /** Paths inside it that `secrets.remove` leaves readable (each form). */
  readonly keepPaths: readonly string[];
  readonly denial: ReadDenial;
}

/** A file-safety rule that denies reading. */
export interface ReadRule {
  readonly index: number;
  readonly pattern: string;
  /** Every access the rule denies (read among them). */
  readonly access: ReadonlySet<Access>;
  readonly matches: PathMatcher;
  readonly denial: ReadDenial;
}

/** What a session may not read, fixed when it starts. Lookups do no I/O. */
export interface ReadPolicy {
  readonly entries: readonly SecretEntry[];
  readonly rules: readonly ReadRule[];
  /** Home as given and as its real path. */
  readonly homes: readonly string[];
  /** Where relative rules are looked for when a command starts. */
  readonly roots: readonly string[];
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Why the first of `forms` (the names a target goes by) that may not be read is denied, or undefined. */
  denialOf(forms: readonly string[]): ReadDenial | undefined;
  /** The same, with the rule that denies it when it is a rule. */
  denialWithRule(forms: readonly string[]): { denial: ReadDenial; rule?: ReadRule } | undefined;
}

const REMOVE_HINT = (what: string) => `secrets.remove: [${JSON.stringify(what)}] in <home>/config.json would allow it`;

/** A rule that takes reading away: `deny`, for `read` or for every access. */
export const deniesRead = (rule: FileSafetyRule) => rule.decision === 'deny' && ruleAccess(rule).includes('read');

export function compileReadPolicy(input: ReadPolicyOptions): ReadPolicy {
  const options = parseOptions('read-policy', readPolicyOptionsSchema, input);
  const home = options.home ?? os.homedir();
  const env = options.env ?? process.env;
  const homes = unique([home, realOfDeepestExisting(home)]);
  const entries = secretEntries(options.secrets, home, env, options.store);
  const rules = options.rules.flatMap((rule, index): ReadRule[] =>
    deniesRead(rule)
      ? [
          {
            index,
            pattern: rule.pattern,
            access: new Set(ruleAccess(rule)),
            matches: compilePattern(rule.pattern, homes),
            denial: {
              by: `fileSafety.rules[${index}] (${rule.pattern})`,
              source: `read-policy:rules[${index}]`,
              remedy: 'taking read out of the rule\'s access would allow it',
            },
          },
        ]
      : [],
  );
  // Looked through by real path, each once: a root inside another is walked with it.
  const reals = unique(options.roots.map((root) => realOfDeepestExisting(path.posix.normalize(root))));
  const roots = reals.filter((root) => !reals.some((other) => other !== root && isWithin(root, other)));
  return Object.freeze({
    entries: Object.freeze(entries),
    rules: Object.freeze(rules),
    homes: Object.freeze(homes),
    roots: Object.freeze(roots),
    env,
    denialOf(forms: readonly string[]): ReadDenial | undefined {
      return this.denialWithRule(forms)?.denial;
    },
    denialWithRule(forms: readonly string[]): { denial: ReadDenial; rule?: ReadRule } | undefined {
      for (const form of forms) {
        const entry = entries.find((candidate) => entryDenies(candidate, form));
        if (entry) return { denial: entry.denial };
      }
      const rule = rules.find((candidate) => forms.some((form) => candidate.matches(form)));
      return rule && { denial: rule.denial, rule };
    },
  });
}

/** Whether `p` is the entry or inside it, and not among what it keeps readable. */
export function entryDenies(entry: SecretEntry, p: string): boolean {
  const base = [entry.real, entry.path].find((form) => isWithin(p, form));
  if (base === undefined) return false;
  if (entry.keepPaths.some((kept) => isWithin(p, kept))) return false;
  if (p.length === base.length || entry.keepNames.length === 0) return true;
  const first = p.slice(base === '/' ? 1 : base.length + 1).split('/', 1)[0] ?? '';
  return !entry.keepNames.some((glob) => glob.matches(first));
}

/**
 * The defaults (unless `defaults: false`) less those removed, plus the added paths, plus
 * the store. A removed path drops the defaults at or beneath it and, inside one, stays
 * readable; the store and what `add` names are never dropped.
 */
function secretEntries(settings: SecretsSettings, home: string, env: Readonly<Record<string, string | undefined>>, store: string): SecretEntry[] {
  const removedNames = new Set(settings.remove.filter((entry) => SECRET_DEFAULT_NAMES.includes(entry)));
  const removed = settings.remove
    .filter((entry) => !SECRET_DEFAULT_NAMES.includes(entry))
    .flatMap((entry) => {
      const p = expandHome(entry, home);
      return unique([p, realOfDeepestExisting(p)]);
    });
  const entries: SecretEntry[] = [];
  const seen = new Set<string>();
  const add = (p: string, from: string, denial: ReadDenial, keep: readonly string[] = [], removable = true) => {
    const real = realOfDeepestExisting(p);
    if (seen.has(real) || (removable && removed.some((entry) => isWithin(p, entry) || isWithin(real, entry)))) return;
    seen.add(real);
    const keepPaths = removable ? removed.filter((entry) => isWithin(entry, p) || isWithin(entry, real)) : [];
    entries.push({ path: p, real, from, keepNames: keep.map(compileGlob), keepPaths, denial });
  };
  const storePath = path.posix.normalize(store);
  add(storePath, 'store', { by: `the brokered-shell store (${storePath})`, source: 'read-policy:store', remedy: 'nothing allows it: it holds the backups of what commands changed' }, [], false);
  for (const entry of settings.add) {
    const p = expandHome(entry, home);
    add(p, 'add', { by: `secrets.add (${entry})`, source: 'read-policy:secrets.add', remedy: `taking ${entry} out of secrets.add would allow it` }, [], false);
  }
  if (settings.defaults) {
    for (const secret of SECRET_DEFAULTS) {
      if (removedNames.has(secret.name)) continue;
      for (const location of secret.locate(env, home)) {
        const shown = isWithin(location.path, home) && home !== '/' ? `~${location.path.slice(home.length)}` : location.path;
        add(location.path, secret.name, { by: `the default secret ${secret.name} (${shown}: ${secret.what})`, source: `read-policy:secrets.${secret.name}`, remedy: REMOVE_HINT(secret.name) }, location.keep);
      }
    }
  }
  return entries;
}
