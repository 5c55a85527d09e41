import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, tempDir, type ServeHandle } from '../helpers/serve-process.js';
import {
  NODE_SHIM,
  brokerEnv,
  downEnv,
  expectBackedUp,
  expectNoBackup,
  expectTrashed,
  expectUntouched,
  makeFile,
  outsideDir,
  runProcess,
  silentBroker,
  startPolicyServe,
  trashDir,
} from './safe-delete-helpers.js';

let serve: ServeHandle;
let ws: string;

interface ErrorShape {
  name: string;
  code: string;
  errno: number;
  syscall: string;
  path: string;
  message: string;
}
type Steps = Record<string, { ok: true } | { ok: false; error: ErrorShape }>;

const PRELUDE = `
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import { unlinkSync as namedUnlinkSync } from 'node:fs';
import { rm as namedPromisesRm } from 'node:fs/promises';
const out = {};
const shape = (e) => ({ name: e.name, code: e.code, errno: e.errno, syscall: e.syscall, path: e.path, message: e.message });
async function step(name, fn) {
  try { await fn(); out[name] = { ok: true }; } catch (e) { out[name] = { ok: false, error: shape(e) }; }
}
const viaCallback = (start) => new Promise((resolve, reject) => start((err, ...rest) => (err ? reject(err) : rest.length ? reject(new Error('extra callback arguments')) : resolve())));
`;

/** Run ESM code in a Node whose fs is wrapped the way env.sh wraps it: NODE_OPTIONS=--require. */
async function node(body: string, env: NodeJS.ProcessEnv): Promise<{ steps: Steps; stderr: string; code: number | null }> {
  const code = `${PRELUDE}\n${body}\nconsole.log(JSON.stringify(out));`;
  const ran = await runProcess(process.execPath, ['--input-type=module', '-e', code], { env: { ...env, NODE_OPTIONS: `--require "${NODE_SHIM}"` }, cwd: ws });
  expect(ran.code, ran.stderr).toBe(0);
  return { steps: JSON.parse(ran.stdout) as Steps, stderr: ran.stderr, code: ran.code };
}

const q = (value: string) => JSON.stringify(value);

function failure(steps: Steps, name: string): ErrorShape {
  const step = steps[name];
  expect(step, name).toBeDefined();
  if (!step || step.ok) throw new Error(`${name} succeeded, a failure was expected`);
  return step.error;
}

function expectAllOk(steps: Steps): void {
  for (const [name, step] of Object.entries(steps)) expect(step, name).toEqual({ ok: true });
}

beforeAll(async () => {
  serve = await startPolicyServe();
  ws = serve.workspace;
});
afterAll(() => serve.cleanup());

describe('Node fs deletes through the broker', () => {
  it('success for every wrapped function: files in the trash with their bytes, backups in the turn', async () => {
    const dir = path.join(ws, 'node-ok');
    const files = Array.from({ length: 8 }, () => makeFile(dir));
    const dirs = ['d1', 'd2', 'd3'].map((name) => path.join(dir, name));
    for (const d of dirs) mkdirSync(d);
    const [f0, f1, f2, f3, f4, f5, f6, f7] = files.map((f) => q(f.path));
    const [d1, d2, d3] = dirs.map(q);
    const { steps, stderr } = await node(
      `
      await step('unlinkSync', () => fs.unlinkSync(${f0}));
      await step('unlink', () => viaCallback((cb) => fs.unlink(${f1}, cb)));
      await step('promises.unlink', () => fsp.unlink(${f2}));
      await step('rmSync', () => fs.rmSync(${f3}));
      await step('rm', () => viaCallback((cb) => fs.rm(${f4}, cb)));
      await step('rm with options', () => viaCallback((cb) => fs.rm(${f5}, { force: false }, cb)));
      await step('promises.rm (named ESM import)', () => namedPromisesRm(${f6}));
      await step('unlinkSync (named ESM import)', () => namedUnlinkSync(new URL('file://' + ${f7})));
      await step('rmdirSync', () => fs.rmdirSync(${d1}));
      await step('rmdir', () => viaCallback((cb) => fs.rmdir(${d2}, cb)));
      await step('promises.rmdir', () => fsp.rmdir(${d3}));
      `,
      brokerEnv(serve),
    );
    expectAllOk(steps);
    expect(Object.keys(steps)).toHaveLength(11);
    expect(stderr).toBe('');
    for (const file of files) expectTrashed(serve, file);
    for (const d of dirs) {
      expect(existsSync(d)).toBe(false);
      expect(existsSync(path.join(trashDir(serve), 'files', path.basename(d)))).toBe(true);
    }
    await expectBackedUp(serve, files, 'node success');
  });

  it('deny: EACCES shaped like Node\'s own (code, errno, syscall, path), the file stays', async () => {
    const outside = makeFile(outsideDir(serve));
    const keepDir = path.join(ws, 'node-deny');
    const keep = makeFile(keepDir, 'keep.txt');
    const emptyOutside = path.join(outsideDir(serve), 'empty-node');
    mkdirSync(emptyOutside);
    const { steps, stderr } = await node(
      `
      await step('unlinkSync', () => fs.unlinkSync(${q(outside.path)}));
      await step('unlink', () => viaCallback((cb) => fs.unlink('node-deny/keep.txt', cb)));
      await step('promises.rm', () => fsp.rm(${q(keep.path)}, { force: true }));
      await step('rmSync', () => fs.rmSync(${q(outside.path)}, { recursive: true, force: true }));
      await step('rmdirSync', () => fs.rmdirSync(${q(emptyOutside)}));
      `,
      brokerEnv(serve),
    );
    expect(failure(steps, 'unlinkSync')).toMatchObject({ name: 'Error', code: 'EACCES', errno: -13, syscall: 'unlink', path: outside.path });
    expect(failure(steps, 'unlinkSync').message).toMatch(/^EACCES: permission denied, unlink '.*' \(brokered-shell: .*outside the writable roots; writableRoots, or cacheRoots.add .* would allow it\)$/);
    expect(failure(steps, 'unlink')).toMatchObject({ code: 'EACCES', errno: -13, syscall: 'unlink', path: 'node-deny/keep.txt' });
    expect(failure(steps, 'unlink').message).toContain('matches rule keep.txt');
    expect(failure(steps, 'promises.rm')).toMatchObject({ code: 'EACCES', syscall: 'rm', path: keep.path });
    expect(failure(steps, 'rmSync')).toMatchObject({ code: 'EACCES', syscall: 'rm' });
    expect(failure(steps, 'rmdirSync')).toMatchObject({ code: 'EACCES', syscall: 'rmdir' });
    expect(stderr).toContain('brokered-shell safe-delete: denied:');
    expectUntouched(serve, outside);
    expectUntouched(serve, keep);
    expect(existsSync(emptyOutside)).toBe(true);
    await expectNoBackup(serve, [outside, keep], 'node deny');
  });

  it('rm recursive trashes a tree; rm force of a missing path succeeds', async () => {
    const dir = path.join(ws, 'node-tree');
    const a = makeFile(dir);
    const b = makeFile(path.join(dir, 'inner'));
    const { steps } = await node(
      `
      await step('rmSync recursive', () => fs.rmSync('node-tree', { recursive: true, force: true }));
      await step('rmSync force missing', () => fs.rmSync('node-missing', { force: true }));
      await step('promises.rm force missing', () => fsp.rm('node-missing', { recursive: true, force: true }));
      await step('rm force missing', () => viaCallback((cb) => fs.rm('node-missing', { force: true }, cb)));
      `,
      brokerEnv(serve),
    );
    expectAllOk(steps);
    expect(existsSync(dir)).toBe(false);
    expect(readFileSync(path.join(trashDir(serve), 'files', 'node-tree', 'inner', path.basename(b.path)))).toEqual(b.bytes);
    await expectBackedUp(serve, [a, b], 'node rm -r');
  });

  it('ordinary failures keep Node\'s own errors: ENOENT, EISDIR, ERR_FS_EISDIR, ENOTEMPTY, ENOTDIR', async () => {
    const dir = path.join(ws, 'node-errors');
    const inner = makeFile(dir);
    const { steps, stderr } = await node(
      `
      await step('unlinkSync missing', () => fs.unlinkSync('node-gone.txt'));
      await step('promises.unlink missing', () => fsp.unlink('node-gone.txt'));
      await step('rmSync missing', () => fs.rmSync('node-gone.txt'));
      await step('unlinkSync dir', () => fs.unlinkSync('node-errors'));
      await step('rmSync dir', () => fs.rmSync('node-errors'));
      await step('rm dir', () => viaCallback((cb) => fs.rm('node-errors', cb)));
      await step('rmdirSync full', () => fs.rmdirSync('node-errors'));
      await step('rmdirSync file', () => fs.rmdirSync(${q(inner.path)}));
      `,
      brokerEnv(serve),
    );
    expect(failure(steps, 'unlinkSync missing')).toEqual({
      name: 'Error',
      code: 'ENOENT',
      errno: -2,
      syscall: 'unlink',
      path: 'node-gone.txt',
      message: "ENOENT: no such file or directory, unlink 'node-gone.txt'",
    });
    expect(failure(steps, 'promises.unlink missing')).toMatchObject({ code: 'ENOENT', syscall: 'unlink' });
    expect(failure(steps, 'rmSync missing')).toMatchObject({ code: 'ENOENT', syscall: 'lstat' });
    expect(failure(steps, 'unlinkSync dir')).toMatchObject({ code: 'EISDIR', errno: -21, syscall: 'unlink' });
    expect(failure(steps, 'rmSync dir')).toMatchObject({ name: 'SystemError', code: 'ERR_FS_EISDIR', errno: 21, syscall: 'rm' });
    expect(failure(steps, 'rm dir')).toMatchObject({ code: 'ERR_FS_EISDIR', message: 'Path is a directory: rm returned EISDIR (is a directory) node-errors' });
    expect(failure(steps, 'rmdirSync full')).toMatchObject({ code: 'ENOTEMPTY', errno: -39, syscall: 'rmdir' });
    expect(failure(steps, 'rmdirSync file')).toMatchObject({ code: 'ENOTDIR', errno: -20, syscall: 'rmdir' });
    // The program handles these itself; the shim adds no noise.
    expect(stderr).toBe('');
    expectUntouched(serve, inner);
  });

  it('invalid arguments get Node\'s own TypeErrors and delete nothing (even fs.rm without a callback)', async () => {
    const file = makeFile(ws);
    const { steps } = await node(
      `
      await step('unlinkSync number', () => fs.unlinkSync(12));
      await step('promises.unlink null', () => fsp.unlink(null));
      await step('rm no callback', () => fs.rm(${q(file.path)}));
      await step('unlink no callback', () => fs.unlink(${q(file.path)}));
      `,
      brokerEnv(serve),
    );
    for (const name of Object.keys(steps)) expect(failure(steps, name)).toMatchObject({ name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' });
    expectUntouched(serve, file);
  });

  it('the client process is never patched (the guard variable); without the shim Node deletes as usual', async () => {
    const file = makeFile(ws);
    const { steps } = await node(`await step('unlinkSync', () => fs.unlinkSync(${q(file.path)}));`, brokerEnv(serve, { BROKERED_SHELL_SAFE_DELETE_IN_CLIENT: '1' }));
    expectAllOk(steps);
    expect(existsSync(file.path)).toBe(false);
    expect(existsSync(path.join(trashDir(serve), 'files', path.basename(file.path)))).toBe(false);
  });
});

describe('where the Node shim stays out', () => {
  it('the brokered-shell CLI itself (it hosts the broker) is never patched', async () => {
    const dir = tempDir('bsh-sd-cli-');
    const probe = path.join(dir, 'probe.cjs');
    writeFileSync(probe, "process.on('exit', () => process.stderr.write('patched=' + Boolean(require('node:fs')[Symbol.for('brokered-shell.safe-delete.patched')]) + '\\n'));\n");
    const cli = await runProcess(process.execPath, ['--require', NODE_SHIM, '--require', probe, CLI, '--help'], { env: brokerEnv(serve), cwd: ws });
    expect(cli.stderr).toContain('patched=false');
    const other = path.join(dir, 'other.cjs');
    writeFileSync(other, '');
    const plain = await runProcess(process.execPath, ['--require', NODE_SHIM, '--require', probe, other], { env: brokerEnv(serve), cwd: ws });
    expect(plain.stderr).toContain('patched=true');
  });
});

describe('Node fs deletes when the broker is down', () => {
  it('socket variable names a dead path: success, files in the local trash', async () => {
    const a = makeFile(ws);
    const b = makeFile(ws);
    const dir = path.join(ws, 'node-down-tree');
    const c = makeFile(dir);
    const { steps, stderr } = await node(
      `
      await step('unlinkSync', () => fs.unlinkSync(${q(a.path)}));
      await step('promises.rm', () => fsp.rm(${q(b.path)}));
      await step('rm recursive', () => viaCallback((cb) => fs.rm('node-down-tree', { recursive: true }, cb)));
      `,
      downEnv(serve),
    );
    expectAllOk(steps);
    expect(stderr).toContain('broker unreachable');
    expectTrashed(serve, a);
    expectTrashed(serve, b);
    expect(readFileSync(path.join(trashDir(serve), 'files', 'node-down-tree', path.basename(c.path)))).toEqual(c.bytes);
    await expectNoBackup(serve, [a, b, c], 'node down');
  });

  it('no socket variable: the local trash, quietly', async () => {
    const file = makeFile(ws);
    const env = brokerEnv(serve);
    delete env.BROKERED_SHELL_SOCKET;
    const { steps, stderr } = await node(`await step('unlinkSync', () => fs.unlinkSync(${q(file.path)}));`, env);
    expectAllOk(steps);
    expect(stderr).toBe('');
    expectTrashed(serve, file);
  });
});

describe('Node fs deletes and a broker that never answers', () => {
  it('EACCES after the timeout (no fallback), file untouched', async () => {
    const silent = await silentBroker(tempDir('bsh-sd-silent-'));
    try {
      const file = makeFile(ws);
      const { steps, stderr } = await node(
        `await step('unlinkSync', () => fs.unlinkSync(${q(file.path)}));`,
        brokerEnv(serve, { BROKERED_SHELL_SOCKET: silent.socket, BROKERED_SHELL_CLIENT_TIMEOUT_MS: '300' }),
      );
      expect(failure(steps, 'unlinkSync')).toMatchObject({ code: 'EACCES', syscall: 'unlink', path: file.path });
      expect(failure(steps, 'unlinkSync').message).toContain('did not answer within 300 ms');
      expect(stderr).toContain('failing closed');
      expectUntouched(serve, file);
    } finally {
      await silent.close();
    }
  });
});
