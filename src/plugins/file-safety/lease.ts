import path from 'node:path';
import { compileAlternative, globAlternatives } from './glob.js';
import { GIT_DIR_CODE_NAMES } from './git-directories.js';
import { HOME_CODE_PATHS, WORKSPACE_CODE_PATTERNS } from './code-paths.js';
import { GLOBAL_GIT_CONFIG, SHELL_STARTUP_FILES } from './mandatory.js';
import { globsFor, unique } from './patterns.js';
import type { FileSafetyPolicy } from './policy.js';
import type { Lease } from '../lease/schema.js';

/**
 * What the file-safety policy adds to a lease: the writable roots (writes there are left
 * to the sandbox), and everything it would deny or ask about, as data the supervisor can
 * test, a little wider where that is simpler (lease/schema.ts: a path the lease does not
 * allow makes the round trip and is judged here as usual):
 *
 * - the anchors of the protections (shell startup files, home code, git's global config,
 *   what the repositories' git config names, the broker's own files), and the folders
 *   above them, which hold them;
 * - any component named as a git directory's code (`config`, `hooks`, …: wherever it is,
 *   not only in a git directory) or a project file tools obey (`.vscode`, `.claude`, …),
 *   and a last component `.git`, `HEAD`, `gitdir` (a git directory's layout);
 * - the globs of the home code that has them, of `*.code-workspace`, and of every rule that
 *   denies or asks, for the accesses it names.
 */
export function fileSafetyLease(policy: FileSafetyPolicy, lease: Lease): void {
  lease.roots.push(...policy.roots.map((root) => root.real));
  const underHome = (names: readonly string[]) => policy.homes.flatMap((home) => names.map((name) => path.posix.join(home, name)));
  const homeNames = Object.keys(HOME_CODE_PATHS);
  const anchors = unique([
    ...underHome(SHELL_STARTUP_FILES),
    ...underHome(GLOBAL_GIT_CONFIG),
    ...underHome(homeNames.filter((name) => !name.includes('*'))),
    ...policy.gitConfig.protection().samples([]),
    ...policy.protectedPaths,
  ]);
  lease.anchors.push(...anchors);
  lease.holds.push(...unique(anchors.flatMap(foldersAbove)));
  const plainProjectNames = Object.keys(WORKSPACE_CODE_PATTERNS).filter((pattern) => /^[\w.-]+$/.test(pattern));
  lease.names.push(...GIT_DIR_CODE_NAMES, ...plainProjectNames);
  lease.finalNames.push('.git', 'HEAD', 'gitdir', 'commondir');
  const globbed = [
    ...homeNames.filter((name) => name.includes('*')).map((name) => `~/${name}`),
    ...Object.keys(WORKSPACE_CODE_PATTERNS).filter((pattern) => !/^[\w.-]+$/.test(pattern)),
  ];
  for (const pattern of globbed) lease.globs.push({ write: true, delete: true, programs: programsOf(pattern, policy.homes) });
  for (const rule of policy.rules) {
    if (rule.decision !== 'deny' && rule.decision !== 'prompt') continue;
    if (!rule.access.has('write') && !rule.access.has('delete')) continue;
    lease.globs.push({ write: rule.access.has('write'), delete: rule.access.has('delete'), programs: programsOf(rule.pattern, policy.homes) });
  }
}

/** A pattern as the programs glob.ts runs for it (each alternative of each glob it stands for). */
export function programsOf(pattern: string, homes: readonly string[]) {
  return globsFor(pattern, homes).flatMap((glob) =>
    globAlternatives(glob).map((components) => {
      const program = compileAlternative(components);
      return { ops: [...program.ops], a: [...program.a], b: [...program.b], classes: program.classes.map((c) => ({ negated: c.negated, ranges: [...c.ranges] })), needs: [...program.needs] };
    }),
  );
}

/** The folders strictly above an absolute path, `/` included. */
export function foldersAbove(p: string): string[] {
  const out: string[] = [];
  for (let dir = path.posix.dirname(p); ; dir = path.posix.dirname(dir)) {
    out.push(dir);
    if (dir === '/') return out;
  }
}
