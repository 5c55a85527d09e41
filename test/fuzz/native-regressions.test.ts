import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * The native fuzz targets (native/fuzz/) as plain tests: each harness is built with gcc,
 * ASan and UBSan against the sources of native/sandbox it names in targets.txt, linked
 * with standalone-main.c instead of libFuzzer, and replays its seed corpus and every
 * input that once crashed (regressions/). No clang needed; the fuzzing itself is
 * bench/fuzz/run.sh.
 */
const repo = fileURLToPath(new URL('../..', import.meta.url));
const fuzzDir = path.join(repo, 'native', 'fuzz');
const sandboxDir = path.join(repo, 'native', 'sandbox');
const out = mkdtempSync(path.join(os.tmpdir(), 'bsh-fuzz-replay-'));
afterAll(() => rmSync(out, { recursive: true, force: true }));

interface Target {
  name: string;
  sources: string[];
}

function readTargets(): Target[] {
  const lines = readFileSync(path.join(fuzzDir, 'targets.txt'), 'utf8').split('\n');
  return lines
    .filter((line) => line.trim() !== '' && !line.startsWith('#'))
    .map((line) => {
      const [name = '', list = ''] = line.split(':');
      const words = list.trim().split(/\s+/);
      const sources = words.flatMap((word) =>
        word === '*'
          ? readdirSync(sandboxDir)
              .filter((f) => f.endsWith('.c') && f !== 'main.c')
              .sort()
          : [word],
      );
      return { name: name.trim(), sources: sources.map((f) => path.join(sandboxDir, f)) };
    });
}

/** Sanitizers when this gcc has their runtimes (Debian's gcc does); plain otherwise. */
const sanitize = (() => {
  const probe = path.join(out, 'probe');
  const result = spawnSync('gcc', ['-fsanitize=address,undefined', '-x', 'c', '-', '-o', probe], { input: 'int main(void){return 0;}\n' });
  return result.status === 0 ? ['-fsanitize=address,undefined', '-fno-sanitize-recover=all', '-fno-omit-frame-pointer'] : [];
})();

const inputsIn = (dir: string) => (existsSync(dir) ? readdirSync(dir).filter((f) => !f.startsWith('.') && statSync(path.join(dir, f)).isFile()) : []);

const targets = readTargets();

describe('native fuzz targets: seed corpus and regressions replay cleanly (gcc, standalone main)', () => {
  it('targets.txt names a harness, a seed corpus and existing sources for every target', () => {
    expect(targets.map((t) => t.name).sort()).toEqual(['answer-frame', 'fast-path', 'lexical-path', 'syscall-decode', 'target-string']);
    for (const target of targets) {
      expect(existsSync(path.join(fuzzDir, `fuzz-${target.name}.c`)), target.name).toBe(true);
      expect(inputsIn(path.join(fuzzDir, 'corpus', target.name)).length, target.name).toBeGreaterThan(0);
      for (const source of target.sources) expect(existsSync(source), source).toBe(true);
    }
  });

  it.each(targets.map((t) => [t.name, t] as const))('%s', (name, target) => {
    const bin = path.join(out, `replay-${name}`);
    execFileSync(
      'gcc',
      [
        '-g',
        '-O1',
        '-std=gnu11',
        '-Wall',
        '-Wextra',
        '-D_GNU_SOURCE',
        `-I${path.join(repo, 'native', 'include')}`,
        `-I${sandboxDir}`,
        ...sanitize,
        path.join(fuzzDir, `fuzz-${name}.c`),
        path.join(fuzzDir, 'standalone-main.c'),
        ...target.sources,
        '-o',
        bin,
        '-lpthread',
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    const dirs = ['corpus', 'regressions'].map((kind) => path.join(fuzzDir, kind, name)).filter((dir) => existsSync(dir));
    const expected = dirs.reduce((sum, dir) => sum + inputsIn(dir).length, 0);
    const run = spawnSync(bin, dirs, { encoding: 'utf8', env: { ...process.env, ASAN_OPTIONS: 'detect_leaks=1', UBSAN_OPTIONS: 'print_stacktrace=1' } });
    // A failed property or a sanitizer report aborts with the input's story on stderr.
    expect(run.stderr.split('\n').filter((l) => /property failed|ERROR: |runtime error/.test(l))).toEqual([]);
    expect(run.status, run.stderr.slice(-2000)).toBe(0);
    expect(run.stdout).toContain(`replayed ${expected} inputs\n`);
  }, 180_000);
});
