import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tempDir, type ServeHandle } from '../helpers/serve-process.js';
import {
  NODE_SHIM,
  PYTHON_DIR,
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

interface PyError {
  type: string;
  errno: number | null;
  filename: string | null;
  strerror: string | null;
}
type Steps = Record<string, { ok: true } | { ok: false; error: PyError }>;

const PRELUDE = `
import json, os, shutil, pathlib, sys
out = {}
def step(name, fn):
    try:
        fn()
        out[name] = {"ok": True}
    except Exception as e:
        out[name] = {"ok": False, "error": {"type": type(e).__name__, "errno": getattr(e, "errno", None), "filename": str(e.filename) if getattr(e, "filename", None) is not None else None, "strerror": getattr(e, "strerror", None)}}
`;

/** Run Python with the shims on its path, as env.sh sets it (NODE_OPTIONS too: the client must not trip over it). */
async function python(body: string, env: NodeJS.ProcessEnv): Promise<{ steps: Steps; stderr: string }> {
  const code = `${PRELUDE}\n${body}\nprint(json.dumps(out))`;
  const ran = await runProcess('python3', ['-c', code], { env: { ...env, PYTHONPATH: PYTHON_DIR, NODE_OPTIONS: `--require "${NODE_SHIM}"` }, cwd: ws });
  expect(ran.code, ran.stderr).toBe(0);
  return { steps: JSON.parse(ran.stdout) as Steps, stderr: ran.stderr };
}

const q = (value: string) => JSON.stringify(value);

function failure(steps: Steps, name: string): PyError {
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

describe('Python deletes through the broker', () => {
  it('success: os.remove, os.unlink, pathlib, os.rmdir, shutil.rmtree; files in the trash, backups in the turn', async () => {
    const dir = path.join(ws, 'py-ok');
    const files = Array.from({ length: 4 }, () => makeFile(dir));
    const tree = path.join(ws, 'py-tree');
    const deep = makeFile(path.join(tree, 'sub'));
    mkdirSync(path.join(ws, 'py-empty'));
    const [f0, f1, f2, f3] = files.map((f) => q(f.path));
    const { steps, stderr } = await python(
      `
step('os.remove', lambda: os.remove(${f0}))
step('os.unlink bytes', lambda: os.unlink(os.fsencode(${f1})))
step('pathlib unlink', lambda: pathlib.Path(${f2}).unlink())
dfd = os.open(${q(dir)}, os.O_RDONLY)
step('os.unlink dir_fd', lambda: os.unlink(os.path.basename(${f3}), dir_fd=dfd))
step('os.rmdir', lambda: os.rmdir('py-empty'))
step('shutil.rmtree', lambda: shutil.rmtree('py-tree'))
import tempfile
def named_temporary():
    with tempfile.NamedTemporaryFile(dir='.', prefix='py-named-', delete=True) as handle:
        handle.write(b'temporary bytes')
        out['named'] = os.path.basename(handle.name)
step('tempfile.NamedTemporaryFile', named_temporary)
`,
      brokerEnv(serve),
    );
    // tempfile may be imported before sitecustomize (by a .pth file): its cleanup still goes through the broker.
    const named = String((steps as Record<string, unknown>).named);
    delete (steps as Record<string, unknown>).named;
    expectAllOk(steps);
    expect(stderr).toBe('');
    for (const file of files) expectTrashed(serve, file);
    expect(existsSync(path.join(trashDir(serve), 'files', 'py-empty'))).toBe(true);
    expect(existsSync(tree)).toBe(false);
    expect(readFileSync(path.join(trashDir(serve), 'files', 'py-tree', 'sub', path.basename(deep.path)))).toEqual(deep.bytes);
    expect(readFileSync(path.join(trashDir(serve), 'files', named), 'utf8')).toBe('temporary bytes');
    expect(existsSync(path.join(ws, named))).toBe(false);
    await expectBackedUp(serve, [...files, deep], 'python success');
  });

  it('deny: PermissionError(EACCES) with the path and the broker\'s reason; the file stays', async () => {
    const outside = makeFile(outsideDir(serve));
    const keep = makeFile(path.join(ws, 'py-deny'), 'keep.txt');
    const { steps, stderr } = await python(
      `
step('os.remove outside', lambda: os.remove(${q(outside.path)}))
step('os.unlink rule', lambda: os.unlink('py-deny/keep.txt'))
step('rmtree outside', lambda: shutil.rmtree(${q(path.dirname(outside.path))}))
`,
      brokerEnv(serve),
    );
    expect(failure(steps, 'os.remove outside')).toMatchObject({ type: 'PermissionError', errno: 13, filename: outside.path });
    expect(failure(steps, 'os.remove outside').strerror).toMatch(/^Permission denied \(brokered-shell: .*outside the writable roots; writableRoots, or cacheRoots.add .* would allow it\)$/);
    expect(failure(steps, 'os.unlink rule')).toMatchObject({ type: 'PermissionError', errno: 13, filename: 'py-deny/keep.txt' });
    expect(failure(steps, 'os.unlink rule').strerror).toContain('matches rule keep.txt');
    expect(failure(steps, 'rmtree outside')).toMatchObject({ type: 'PermissionError', errno: 13, filename: path.dirname(outside.path) });
    expect(stderr).toContain('brokered-shell safe-delete: denied:');
    expectUntouched(serve, outside);
    expectUntouched(serve, keep);
    await expectNoBackup(serve, [outside, keep], 'python deny');
  });

  it("ordinary failures keep Python's own exceptions; rmtree's ignore_errors and onerror work", async () => {
    const dir = path.join(ws, 'py-errors');
    const inner = makeFile(dir);
    const { steps, stderr } = await python(
      `
step('remove missing', lambda: os.remove('py-gone.txt'))
step('unlink missing_ok', lambda: pathlib.Path('py-gone.txt').unlink(missing_ok=True))
step('remove dir', lambda: os.remove('py-errors'))
step('rmdir full', lambda: os.rmdir('py-errors'))
step('rmdir file', lambda: os.rmdir(${q(inner.path)}))
step('rmtree missing', lambda: shutil.rmtree('py-gone-dir'))
step('rmtree missing ignore_errors', lambda: shutil.rmtree('py-gone-dir', ignore_errors=True))
seen = []
step('rmtree onerror', lambda: shutil.rmtree('py-gone-dir', onerror=lambda f, p, info: seen.append((f.__name__, p, info[0].__name__))))
out['seen'] = seen
os.symlink('py-errors', 'py-link')
step('rmtree symlink', lambda: shutil.rmtree('py-link'))
step('remove None', lambda: os.remove(None))
`,
      brokerEnv(serve),
    );
    expect(failure(steps, 'remove missing')).toEqual({ type: 'FileNotFoundError', errno: 2, filename: 'py-gone.txt', strerror: 'No such file or directory' });
    expect(steps['unlink missing_ok']).toEqual({ ok: true });
    expect(failure(steps, 'remove dir')).toMatchObject({ type: 'IsADirectoryError', errno: 21 });
    expect(failure(steps, 'rmdir full')).toMatchObject({ type: 'OSError', errno: 39 });
    expect(failure(steps, 'rmdir file')).toMatchObject({ type: 'NotADirectoryError', errno: 20 });
    expect(failure(steps, 'rmtree missing')).toMatchObject({ type: 'FileNotFoundError', errno: 2 });
    expect(steps['rmtree missing ignore_errors']).toEqual({ ok: true });
    expect(steps['rmtree onerror']).toEqual({ ok: true });
    expect((steps as Record<string, unknown>).seen).toEqual([['lstat', 'py-gone-dir', 'FileNotFoundError']]);
    expect(failure(steps, 'rmtree symlink')).toMatchObject({ type: 'OSError' });
    expect(failure(steps, 'remove None')).toMatchObject({ type: 'TypeError' });
    expect(stderr).toBe('');
    expectUntouched(serve, inner);
    expect(existsSync(path.join(ws, 'py-link'))).toBe(true);
  });
});

describe('Python deletes when the broker is down', () => {
  it('socket variable names a dead path: success, files in the local trash', async () => {
    const file = makeFile(ws);
    const tree = path.join(ws, 'py-down-tree');
    const inner = makeFile(tree);
    const { steps, stderr } = await python(
      `
step('os.remove', lambda: os.remove(${q(file.path)}))
step('shutil.rmtree', lambda: shutil.rmtree(${q(tree)}))
`,
      downEnv(serve),
    );
    expectAllOk(steps);
    expect(stderr).toContain('broker unreachable');
    expectTrashed(serve, file);
    expect(readFileSync(path.join(trashDir(serve), 'files', 'py-down-tree', path.basename(inner.path)))).toEqual(inner.bytes);
    await expectNoBackup(serve, [file, inner], 'python down');
  });

  it('no broker variables at all: Python still starts and deletes into the local trash, quietly', async () => {
    const file = makeFile(ws);
    const env = brokerEnv(serve);
    for (const name of ['BROKERED_SHELL_SOCKET', 'BROKERED_SHELL_SESSION_ID', 'BROKERED_SHELL_TOOL_CALL_ID', 'BROKERED_SHELL_TRACE_ID']) delete env[name];
    const { steps, stderr } = await python(`step('os.remove', lambda: os.remove(${q(file.path)}))`, env);
    expectAllOk(steps);
    expect(stderr).toBe('');
    expectTrashed(serve, file);
  });

  it('no node to run the client: PermissionError, nothing deleted', async () => {
    const file = makeFile(ws);
    const { steps } = await python(`step('os.remove', lambda: os.remove(${q(file.path)}))`, brokerEnv(serve, { BROKERED_SHELL_NODE: path.join(ws, 'no-node-here') }));
    expect(failure(steps, 'os.remove')).toMatchObject({ type: 'PermissionError', errno: 13 });
    expectUntouched(serve, file);
  });
});

describe('Python deletes and a broker that never answers', () => {
  it('PermissionError after the timeout (no fallback), file untouched', async () => {
    const silent = await silentBroker(tempDir('bsh-sd-silent-'));
    try {
      const file = makeFile(ws);
      const { steps, stderr } = await python(
        `step('os.remove', lambda: os.remove(${q(file.path)}))`,
        brokerEnv(serve, { BROKERED_SHELL_SOCKET: silent.socket, BROKERED_SHELL_CLIENT_TIMEOUT_MS: '300' }),
      );
      expect(failure(steps, 'os.remove')).toMatchObject({ type: 'PermissionError', errno: 13, filename: file.path });
      expect(failure(steps, 'os.remove').strerror).toContain('did not answer within 300 ms');
      expect(stderr).toContain('failing closed');
      expectUntouched(serve, file);
    } finally {
      await silent.close();
    }
  });
});

describe('sitecustomize chaining', () => {
  it('a sitecustomize further along the path still runs', async () => {
    const other = tempDir('bsh-sd-site-');
    writeFileSync(path.join(other, 'sitecustomize.py'), 'import builtins\nbuiltins.OTHER_SITE_RAN = True\n');
    const ran = await runProcess('python3', ['-c', 'import builtins, os; print(getattr(builtins, "OTHER_SITE_RAN", False), getattr(os, "_brokered_shell_safe_delete", False))'], {
      env: { ...brokerEnv(serve), PYTHONPATH: `${PYTHON_DIR}:${other}` },
      cwd: ws,
    });
    expect(ran.stdout).toBe('True True\n');
  });
});
