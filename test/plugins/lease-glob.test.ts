/**
 * One table of glob cases (test/fixtures/lease/glob-vectors.json) for both matchers:
 * file-safety's own (glob.ts, through compilePattern), and the programs a lease carries
 * for the supervisor, run by its C matcher (native/sandbox/lease-glob.c, built here with
 * a small test driver) and by the TypeScript twin of that matcher (lease/evaluate.ts).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { programsOf } from '../../src/plugins/file-safety/lease.js';
import { compilePattern } from '../../src/plugins/file-safety/patterns.js';
import { runWithin } from '../../src/plugins/lease/evaluate.js';
import { formatLease } from '../../src/plugins/lease/format.js';
import { emptyLease } from '../../src/plugins/lease/schema.js';

const REPO = path.join(import.meta.dirname, '..', '..');
interface Vector {
  pattern: string;
  path: string;
  within: boolean;
}
const table = JSON.parse(readFileSync(path.join(REPO, 'test/fixtures/lease/glob-vectors.json'), 'utf8')) as { homes: string[]; vectors: Vector[] };

let dir: string;
let driver: string;
beforeAll(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'bsh-lease-glob-'));
  driver = path.join(dir, 'lease-test');
  const sources = ['test/fixtures/lease/lease-test.c', 'native/sandbox/lease.c', 'native/sandbox/lease-glob.c'].map((file) => path.join(REPO, file));
  execFileSync('gcc', ['-O2', '-Wall', '-Wextra', '-Werror', '-std=gnu11', '-D_GNU_SOURCE', '-I', path.join(REPO, 'native/sandbox'), '-I', path.join(REPO, 'native/include'), '-o', driver, ...sources]);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('glob vectors', () => {
  it.each(table.vectors)('glob.ts: $pattern ~ $path → $within', (vector) => {
    expect(compilePattern(vector.pattern, table.homes)(vector.path)).toBe(vector.within);
  });

  it.each(table.vectors)('the lease\'s programs, TypeScript: $pattern ~ $path → $within', (vector) => {
    expect(programsOf(vector.pattern, table.homes).some((program) => runWithin(program, vector.path))).toBe(vector.within);
  });

  it('the lease\'s programs, C (the supervisor\'s matcher): every vector', () => {
    const answers = table.vectors.map((vector, index) => {
      const lease = emptyLease();
      lease.globs.push({ write: true, delete: true, programs: programsOf(vector.pattern, table.homes) });
      const file = path.join(dir, `lease-${index}`);
      writeFileSync(file, formatLease(lease));
      return execFileSync(driver, ['glob', file, vector.path], { encoding: 'utf8' }).trim();
    });
    expect(answers).toEqual(table.vectors.map((vector) => (vector.within ? 'match' : 'no')));
  });
});
