/**
 * What a lease lets the supervisor decide itself, from the standard plugins' lease with
 * two rules: the TypeScript evaluator (lease/evaluate.ts) and the supervisor's C one
 * (native/sandbox/lease.c) give the same answer for every case, the expected one, and a
 * change the lease allows is one the broker's whole pipeline allows too.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Broker, type Access, type Operation } from '../../src/core/index.js';
import { leaseAllows, type LeaseQuestion } from '../../src/plugins/lease/evaluate.js';
import { formatLease } from '../../src/plugins/lease/format.js';
import type { Lease } from '../../src/plugins/lease/schema.js';
import { standardPlugins } from '../../src/plugins/standard.js';

const REPO = path.join(import.meta.dirname, '..', '..');
let base: string;
let ws: string;
let home: string;
let user: string;
let broker: Broker;
let lease: Lease;
let leaseFile: string;
let driver: string;

beforeAll(async () => {
  base = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'bsh-lease-decide-')));
  ws = path.join(base, 'ws');
  home = path.join(base, 'store');
  user = path.join(base, 'user');
  for (const dir of [ws, home, user, path.join(ws, 'd', 'e'), path.join(ws, '.git', 'objects', 'ab')]) mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(ws, 'a.txt'), 'a');
  broker = new Broker({ sessionId: 's1' }).use(
    ...standardPlugins({
      home,
      writableRoots: [ws],
      userHome: user,
      rules: [
        { pattern: '*.pem', decision: 'deny', access: ['write'] },
        { pattern: 'config/prod.json', decision: 'prompt' },
      ],
    }),
  );
  const outcome = await broker.handle({ origin: 'kernel', action: 'token', operation: 'open', targets: [{ role: 'path', path: ws, access: 'read' }], sessionId: 's1', options: { lease: true } });
  if (outcome.grant?.kind !== 'lease') throw new Error('no lease');
  lease = outcome.grant.lease as Lease;
  leaseFile = path.join(base, 'lease');
  writeFileSync(leaseFile, formatLease(lease));
  driver = path.join(base, 'lease-test');
  const sources = ['test/fixtures/lease/lease-test.c', 'native/sandbox/lease.c', 'native/sandbox/lease-glob.c'].map((file) => path.join(REPO, file));
  execFileSync('gcc', ['-O2', '-Wall', '-Wextra', '-Werror', '-std=gnu11', '-D_GNU_SOURCE', '-I', path.join(REPO, 'native/sandbox'), '-I', path.join(REPO, 'native/include'), '-o', driver, ...sources]);
});
afterAll(async () => {
  await broker.close();
  rmSync(base, { recursive: true, force: true });
});

type Case = [label: string, question: () => LeaseQuestion, leased: boolean];
const at = (rel: string) => path.join(ws, rel);
const create = (rel: string, mode?: number): LeaseQuestion => ({ op: 'create', path: at(rel), access: 'write', ...(mode === undefined ? {} : { mode }) });
const CASES: Case[] = [
  ['a new file in the workspace', () => create('new.txt'), true],
  ['a new file deep in the workspace', () => create('d/e/f.txt'), true],
  ['a file a deny rule names', () => create('d/key.pem'), false],
  ['a file a prompt rule names', () => create('app/config/prod.json'), false],
  ['a git object', () => create('.git/objects/ab/cdef'), true],
  ['a git hook', () => create('.git/hooks/pre-commit'), false],
  ['a file named config anywhere', () => create('src/config/x.ts'), false],
  ['.git itself', () => create('.git'), false],
  ['a HEAD', () => create('x/HEAD'), false],
  ['VS Code settings', () => create('.vscode/tasks.json'), false],
  ['a VS Code workspace file', () => create('my.code-workspace'), false],
  ['a BSD sed temp name', () => create('.!123!a.txt'), false],
  ['outside the roots', () => ({ op: 'create', path: path.join(base, 'elsewhere'), access: 'write' }), false],
  ['in the store', () => ({ op: 'create', path: path.join(home, 'x'), access: 'write' }), false],
  ['a shell startup file of home', () => ({ op: 'create', path: path.join(user, '.bashrc'), access: 'write' }), false],
  ['a file removed in the workspace', () => ({ op: 'unlink', path: at('a.txt'), access: 'delete' }), true],
  ['the workspace itself removed', () => ({ op: 'rmdir', path: ws, access: 'delete' }), false],
  ['a path with ..', () => ({ op: 'create', path: `${ws}/d/../new.txt`, access: 'write' }), false],
  ['a set-uid mode', () => ({ op: 'chmod', path: at('a.txt'), access: 'write', mode: 0o4755 }), false],
  ['a set-gid directory', () => ({ op: 'mkdir', path: at('shared'), access: 'write', mode: 0o2775, directory: true }), true],
  ['a set-gid file', () => ({ op: 'chmod', path: at('a.txt'), access: 'write', mode: 0o2755 }), false],
];

const OPERATION: Record<LeaseQuestion['op'], Operation> = { create: 'open', mkdir: 'mkdir', unlink: 'delete', rmdir: 'delete', rename: 'rename', link: 'link', chmod: 'chmod', chown: 'chown', utimes: 'touch' };

describe('lease decisions', () => {
  it.each(CASES)('%s: leased %s, by both evaluators', (_label, question, leased) => {
    const q = question();
    expect(leaseAllows(lease, q)).toBe(leased);
    const c = execFileSync(driver, ['allows', leaseFile, q.op, q.access === 'delete' ? '1' : '0', q.path, String(q.mode ?? -1), q.directory ? '1' : '0'], { encoding: 'utf8' }).trim();
    expect(c).toBe(leased ? 'yes' : 'no');
  });

  it.each(CASES.filter(([, , leased]) => leased))('%s: what the lease allows, the pipeline allows', async (_label, question) => {
    const q = question();
    const access: Access = q.access;
    const outcome = await broker.handle({ origin: 'kernel', action: 'check', operation: OPERATION[q.op], targets: [{ role: 'path', path: q.path, access }], sessionId: 's1', options: q.mode === undefined ? {} : { mode: q.mode & 0o7777 } });
    expect(outcome.decision.verdict, outcome.decision.reason).toMatch(/^(sandbox|grant-token)$/);
  });
});
