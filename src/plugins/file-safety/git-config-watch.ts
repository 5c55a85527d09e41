import { closeSync, constants as C, fstatSync, openSync, readdirSync, readSync, statSync } from 'node:fs';
import path from 'node:path';
import { commonDirOf, dotGitAt, gitDirOf, linkedWorkTreeOf, lstatQuietly, repositoryGitDirs } from '../git-plan-notice/index.js';
import { parseGitConfig, type ParsedGitConfig } from './git-config-parse.js';
import { readChain, referencesOf, type ConfigChain } from './git-config-references.js';
import { realOfDeepestExisting } from './patterns.js';
import { withinAnchor, type Protection } from './mandatory.js';

/*
 * Protections that follow what each repository's git config points at (its hooks
 * folder, included config files, the programs its commands name: git-config-references.ts),
 * for every repository in the writable roots (their own, submodules, linked worktrees,
 * nested ones) and any repository a written path lies in. Read at each turn's start, and
 * again once an allowed change touches a config file or a git directory's layout: from
 * then on each request first looks whether a config file read changed, so a config
 * approved and written mid-turn protects what it names from the next request on. A
 * config that cannot be read makes its repository's every file ask.
 */

/** Folders looked at per turn for nested repositories (≈ 15 µs each); past that, a written path's own repository is still found. */
const MAX_WALKED_DIRECTORIES = 10_000;
/** Folders listed before other work gets a turn. */
const WALK_SLICE = 256;
/** Repositories followed; one more has its files asked about whole. */
const MAX_REPOSITORIES = 512;
/** A config file larger than this is not read, and counts as unreadable. */
const MAX_CONFIG_BYTES = 1024 * 1024;
/** Folders remembered as in (or in no) repository between looks; the memory is dropped past it. */
const MAX_REMEMBERED_FOLDERS = 50_000;
/**
 * Besides the config files read and the folders above them, names whose change moves
 * where git finds a repository or its config: a `.git`, a `commondir`, a worktree's
 * `gitdir`. A commit (objects, refs, the index) touches none, so it costs no looks.
 */
const LAYOUT_NAMES: ReadonlySet<string> = new Set(['.git', 'commondir', 'gitdir']);
const SYSTEM_CONFIG = '/etc/gitconfig';

interface Place {
  readonly gitDir: string;
  readonly workTree: string;
}

interface Repository {
  readonly gitDir: string;
  readonly workTrees: Set<string>;
}

export class GitConfigWatch {
  readonly #homes: readonly string[];
  readonly #roots: readonly string[];
  readonly #repositories = new Map<string, Repository>();
  /** Folder → the repository it is in (its git dir, its work tree), or null: looked up once. */
  readonly #enclosing = new Map<string, Place | null>();
  #built = false;
  /** Every config file read or looked for → its identity then, to tell a change. */
  #identities = new Map<string, string>();
  /** Path → why it is protected; `#ancestors` are the folders above each. */
  #anchors = new Map<string, string>();
  #ancestors = new Set<string>();
  /** Set once a change touched config or layout this turn: each request then looks for changes. */
  #watching = false;

  constructor(roots: readonly string[], homes: readonly string[]) {
    this.#roots = roots;
    this.#homes = homes;
  }

  /** At a turn's start: find the repositories of the roots again and read their config. */
  async refresh(): Promise<void> {
    this.#repositories.clear();
    this.#enclosing.clear();
    this.#watching = false;
    for (const root of this.#roots) {
      const own = gitDirOf(root);
      if (own !== undefined) this.#addFamily(own, path.basename(own) === '.git' ? path.dirname(own) : undefined);
    }
    await this.#walk();
    this.#rebuild();
  }

  /** Whether a change of `changed` may change what the config names: it is config, or a git directory's layout. */
  mayChange(changed: string): boolean {
    return LAYOUT_NAMES.has(path.posix.basename(changed)) || this.#identities.has(changed) || this.#ancestors.has(changed);
  }

  /** After an allowed change: if it touched config or a git directory's layout, look again from the next request on. */
  noteChange(changed: string): void {
    if (this.#watching) return;
    if (this.mayChange(changed)) {
      this.#watching = true;
      this.#enclosing.clear();
    }
  }

  /** Before a request is judged: when watching, read again what changed. */
  checkChanges(): void {
    if (!this.#watching) return;
    if ([...this.#identities].some(([file, identity]) => identityOf(file) !== identity)) this.#rebuild();
  }

  /** The protection over what the config names. */
  protection(): Protection {
    const lookup = (form: string): string | undefined => {
      if (!form.startsWith('/')) return undefined;
      if (!this.#built) this.#rebuild();
      this.#meet(form);
      return withinAnchor(form, this.#anchors);
    };
    return {
      id: 'git-config-references',
      verdict: 'prompt',
      reason: 'a file git config names',
      covers: (form) => lookup(form) !== undefined,
      holds: (form) => this.#ancestors.has(form),
      samples: () => [...this.#anchors.keys()],
      reasonFor: (form) => lookup(form),
    };
  }

  /** A written path's own repository, when it is not followed yet: followed from now on. */
  #meet(form: string): void {
    const dir = form.slice(0, Math.max(1, form.lastIndexOf('/')));
    const known = this.#enclosing.get(dir);
    if (known === null || (known !== undefined && this.#repositories.has(known.gitDir))) return;
    const found = this.#repositoryAround(dir);
    if (found === undefined || this.#repositories.has(found.gitDir)) return;
    this.#addFamily(found.gitDir, found.workTree);
    this.#rebuild();
  }

  #repositoryAround(dir: string): Place | undefined {
    const seen: string[] = [];
    let found: Place | null = null;
    for (let at = dir; ; at = path.posix.dirname(at)) {
      const known = this.#enclosing.get(at);
      if (known !== undefined) {
        found = known;
        break;
      }
      seen.push(at);
      const gitDir = dotGitAt(at);
      if (gitDir !== 'none') {
        // A `.git` file that names nothing readable: git finds no repository there either.
        found = gitDir === undefined ? null : { gitDir, workTree: at };
        break;
      }
      if (at === '/') break;
    }
    if (this.#enclosing.size > MAX_REMEMBERED_FOLDERS) this.#enclosing.clear();
    for (const at of seen) this.#enclosing.set(at, found);
    return found ?? undefined;
  }

  #addFamily(gitDir: string, workTree: string | undefined): void {
    for (const dir of repositoryGitDirs(gitDir)) {
      const repository = this.#repositories.get(dir) ?? { gitDir: dir, workTrees: new Set<string>() };
      const linked = linkedWorkTreeOf(dir);
      if (linked !== undefined) repository.workTrees.add(linked);
      if (path.basename(dir) === '.git') repository.workTrees.add(path.dirname(dir));
      this.#repositories.set(dir, repository);
    }
    if (workTree !== undefined) this.#repositories.get(gitDir)?.workTrees.add(workTree);
  }

  /**
   * Nested repositories in the roots: folders holding a `.git`, and git directories (a
   * `HEAD` with `objects` or `commondir`). Folders are listed synchronously, which is
   * several times quicker than a listing per promise, in slices between which other
   * work (a socket client) gets its turn.
   */
  async #walk(): Promise<void> {
    const pending = [...this.#roots];
    for (let looked = 0; pending.length > 0 && looked < MAX_WALKED_DIRECTORIES; looked += 1) {
      if (looked % WALK_SLICE === WALK_SLICE - 1) await new Promise((resolve) => setImmediate(resolve));
      const dir = pending.pop() as string;
      let entries;
      try {
        entries = readdirSync(dir, { withFileTypes: true });
      } catch {
        continue;
      }
      if (entries.some((entry) => entry.name === 'HEAD') && entries.some((entry) => entry.name === 'objects' || entry.name === 'commondir')) {
        this.#addFamily(dir, undefined);
        continue;
      }
      if (entries.some((entry) => entry.name === '.git')) {
        const gitDir = dotGitAt(dir);
        if (gitDir !== undefined && gitDir !== 'none') this.#addFamily(gitDir, dir);
      }
      for (const entry of entries) if (entry.isDirectory() && entry.name !== '.git') pending.push(path.posix.join(dir, entry.name));
    }
  }

  /** Read every followed repository's config again (each file once, shared ones too) and protect what it names. */
  #rebuild(): void {
    const cache = new Map<string, ParsedGitConfig | 'missing'>();
    const identities = new Map<string, string>();
    const read = (file: string) => {
      identities.set(file, identityOf(file));
      let parsed = cache.get(file);
      if (parsed === undefined) cache.set(file, (parsed = readConfig(file)));
      return parsed;
    };
    const globals: ConfigChain = { files: new Map(), read: [], unreadable: [] };
    for (const file of [SYSTEM_CONFIG, ...this.#homes.flatMap((home) => [path.posix.join(home, '.gitconfig'), path.posix.join(home, '.config/git/config')])]) {
      readChain(file, "git's system or global configuration", read, this.#homes, globals);
    }
    const anchors = new Map<string, string>();
    const add = (target: string, why: string) => {
      if (!anchors.has(target)) anchors.set(target, why);
    };
    for (const [file, why] of globals.files) add(file, why);
    const unknown = (what: string, why: string) => `${what}: what git runs in this repository is not known, so each of its files needs approval (${why})`;
    [...this.#repositories.values()].forEach((repository, index) => {
      const { gitDir, workTrees } = repository;
      if (index >= MAX_REPOSITORIES) {
        for (const place of [gitDir, ...workTrees]) add(place, unknown(`one repository more than the ${MAX_REPOSITORIES} followed`, gitDir));
        return;
      }
      const chain: ConfigChain = { files: new Map(), read: [], unreadable: [] };
      readChain(path.posix.join(commonDirOf(gitDir), 'config'), 'git configuration', read, this.#homes, chain);
      readChain(path.posix.join(gitDir, 'config.worktree'), 'git configuration', read, this.#homes, chain);
      for (const [file, why] of chain.files) add(file, why);
      for (const [target, why] of referencesOf([...globals.read, ...chain.read], gitDir, [...workTrees], this.#homes)) add(target, why);
      const broken = [...globals.unreadable, ...chain.unreadable][0];
      if (broken) for (const place of [gitDir, ...workTrees]) add(place, unknown(`${broken.file} could not be read`, broken.why));
    });
    if (this.#repositories.size === 0 && globals.unreadable[0]) {
      const broken = globals.unreadable[0];
      for (const root of this.#roots) add(root, unknown(`${broken.file} could not be read`, broken.why));
    }
    // Each under the name given and the name the disk resolves it to, so a link on the way cannot hide it.
    const both = new Map<string, string>();
    for (const [target, why] of anchors) for (const form of new Set([target, realOfDeepestExisting(target)])) if (!both.has(form)) both.set(form, why);
    const ancestors = new Set<string>();
    for (const target of both.keys()) for (let at = path.posix.dirname(target); !ancestors.has(at); at = path.posix.dirname(at)) {
      ancestors.add(at);
      if (at === '/') break;
    }
    this.#anchors = both;
    this.#ancestors = ancestors;
    this.#identities = identities;
    this.#built = true;
  }
}

/** Enough of a file to tell it changed: its link and what it leads to (git follows a symlinked config). */
function identityOf(file: string): string {
  const link = lstatQuietly(file);
  if (!link) return 'absent';
  let target = 'unreadable';
  try {
    const stats = statSync(file, { bigint: true });
    target = `${stats.dev}:${stats.ino}:${stats.size}:${stats.mtimeNs}:${stats.ctimeNs}`;
  } catch {
    // A dangling link: as changed as it gets when it starts leading somewhere.
  }
  return `${link.ino}:${link.mtimeNs}:${link.ctimeNs}|${target}`;
}

/** A config file's entries; `missing` when there is none; an error for anything not a small regular file git would read. */
function readConfig(file: string): ParsedGitConfig | 'missing' {
  let fd: number;
  try {
    // Opening a FIFO must not hang the broker: it is refused below, as anything but a regular file.
    fd = openSync(file, C.O_RDONLY | C.O_NONBLOCK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code === 'ENOENT' || code === 'ENOTDIR' ? 'missing' : { error: `it cannot be read (${code ?? String(error)})` };
  }
  try {
    const stats = fstatSync(fd);
    if (!stats.isFile()) return { error: 'it is not a regular file' };
    if (stats.size > MAX_CONFIG_BYTES) return { error: `it is larger than ${MAX_CONFIG_BYTES} bytes` };
    const buffer = Buffer.alloc(stats.size);
    let filled = 0;
    for (let got = -1; got !== 0 && filled < buffer.length; filled += got) got = readSync(fd, buffer, filled, buffer.length - filled, filled);
    return parseGitConfig(buffer.subarray(0, filled));
  } catch (error) {
    return { error: `it cannot be read (${(error as NodeJS.ErrnoException).code ?? String(error)})` };
  } finally {
    closeSync(fd);
  }
}
