import { statSync } from 'node:fs';
import path from 'node:path';

/**
 * The caches of the tools agents run, where each tool would write them on this machine:
 * its own environment variable first, then its documented default. Only folders a tool
 * keeps as a cache are listed, never the tool's home as a whole: `~/.cargo/bin`,
 * `~/.bun/bin` and pnpm's home are on PATH, `~/.cargo/config.toml`, Gradle's init
 * scripts and `gradle.properties` run code in every build.
 *
 * Kept out (`except`), with the reason, are the folders inside a cache that a tool runs
 * programs from by name, as they are, with no build or lockfile check in between (npx,
 * `pnpm dlx`, corepack, pre-commit), and ccache's own config, which names programs to run.
 */

export interface CacheRootLocation {
  /** Absolute. A root counts only when this exists as a directory at session start. */
  readonly base: string;
  /** The roots, relative to `base` (`.`: the base itself); they need not exist yet. */
  readonly paths: readonly string[];
  /** Inside the roots, relative to `base`, kept out of them. */
  readonly except: readonly Exception[];
}

export interface Exception {
  readonly path: string;
  readonly why: string;
}

export interface CacheRootDefault {
  /** What a configuration's `cacheRoots.remove` names it by. */
  readonly name: string;
  readonly what: string;
  /** Where the tool writes, for this environment and home (none: it would not write). */
  locate(env: Readonly<Record<string, string | undefined>>, home: string): CacheRootLocation[];
}

type Env = Readonly<Record<string, string | undefined>>;

/** An absolute directory a variable names (`~/` expanded, as npm and pip do); a relative or empty one names none. */
function dirFrom(value: string | undefined, home: string): string | undefined {
  if (value === undefined || value === '') return undefined;
  const expanded = value === '~' ? home : value.startsWith('~/') ? path.posix.join(home, value.slice(2)) : value;
  return expanded.startsWith('/') ? path.posix.normalize(expanded) : undefined;
}

/** npm-style settings from the environment: `npm_config_<key>` in any case (npm ignores it). */
function npmSetting(env: Env, key: string, prefixes: readonly string[] = ['npm_config_']): string | undefined {
  const wanted = new Set(prefixes.map((prefix) => `${prefix}${key}`.toLowerCase()));
  for (const [name, value] of Object.entries(env)) if (wanted.has(name.toLowerCase()) && value) return value;
  return undefined;
}

const xdgCache = (env: Env, home: string) => dirFrom(env.XDG_CACHE_HOME, home) ?? path.posix.join(home, '.cache');
const xdgData = (env: Env, home: string) => dirFrom(env.XDG_DATA_HOME, home) ?? path.posix.join(home, '.local/share');
const whole = (base: string | undefined, except: Exception[] = []): CacheRootLocation[] => (base ? [{ base, paths: ['.'], except }] : []);

const NPX = { path: '_npx', why: 'npx runs the packages it installed there as they are' };
const DLX = { path: 'dlx', why: 'pnpm dlx runs the packages it installed there as they are' };

export const CACHE_ROOT_DEFAULTS: readonly CacheRootDefault[] = Object.freeze([
  {
    name: 'npm',
    what: "npm's cache (packages, logs)",
    locate: (env, home) => whole(dirFrom(npmSetting(env, 'cache'), home) ?? path.posix.join(home, '.npm'), [NPX]),
  },
  {
    name: 'pnpm',
    what: "pnpm's store and metadata cache",
    locate: (env, home) => {
      const pnpmHome = dirFrom(env.PNPM_HOME, home);
      const store =
        dirFrom(npmSetting(env, 'store_dir', ['npm_config_', 'pnpm_config_']), home) ??
        (pnpmHome ? path.posix.join(pnpmHome, 'store') : path.posix.join(xdgData(env, home), 'pnpm/store'));
      const cache = dirFrom(npmSetting(env, 'cache_dir', ['npm_config_', 'pnpm_config_']), home) ?? path.posix.join(xdgCache(env, home), 'pnpm');
      return [...whole(store), ...whole(cache, [DLX])];
    },
  },
  {
    name: 'yarn',
    what: "yarn's package cache (v1 and berry's global cache)",
    locate: (env, home) => [
      ...whole(dirFrom(env.YARN_CACHE_FOLDER, home) ?? path.posix.join(xdgCache(env, home), 'yarn')),
      ...whole(path.posix.join(dirFrom(env.YARN_GLOBAL_FOLDER, home) ?? path.posix.join(home, '.yarn/berry'), 'cache')),
    ],
  },
  {
    name: 'bun',
    what: "bun's install cache",
    locate: (env, home) => {
      const install = dirFrom(env.BUN_INSTALL, home) ?? path.posix.join(home, '.bun');
      return whole(dirFrom(env.BUN_INSTALL_CACHE_DIR, home) ?? path.posix.join(install, 'install/cache'));
    },
  },
  {
    name: 'pip',
    what: "pip's cache (downloads, built wheels)",
    locate: (env, home) => whole(dirFrom(env.PIP_CACHE_DIR, home) ?? path.posix.join(xdgCache(env, home), 'pip')),
  },
  {
    name: 'uv',
    what: "uv's cache",
    locate: (env, home) => whole(dirFrom(env.UV_CACHE_DIR, home) ?? path.posix.join(xdgCache(env, home), 'uv')),
  },
  {
    name: 'cargo',
    what: "cargo's registry and git caches and its lock files (never its bin or config)",
    locate: (env, home) => {
      const base = dirFrom(env.CARGO_HOME, home) ?? path.posix.join(home, '.cargo');
      const locks = ['.package-cache', '.package-cache-mutate', '.global-cache', '.global-cache-journal', '.global-cache-wal', '.global-cache-shm'];
      return [{ base, paths: ['registry', 'git', ...locks], except: [] }];
    },
  },
  {
    name: 'rustup',
    what: "rustup's downloads and temp files (never its toolchains or settings)",
    locate: (env, home) => [{ base: dirFrom(env.RUSTUP_HOME, home) ?? path.posix.join(home, '.rustup'), paths: ['downloads', 'tmp'], except: [] }],
  },
  {
    name: 'go',
    what: "go's module cache and build cache",
    locate: (env, home) => {
      const gopath = dirFrom((env.GOPATH ?? '').split(':')[0], home) ?? path.posix.join(home, 'go');
      const modules = dirFrom(env.GOMODCACHE, home);
      const build = env.GOCACHE === 'off' ? undefined : (dirFrom(env.GOCACHE, home) ?? path.posix.join(xdgCache(env, home), 'go-build'));
      return [...(modules ? whole(modules) : [{ base: gopath, paths: ['pkg/mod'], except: [] }]), ...whole(build)];
    },
  },
  {
    name: 'gradle',
    what: "gradle's caches, daemon logs and native libraries (never its init scripts, properties or wrapper distributions)",
    locate: (env, home) => [{ base: dirFrom(env.GRADLE_USER_HOME, home) ?? path.posix.join(home, '.gradle'), paths: ['caches', 'daemon', 'native', '.tmp'], except: [] }],
  },
  {
    name: 'maven',
    what: "maven's local repository",
    locate: (env, home) => {
      const option = /(?:^|\s)-Dmaven\.repo\.local=(\S+)/.exec(env.MAVEN_OPTS ?? '')?.[1];
      return whole(dirFrom(option, home) ?? path.posix.join(home, '.m2/repository'));
    },
  },
  {
    name: 'ccache',
    what: "ccache's cache (not its config)",
    locate: (env, home) => {
      const conf = { path: 'ccache.conf', why: 'its prefix_command names programs ccache runs' };
      const given = dirFrom(env.CCACHE_DIR, home);
      if (given) return whole(given, [conf]);
      return [...whole(path.posix.join(home, '.ccache'), [conf]), ...whole(path.posix.join(xdgCache(env, home), 'ccache'), [conf])];
    },
  },
  {
    name: 'xdg-cache',
    what: 'the XDG cache folder ($XDG_CACHE_HOME, default ~/.cache)',
    locate: (env, home) =>
      whole(xdgCache(env, home), [
        { path: 'pnpm/dlx', why: DLX.why },
        { path: 'node/corepack', why: 'corepack runs the package managers it downloaded there' },
        { path: 'pre-commit', why: "pre-commit runs the hooks it installed there at each git commit" },
        { path: 'brokered-shell', why: "the command dispatcher's option tables there decide which program runs a command" },
      ]),
  },
] satisfies CacheRootDefault[]);

export const CACHE_ROOT_DEFAULT_NAMES: readonly string[] = Object.freeze(CACHE_ROOT_DEFAULTS.map((entry) => entry.name));

/** A located default root: absolute paths, the base checked to exist. */
export interface PresentDefault {
  readonly name: string;
  readonly paths: readonly string[];
  readonly except: readonly Exception[];
}

/**
 * The defaults present on this machine now: each location whose base is a directory,
 * its roots and exceptions made absolute. Looks at the disk (one stat per location).
 */
export function presentDefaults(env: Env, home: string, skip: ReadonlySet<string> = new Set()): PresentDefault[] {
  const out: PresentDefault[] = [];
  for (const entry of CACHE_ROOT_DEFAULTS) {
    if (skip.has(entry.name)) continue;
    for (const location of entry.locate(env, home)) {
      if (!isDirectory(location.base)) continue;
      const under = (rel: string) => (rel === '.' ? location.base : path.posix.join(location.base, rel));
      out.push({
        name: entry.name,
        paths: location.paths.map(under),
        except: location.except.map((exception) => ({ path: under(exception.path), why: exception.why })),
      });
    }
  }
  return out;
}

function isDirectory(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}
