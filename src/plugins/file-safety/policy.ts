import { realpathSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { errnoOf, type Access } from '../../core/index.js';
import { buildProtections, type Protection } from './mandatory.js';
import { invalidOptions, parseFileSafetyOptions, ruleAccess, type FileSafetyRule, type ParsedFileSafetyOptions } from './options.js';
import { GitConfigWatch } from './git-config-watch.js';
import { compilePattern, realOfDeepestExisting, unique, type PathMatcher } from './patterns.js';

export interface CompiledRule {
  readonly index: number;
  readonly pattern: string;
  readonly access: ReadonlySet<Access>;
  readonly decision: FileSafetyRule['decision'];
  readonly reason: string | undefined;
  readonly matches: PathMatcher;
}

export interface WritableRoot {
  /** As configured, lexically normalised: a path named through it is "inside" too. */
  readonly given: string;
  /** Its real path: what resolved paths are compared with. */
  readonly real: string;
}

/**
 * Options turned into what evaluation needs: real paths, compiled patterns. Immutable,
 * but for what the git config of the roots' repositories names (`gitConfig`), which the
 * plugin reads again at each turn.
 */
export interface FileSafetyPolicy {
  readonly roots: readonly WritableRoot[];
  readonly rules: readonly CompiledRule[];
  readonly protections: readonly Protection[];
  /** Home as given and as its real path. */
  readonly homes: readonly string[];
  readonly outsideRoots: ParsedFileSafetyOptions['outsideRoots'];
  readonly gitConfig: GitConfigWatch;
  /** The broker's own files, every form of each (the deny protection's anchors): a lease claims them (lease.ts). */
  readonly protectedPaths: readonly string[];
}

/**
 * Validate and compile options. Touches the file system once, here: roots are resolved
 * to real paths (a root that does not exist is an error) so evaluation stays pure.
 */
export function compileFileSafety(input: unknown): FileSafetyPolicy {
  const options = parseFileSafetyOptions(input);
  const problems: string[] = [];
  const roots = options.writableRoots.flatMap((root, index) => {
    try {
      return [{ given: normal(root), real: realpathSync(root) }];
    } catch (error) {
      problems.push(`writableRoots.${index}: ${root} cannot be resolved (${errnoOf(error) ?? String(error)})`);
      return [];
    }
  });
  const home = normal(options.home ?? os.homedir());
  const homes = unique([home, realOrSelf(home)]);
  const rules = options.rules.map((rule, index): CompiledRule | undefined => {
    try {
      return {
        index,
        pattern: rule.pattern,
        access: new Set<Access>(ruleAccess(rule)),
        decision: rule.decision,
        reason: rule.reason,
        matches: compilePattern(rule.pattern, homes),
      };
    } catch (error) {
      const why = error instanceof Error ? error.message : String(error);
      problems.push(`rules.${index}.pattern: ${rule.pattern} is not a valid pattern (${why})`);
      return undefined;
    }
  });
  if (problems.length > 0) throw invalidOptions(problems);
  const protectedPaths = unique(options.protectedPaths.flatMap((entry) => [normal(entry), realOfDeepestExisting(normal(entry))]));
  const gitConfig = new GitConfigWatch(roots.map((root) => root.real), homes);
  return Object.freeze({
    roots: Object.freeze(roots),
    rules: Object.freeze(rules.filter((rule): rule is CompiledRule => rule !== undefined)),
    protections: Object.freeze(buildProtections({ homes, protectedPaths, gitConfig: gitConfig.protection() })),
    homes: Object.freeze(homes),
    outsideRoots: options.outsideRoots,
    gitConfig,
    protectedPaths: Object.freeze(protectedPaths),
  });
}

function normal(p: string): string {
  const value = path.posix.normalize(p);
  return value.length > 1 && value.endsWith('/') ? value.slice(0, -1) : value;
}

function realOrSelf(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    return p;
  }
}
