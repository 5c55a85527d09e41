import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** Deterministic words for generated files (no randomness between runs or machines). */
const WORDS = [
  'alpha', 'branch', 'commit', 'delta', 'export', 'function', 'gamma', 'handler', 'import', 'kernel',
  'lambda', 'module', 'number', 'object', 'promise', 'query', 'return', 'string', 'typeof', 'undefined',
  'value', 'while', 'yield', 'const', 'let', 'class', 'interface', 'async', 'await', 'buffer',
];

/** A small linear congruential generator: cheap and reproducible. */
function lcg(seed: number): () => number {
  let state = seed >>> 0 || 1;
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state;
  };
}

/** Text of about `bytes` bytes in lines of a few words, like a small source file. */
export function textOf(bytes: number, seed: number, extraLine = ''): string {
  const next = lcg(seed);
  const lines: string[] = [];
  let size = 0;
  if (extraLine) {
    lines.push(extraLine);
    size += extraLine.length + 1;
  }
  while (size < bytes) {
    const words = 3 + (next() % 6);
    const line = Array.from({ length: words }, () => WORDS[next() % WORDS.length] as string).join(' ');
    lines.push(line);
    size += line.length + 1;
  }
  return `${lines.join('\n')}\n`;
}

export interface TreeSpec {
  /** Files in total. */
  files: number;
  /** Files per directory (directories are `d000/`, `d001/`, …); 0: all in `root`. */
  perDir: number;
  /** Approximate size of each file. */
  bytes: number;
  /** Every `needleEvery`-th file gets a line holding `needle` (0: none). */
  needleEvery?: number;
  needle?: string;
  /** Mixed into every file's contents so that different runs have different blobs. */
  tag?: string;
}

/** Write a tree of small text files under `root`; returns the relative paths. */
export function writeTree(root: string, spec: TreeSpec): string[] {
  mkdirSync(root, { recursive: true });
  const files: string[] = [];
  let dir = '';
  for (let i = 0; i < spec.files; i += 1) {
    if (spec.perDir > 0 && i % spec.perDir === 0) {
      dir = `d${String(Math.floor(i / spec.perDir)).padStart(3, '0')}`;
      mkdirSync(path.join(root, dir), { recursive: true });
    }
    const name = path.join(dir, `f${String(i).padStart(5, '0')}.txt`);
    const needle = spec.needleEvery && spec.needle && i % spec.needleEvery === 0 ? `found ${spec.needle} here` : '';
    const tagLine = spec.tag ? `run ${spec.tag} file ${i}` : '';
    writeFileSync(path.join(root, name), textOf(spec.bytes, i + 1, [tagLine, needle].filter(Boolean).join(' ')));
    files.push(name);
  }
  return files;
}

/** The environment for git in the benchmark: no user or system config, fixed identity, no auto gc. */
export function gitEnv(base: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return {
    ...base,
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_AUTHOR_NAME: 'bench',
    GIT_AUTHOR_EMAIL: 'bench@example.invalid',
    GIT_COMMITTER_NAME: 'bench',
    GIT_COMMITTER_EMAIL: 'bench@example.invalid',
    GIT_AUTHOR_DATE: '2020-01-01T00:00:00Z',
    GIT_COMMITTER_DATE: '2020-01-01T00:00:00Z',
  };
}

/** A fresh repository over a generated tree, nothing added yet (done natively, untimed). */
export function writeGitRepo(root: string, spec: TreeSpec, env: NodeJS.ProcessEnv): void {
  writeTree(root, spec);
  initGitRepo(root, env);
}

/**
 * Make `root` a fresh repository again, nothing added: any `.git` there before is removed, the
 * files stay. With `gitDir` (an empty directory) the repository lives there and `root/.git`
 * only points to it.
 */
export function initGitRepo(root: string, env: NodeJS.ProcessEnv, gitDir?: string): void {
  rmSync(path.join(root, '.git'), { recursive: true, force: true });
  const git = (...args: string[]) => execFileSync('git', args, { cwd: root, env, stdio: ['ignore', 'ignore', 'pipe'] });
  git('init', '-q', ...(gitDir === undefined ? [] : ['--separate-git-dir', gitDir]));
  git('config', 'gc.auto', '0');
  git('config', 'maintenance.auto', 'false');
}
