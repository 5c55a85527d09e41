/**
 * Writes that must not happen: outside the workspace by every route we know
 * (direct, symlink, hard link, /proc magic links, openat2, fd-based metadata), a
 * denied file inside the workspace, and a racing thread that swaps the path between
 * the supervisor's read and the kernel's.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  buildFixture,
  createFakeBroker,
  removeDir,
  runBash,
  runSandboxed,
  tempDir,
  type FakeBroker,
} from '../fixtures/sandbox/harness.js';

const EACCES = 13;
let bin: string;
let ws: string;
let scratch: string;
let outside: string;
let secret: string;
let broker: FakeBroker;

beforeAll(() => {
  bin = tempDir('bin');
  for (const name of ['openat2', 'racer', 'probe']) buildFixture(name, bin);
});
afterAll(() => removeDir(bin));

beforeEach(() => {
  ws = tempDir('ws');
  scratch = tempDir('scratch');
  outside = tempDir('outside');
  secret = path.join(outside, 'secret');
  fs.writeFileSync(secret, 'secret\n');
  fs.chmodSync(secret, 0o644);
  broker = createFakeBroker(ws);
});
afterEach(() => {
  for (const dir of [ws, scratch, outside]) removeDir(dir);
});

const bash = (script: string) =>
  runBash(script, { cwd: ws, broker, scratch: [scratch], env: { BIN: bin, OUT: outside, SECRET: secret, SCRATCH: scratch } });
const untouched = () => {
  expect(fs.readFileSync(secret, 'utf8')).toBe('secret\n');
  expect(fs.statSync(secret).mode & 0o7777).toBe(0o644);
  expect(fs.readdirSync(outside)).toEqual(['secret']);
};

describe('writes outside the workspace fail and change nothing', () => {
  it.each([
    ['a direct path', 'echo x > "$SECRET"'],
    ['a relative path with ..', 'echo x > "../$(basename "$OUT")/secret"'],
    ['a new file in another directory', 'echo x > "$OUT/new"'],
    ['a symlink in the workspace pointing out', 'ln -s "$SECRET" link && echo x > link'],
    ['a hard link made from inside', 'ln "$SECRET" hard && echo x > hard'],
    ['/proc/self/root', 'echo x > "/proc/self/root$SECRET"'],
    ['/proc/self/fd/N of a read-only fd', 'exec 3<"$SECRET"; echo x > /proc/self/fd/3'],
    ['/dev/fd/N of a read-only fd', 'exec 3<"$SECRET"; echo x > /dev/fd/3'],
    ['truncate', 'truncate -s 0 "$SECRET"'],
    ['truncate(2) of /proc/self/fd/N of a read-only fd', `exec 3<"$SECRET"; python3 -c 'import os; os.truncate("/proc/self/fd/3", 0)'`],
    ['truncate(2) of /dev/fd/N of a read-only fd', `exec 4<"$SECRET"; python3 -c 'import os; os.truncate("/dev/fd/4", 2)'`],
    ['truncate(2) of /dev/stdin', `perl -e 'truncate("/dev/stdin", 0) or die $!' < "$SECRET"`],
    ['O_RDONLY|O_TRUNC through a temp-dir link', `ln -s "$SECRET" "$SCRATCH/l" && python3 -c 'import os; os.open(os.environ["SCRATCH"] + "/l", os.O_RDONLY | os.O_TRUNC)'`],
    ['rm', 'rm -f "$SECRET"'],
    ['mv out of it', 'mv "$SECRET" ./stolen'],
    ['mv over it', 'echo x > mine && mv mine "$SECRET"'],
    ['chmod', 'chmod 777 "$SECRET"'],
    ['touch', 'touch -d 2000-01-01 "$SECRET"'],
    ['python fchmod on a read-only fd', `python3 -c "import os; os.fchmod(os.open('$SECRET', os.O_RDONLY), 0o777)"`],
    ['static busybox', 'busybox sh -c "echo x > $SECRET"'],
  ])('via %s', async (_route, script) => {
    const result = await bash(script);
    expect(result.code).not.toBe(0);
    untouched();
    expect(fs.existsSync(path.join(ws, 'stolen'))).toBe(false);
  });

  it('via openat2: EACCES outside; inside, the resolve flags the program asked for still hold', async () => {
    fs.symlinkSync(secret, path.join(ws, 'link'));
    fs.mkdirSync(path.join(ws, 'sub'));
    const result = await bash(
      [
        '"$BIN/openat2" "$SECRET"',
        '"$BIN/openat2" new',
        '"$BIN/openat2" sub/new beneath',
        'cd sub && "$BIN/openat2" ../escape beneath; cd ..',
        '"$BIN/openat2" link nosymlinks',
        '"$BIN/openat2" other inroot',
      ].join('; '),
    );
    expect(result.stdout.split('\n')).toEqual(['EACCES', 'ok cloexec', 'ok cloexec', 'EXDEV', 'ELOOP', 'EACCES', '']);
    expect(fs.readFileSync(path.join(ws, 'new'), 'utf8')).toBe('openat2\n');
    expect(fs.existsSync(path.join(ws, 'escape'))).toBe(false);
    untouched();
  });

  it('truncating a workspace file through an alias of a read-only fd is refused, not done behind the broker', async () => {
    fs.writeFileSync(path.join(ws, 'a.txt'), 'kept\n');
    const result = await bash(`exec 3<a.txt; python3 -c 'import os; os.truncate("/proc/self/fd/3", 0)'`);
    expect(result.code).not.toBe(0);
    expect(fs.readFileSync(path.join(ws, 'a.txt'), 'utf8')).toBe('kept\n');
    expect(broker.requests.filter((r) => r.path === path.join(ws, 'a.txt'))).toEqual([]);
  });

  it('an fd alias of a workspace file asks about that file and works', async () => {
    fs.writeFileSync(path.join(ws, 'log'), 'old\n');
    const result = await bash('exec 3>>log; echo via-fd >> /dev/fd/3; echo via-proc >> /proc/self/fd/3');
    expect(result.code, result.stderr).toBe(0);
    expect(fs.readFileSync(path.join(ws, 'log'), 'utf8')).toBe('old\nvia-fd\nvia-proc\n');
  });
});

describe('a path the broker denies inside the workspace', () => {
  it('stays untouched and the program sees EACCES', async () => {
    const protectedFile = path.join(ws, 'protected');
    fs.writeFileSync(protectedFile, 'keep\n');
    broker.intercept = (request) => (request.path === protectedFile ? { errno: EACCES } : undefined);
    const result = await bash('"$BIN/probe" open-write protected; rm -f protected; mv protected x; echo y > protected');
    expect(result.stdout).toBe('EACCES\n');
    expect(result.stderr).toMatch(/Permission denied/);
    expect(fs.readFileSync(protectedFile, 'utf8')).toBe('keep\n');
    expect(fs.existsSync(path.join(ws, 'x'))).toBe(false);
  });

  it('an onRequest that throws or answers garbage denies', async () => {
    fs.writeFileSync(path.join(ws, 'a'), 'a\n');
    fs.writeFileSync(path.join(ws, 'b'), 'b\n');
    broker.intercept = (request) => {
      if (request.path.endsWith('/a')) throw new Error('broken plugin');
      return { errno: 0, path: 'relative/path' };
    };
    const result = await bash('"$BIN/probe" open-write a; "$BIN/probe" open-write b');
    expect(result.stdout).toBe('EACCES\nEACCES\n');
    expect(fs.readFileSync(path.join(ws, 'a'), 'utf8')).toBe('a\n');
    expect(fs.readFileSync(path.join(ws, 'b'), 'utf8')).toBe('b\n');
  });
});

/** renameat2(A, B, RENAME_EXCHANGE) from python; prints "ok" or the errno's name. */
const swap = (a: string, b: string) =>
  `python3 -c 'import ctypes, errno, sys; libc = ctypes.CDLL(None, use_errno=True); r = libc.renameat2(-100, sys.argv[1].encode(), -100, sys.argv[2].encode(), 2); print("ok" if r == 0 else errno.errorcode[ctypes.get_errno()])' ${a} ${b}`;

describe('RENAME_EXCHANGE', () => {
  it('is refused outside the temp dir: neither name changes and the broker is not asked', async () => {
    fs.writeFileSync(path.join(ws, 'key.pem'), 'key\n');
    fs.writeFileSync(path.join(ws, 'evil.txt'), 'evil\n');
    const result = await bash(swap('key.pem', 'evil.txt'));
    expect(result.stdout).toBe('EPERM\n');
    expect(fs.readFileSync(path.join(ws, 'key.pem'), 'utf8')).toBe('key\n');
    expect(fs.readFileSync(path.join(ws, 'evil.txt'), 'utf8')).toBe('evil\n');
    expect(broker.requests.filter((r) => r.op === 'rename')).toEqual([]);
  });

  it('works inside the temp dir, which is the command\'s own', async () => {
    fs.writeFileSync(path.join(scratch, 'a'), 'a\n');
    fs.writeFileSync(path.join(scratch, 'b'), 'b\n');
    const result = await bash(swap('"$SCRATCH/a"', '"$SCRATCH/b"'));
    expect(result.stdout, result.stderr).toBe('ok\n');
    expect(fs.readFileSync(path.join(scratch, 'a'), 'utf8')).toBe('b\n');
  });
});

describe('a thread swapping the path under the supervisor', () => {
  // Same length as the secret's path so the racer can flip the buffer byte for byte.
  const sameLength = (dir: string) => {
    const name = 'x'.repeat(secret.length - dir.length - 1);
    if (name.length < 1) throw new Error('temp dir names too long for the racer');
    const p = path.join(dir, name);
    fs.writeFileSync(p, 'allowed\n');
    return p;
  };

  it('never truncates the denied file when the allowed path is in the workspace (broker path)', async () => {
    const allowed = sameLength(ws);
    const result = await runSandboxed([path.join(bin, 'racer'), allowed, secret, '1500'], {
      cwd: ws,
      broker,
      scratch: [scratch],
    });
    expect(result.code, result.stderr).toBe(0);
    const [, opened = 0, refused = 0] = /opened (\d+) refused (\d+)/.exec(result.stdout)?.map(Number) ?? [];
    expect(opened).toBeGreaterThan(0);
    expect(refused).toBeGreaterThan(0);
    untouched();
    expect(fs.readFileSync(allowed, 'utf8')).toBe('R');
  });

  it.each(['rdtrunc', 'truncate'])('never truncates the denied file from scratch with %s (no write access: Landlock TRUNCATE catches swaps)', async (mode) => {
    const allowed = sameLength(scratch);
    const result = await runSandboxed([path.join(bin, 'racer'), allowed, secret, '15000', mode], { cwd: ws, broker, scratch: [scratch] });
    expect(result.code, result.stderr).toBe(0);
    const [, opened = 0, refused = 0] = /opened (\d+) refused (\d+)/.exec(result.stdout)?.map(Number) ?? [];
    expect(opened).toBeGreaterThan(0);
    expect(refused).toBeGreaterThan(0);
    untouched();
  });

  it('never truncates the denied file when the allowed path is in scratch (CONTINUE, Landlock catches swaps)', async () => {
    const allowed = sameLength(scratch);
    const result = await runSandboxed([path.join(bin, 'racer'), allowed, secret, '15000'], {
      cwd: ws,
      broker,
      scratch: [scratch],
    });
    expect(result.code, result.stderr).toBe(0);
    const [, opened = 0, refused = 0] = /opened (\d+) refused (\d+)/.exec(result.stdout)?.map(Number) ?? [];
    expect(opened).toBeGreaterThan(0);
    expect(refused).toBeGreaterThan(0);
    untouched();
  });
});
