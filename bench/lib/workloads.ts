import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { formatNumber } from './table.js';
import type { RunPlacement } from './spread-dirs.js';
import { initGitRepo, textOf, writeTree } from './trees.js';

/** A target a runner's result is judged against: its median ÷ native's, or its median − native's in ms. */
export interface Target {
  kind: 'ratio' | 'extra-ms';
  max: number;
}

export interface Workload {
  id: string;
  label: string;
  /** What every runner runs with `bash -c` (srt: inside its own shell). */
  command: string;
  /** `cli`: through each runner's whole command-line tool (startup only); `library` otherwise. */
  via: 'library' | 'cli';
  /** Writes many files, seconds per brokered run: fewer runs, one shared warm-up, `sync` before each run. */
  heavy: boolean;
  runs: number;
  warmup: number;
  target?: Target;
  /** Untimed, before each run of each runner: the run's working directory. */
  prepare(tag: string): string;
  /** Untimed, after a successful exit: throws when the command did not do its work. Removes nothing (see spread-dirs.ts). */
  check?(cwd: string): void;
  /** Every runner must print the same number of bytes (the read cases). */
  sameStdout?: boolean;
  /** Changes existing files, so brokered runs back them up: the durable floor (`floor-backup`) differs from the floor only here. */
  backsUp?: boolean;
}

export interface WorkloadSizes {
  readFiles: number;
  sedFiles: number;
  createFiles: number;
  gitFiles: number;
  tarFiles: number;
  runs: number;
  heavyRuns: number;
  startupRuns: number;
  cliRuns: number;
  warmup: number;
}

export const WORKLOAD_IDS = ['startup-lib', 'startup-cli', 'grep', 'cat', 'sed', 'create', 'git', 'tar'] as const;

const NEEDLE = 'zqxjneedle';
/** Files per package of the create workload (see createScript). */
const FILES_PER_PACKAGE = 40;

/**
 * An npm-install-like tree: `node_modules/pkgN/` with package.json, README.md, lib/ (18),
 * lib/util/ (10) and dist/ (10) files of one short line each, written by bash builtins
 * (one `mkdir -p` per package).
 */
function createScript(packages: number): string {
  return [
    `for p in $(seq 1 ${packages}); do d=node_modules/pkg$p; mkdir -p $d/lib/util $d/dist`,
    `printf '{"name":"pkg%s","version":"1.0.0"}\\n' $p > $d/package.json; echo "# pkg$p" > $d/README.md`,
    'for f in $(seq 1 18); do echo "module.exports = $f;" > $d/lib/f$f.js; done',
    'for f in $(seq 1 10); do echo "exports.u$f = $f;" > $d/lib/util/u$f.js; echo "export default $f;" > $d/dist/d$f.mjs; done',
    'done',
  ].join('; ');
}

function countFiles(dir: string): number {
  return readdirSync(dir, { recursive: true, withFileTypes: true }).filter((entry) => entry.isFile()).length;
}

/**
 * The workloads in run order; trees live in `ws` (every runner's writable root). Each run
 * gets a directory of its own, placed by `placement`, and what a run wrote stays until the
 * whole bench ends: removing it would slow the next run's file creations (spread-dirs.ts).
 */
export function defineWorkloads(ws: string, sizes: WorkloadSizes, env: NodeJS.ProcessEnv, placement: RunPlacement, log: (line: string) => void): Workload[] {
  const light = { runs: sizes.runs, warmup: sizes.warmup, heavy: false };
  const heavy = { runs: sizes.heavyRuns, warmup: sizes.warmup, heavy: true };
  const fresh = (group: string, tag: string) => placement.runDir(path.join(ws, group), tag);
  const once = <T>(make: () => T) => {
    let made: { value: T } | undefined;
    return () => (made ??= { value: make() }).value;
  };
  const startupDir = once(() => fresh('startup', 'cwd'));
  const readTree = once(() => {
    log(`  writing ${formatNumber(sizes.readFiles)} files for the read workloads`);
    const dir = fresh('read', 'tree');
    writeTree(dir, { files: sizes.readFiles, perDir: 100, bytes: 1024, needleEvery: 100, needle: NEEDLE });
    return dir;
  });
  // tar: the archive holds version B of a tree; each run extracts it over a fresh version A.
  const tarArchive = once(() => {
    const src = fresh('tar', 'source');
    writeTree(src, { files: sizes.tarFiles, perDir: 100, bytes: 1024, tag: 'archive' });
    const archive = path.join(ws, 'tar', 'tree.tar');
    execFileSync('tar', ['-cf', archive, '-C', src, '.']);
    return { archive, expected: readFileSync(path.join(src, 'd000', 'f00000.txt'), 'utf8') };
  });
  // git: one tree for every run, a fresh repository over it each time (writing and removing
  // 5,000 files per run took longer than the runs themselves on a slow disk), kept in a
  // directory of its own so no run writes objects where another removed a repository.
  const gitTree = once(() => {
    const dir = fresh('git', 'tree');
    writeTree(dir, { files: sizes.gitFiles, perDir: 100, bytes: 1024, tag: 'git' });
    return dir;
  });
  const packages = Math.max(1, Math.round(sizes.createFiles / FILES_PER_PACKAGE));
  const createFiles = packages * FILES_PER_PACKAGE;

  return [
    {
      id: 'startup-lib',
      label: 'startup: `true`, library level',
      command: 'true',
      via: 'library',
      heavy: false,
      runs: sizes.startupRuns,
      warmup: Math.max(sizes.warmup, 2),
      target: { kind: 'extra-ms', max: 25 },
      prepare: startupDir,
    },
    {
      id: 'startup-cli',
      label: 'startup: `true`, whole CLI',
      command: 'true',
      via: 'cli',
      heavy: false,
      runs: sizes.cliRuns,
      warmup: 1,
      target: { kind: 'extra-ms', max: 25 },
      prepare: startupDir,
    },
    {
      id: 'grep',
      label: `grep -r over ${formatNumber(sizes.readFiles)} files`,
      command: `grep -r ${NEEDLE} .`,
      via: 'library',
      ...light,
      target: { kind: 'ratio', max: 1.05 },
      prepare: readTree,
      sameStdout: true,
    },
    {
      id: 'cat',
      label: `find -type f | xargs cat, ${formatNumber(sizes.readFiles)} files`,
      command: 'find . -type f | xargs cat | wc -c',
      via: 'library',
      ...light,
      target: { kind: 'ratio', max: 1.05 },
      prepare: readTree,
      sameStdout: true,
    },
    {
      id: 'sed',
      label: `sed -i over ${formatNumber(sizes.sedFiles)} existing files`,
      command: 'sed -i s/a/b/ *.txt',
      via: 'library',
      ...heavy,
      backsUp: true,
      target: { kind: 'ratio', max: 2.5 },
      // Contents unique to the run: a backup never finds its blob already stored.
      prepare: (tag) => {
        const dir = fresh('sed', tag);
        writeTree(dir, { files: sizes.sedFiles, perDir: 0, bytes: 1024, tag: `sed-${tag}` });
        return dir;
      },
      check: (cwd) => {
        const original = textOf(1024, 1, `run sed-${path.basename(cwd)} file 0`);
        const expected = original
          .split('\n')
          .map((line) => line.replace('a', 'b'))
          .join('\n');
        if (readFileSync(path.join(cwd, 'f00000.txt'), 'utf8') !== expected) throw new Error('sed did not change f00000.txt as expected');
      },
    },
    {
      id: 'create',
      label: `create ${formatNumber(createFiles)} files, node_modules-like (${formatNumber(packages)} packages)`,
      command: createScript(packages),
      via: 'library',
      ...heavy,
      target: { kind: 'ratio', max: 2 },
      prepare: (tag) => fresh('create', tag),
      check: (cwd) => {
        const count = countFiles(cwd);
        if (count !== createFiles) throw new Error(`expected ${createFiles} files, found ${count}`);
      },
    },
    {
      id: 'git',
      label: `git add -A && git commit, ${formatNumber(sizes.gitFiles)}-file repo`,
      command: 'git add -A && git commit -q -m bench',
      via: 'library',
      ...heavy,
      target: { kind: 'ratio', max: 1.5 },
      prepare: (tag) => {
        const dir = gitTree();
        initGitRepo(dir, env, fresh('git-dirs', tag));
        return dir;
      },
      check: (cwd) => {
        const listed = execFileSync('git', ['ls-files', '-z'], { cwd, env, encoding: 'utf8', maxBuffer: 64 << 20 }).split('\0').filter(Boolean).length;
        if (listed !== sizes.gitFiles) throw new Error(`git committed ${listed} files, expected ${sizes.gitFiles}`);
      },
    },
    {
      id: 'tar',
      label: `tar -xf over an existing ${formatNumber(sizes.tarFiles)}-file tree`,
      command: `tar -xf ../tree.tar`,
      via: 'library',
      ...heavy,
      backsUp: true,
      prepare: (tag) => {
        tarArchive();
        const dir = fresh('tar', `x-${tag}`);
        writeTree(dir, { files: sizes.tarFiles, perDir: 100, bytes: 1024, tag: `tar-${tag}` });
        return dir;
      },
      check: (cwd) => {
        if (readFileSync(path.join(cwd, 'd000', 'f00000.txt'), 'utf8') !== tarArchive().expected) throw new Error('tar did not replace d000/f00000.txt');
      },
    },
  ];
}
