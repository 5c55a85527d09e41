import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tempDir, type ServeHandle } from '../helpers/serve-process.js';
import {
  CLIENT,
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
  staleSocket,
  startPolicyServe,
  trashDir,
} from './safe-delete-helpers.js';

let serve: ServeHandle;
let ws: string;
const client = (args: string[], env: NodeJS.ProcessEnv, cwd = ws) => runProcess(process.execPath, [CLIENT, ...args], { env, cwd });

beforeAll(async () => {
  serve = await startPolicyServe();
  ws = serve.workspace;
});
afterAll(() => serve.cleanup());

describe('safe-delete client: broker answers', () => {
  it('success: exit 0, the file is in the trash with its bytes, and the turn has its backup', async () => {
    const file = makeFile(ws);
    const ran = await client([path.basename(file.path)], brokerEnv(serve));
    expect(ran.code).toBe(0);
    expect(ran.stderr).toMatch(/^brokered-shell safe-delete: moved '.*' to the trash .*backed it up\n$/);
    expectTrashed(serve, file);
    await expectBackedUp(serve, [file], 'client success');
  });

  it('several paths in one call, relative and absolute', async () => {
    const a = makeFile(ws);
    const b = makeFile(path.join(ws, 'sub'));
    const ran = await client(['--', path.basename(a.path), b.path], brokerEnv(serve));
    expect(ran.code).toBe(0);
    expectTrashed(serve, a);
    expectTrashed(serve, b);
    await expectBackedUp(serve, [a, b], 'client two paths');
  });

  it('deny (outside the workspace): exit 1, the broker\'s reason on stderr, file untouched, nothing backed up', async () => {
    const file = makeFile(outsideDir(serve));
    const ran = await client([file.path], brokerEnv(serve));
    expect(ran.code).toBe(1);
    expect(ran.stderr).toContain('brokered-shell safe-delete: denied:');
    expect(ran.stderr).toContain('outside the writable roots');
    expectUntouched(serve, file);
    await expectNoBackup(serve, [file], 'client deny outside');
  });

  it('deny (policy rule keep.txt): exit 1, file untouched', async () => {
    const file = makeFile(ws, 'keep.txt');
    const ran = await client(['keep.txt'], brokerEnv(serve));
    expect(ran.code).toBe(1);
    expect(ran.stderr).toMatch(/denied: .*keep\.txt.*matches rule keep\.txt/);
    expectUntouched(serve, file);
    await expectNoBackup(serve, [file], 'client deny rule');
  });

  it('a deny among several paths: the others are still trashed, exit 1', async () => {
    const keep = makeFile(path.join(ws, 'mixed'), 'keep.txt');
    const other = makeFile(path.join(ws, 'mixed'));
    const ran = await client([keep.path, other.path], brokerEnv(serve));
    expect(ran.code).toBe(1);
    expectUntouched(serve, keep);
    expectTrashed(serve, other);
    await expectBackedUp(serve, [other], 'client mixed');
  });

  it('--recursive: a whole tree goes to the trash; every file is backed up', async () => {
    const dir = path.join(ws, 'tree-client');
    const a = makeFile(dir, 'a.txt');
    const b = makeFile(path.join(dir, 'deep'), 'b.txt');
    const ran = await client(['--recursive', 'tree-client'], brokerEnv(serve));
    expect(ran.code).toBe(0);
    expect(existsSync(dir)).toBe(false);
    expect(readFileSync(path.join(trashDir(serve), 'files', 'tree-client', 'a.txt'))).toEqual(a.bytes);
    expect(readFileSync(path.join(trashDir(serve), 'files', 'tree-client', 'deep', 'b.txt'))).toEqual(b.bytes);
    await expectBackedUp(serve, [a, b], 'client tree');
  });

  it('a directory without --recursive is refused (EISDIR), a non-empty one with --dir too (ENOTEMPTY)', async () => {
    const dir = path.join(ws, 'dir-client');
    const inner = makeFile(dir);
    const plain = await client(['dir-client'], brokerEnv(serve));
    expect(plain.code).toBe(1);
    expect(plain.stderr).toContain('Is a directory');
    const withDir = await client(['--dir', 'dir-client'], brokerEnv(serve));
    expect(withDir.code).toBe(1);
    expect(withDir.stderr).toContain('Directory not empty');
    expectUntouched(serve, inner);
  });

  it('--rmdir: an empty directory is trashed, a file is refused (ENOTDIR)', async () => {
    mkdirSync(path.join(ws, 'empty-client'));
    const file = makeFile(ws);
    expect((await client(['--rmdir', 'empty-client'], brokerEnv(serve))).code).toBe(0);
    expect(existsSync(path.join(ws, 'empty-client'))).toBe(false);
    expect(existsSync(path.join(trashDir(serve), 'files', 'empty-client'))).toBe(true);
    const refused = await client(['--json', '--rmdir', file.path], brokerEnv(serve));
    expect(refused.code).toBe(1);
    expect(JSON.parse(refused.stdout)).toMatchObject({ outcome: 'failed', errno: 'ENOTDIR' });
    expectUntouched(serve, file);
  });

  it('a missing file: exit 1 without --force, exit 0 with it', async () => {
    const missing = await client(['--json', 'no-such-file.txt'], brokerEnv(serve));
    expect(missing.code).toBe(1);
    expect(JSON.parse(missing.stdout)).toMatchObject({ outcome: 'failed', errno: 'ENOENT', path: 'no-such-file.txt' });
    const forced = await client(['--force', 'no-such-file.txt'], brokerEnv(serve));
    expect(forced.code).toBe(0);
    expect(forced.stderr).toContain('does not exist; nothing to delete');
  });

  it("refuses '.', '..' and '/' whatever they resolve to", async () => {
    for (const target of ['.', '..', 'sub/..', '/', `${ws}/.`]) {
      const ran = await client(['--recursive', '--force', target], brokerEnv(serve));
      expect(ran.code, target).toBe(1);
      expect(ran.stderr).toContain('refusing to delete');
    }
    expect(existsSync(ws)).toBe(true);
  });

  it('--json reports one line per path with the outcome and where it went', async () => {
    const file = makeFile(ws);
    const ran = await client(['--json', file.path], brokerEnv(serve));
    expect(ran.code).toBe(0);
    const report = JSON.parse(ran.stdout) as Record<string, unknown>;
    expect(report).toMatchObject({ outcome: 'trashed', via: 'broker', path: file.path });
    expect(report.trashedTo).toBe(expectTrashed(serve, file));
    expect(ran.stderr).toBe('');
    await expectBackedUp(serve, [file], 'client json');
  });

  it('usage errors exit 1 and delete nothing', async () => {
    const file = makeFile(ws);
    expect((await client(['--bogus', file.path], brokerEnv(serve))).code).toBe(1);
    expect((await client([], brokerEnv(serve))).code).toBe(1);
    expectUntouched(serve, file);
  });
});

describe('safe-delete client: broker unreachable', () => {
  it('socket path where nothing listens: exit 2, file untouched, stderr says unreachable', async () => {
    const file = makeFile(ws);
    const ran = await client([file.path], downEnv(serve));
    expect(ran.code).toBe(2);
    expect(ran.stderr).toMatch(/brokered-shell safe-delete: broker unreachable \(cannot connect to .*: ENOENT\)/);
    expectUntouched(serve, file);
  });

  it('exit 2 means nothing was sent: what was said about earlier paths is held back for the --local run', async () => {
    const file = makeFile(ws);
    const ran = await client(['--quiet', 'missing-before.txt', file.path], downEnv(serve));
    expect(ran.code).toBe(2);
    expect(ran.stderr.trim().split('\n')).toEqual([expect.stringMatching(/^brokered-shell safe-delete: broker unreachable/)]);
    expectUntouched(serve, file);
    const local = await client(['--quiet', '--local', 'missing-before.txt', file.path], downEnv(serve));
    expect(local.code).toBe(1);
    expect(local.stderr).toBe("brokered-shell safe-delete: cannot delete 'missing-before.txt': No such file or directory\n");
    expectTrashed(serve, file);
  });

  it('no BROKERED_SHELL_SOCKET at all: exit 2', async () => {
    const file = makeFile(ws);
    const env = brokerEnv(serve);
    delete env.BROKERED_SHELL_SOCKET;
    const ran = await client([file.path], env);
    expect(ran.code).toBe(2);
    expect(ran.stderr).toContain('BROKERED_SHELL_SOCKET is not set');
    expectUntouched(serve, file);
  });

  it('a stale socket file (connection refused): exit 2', async () => {
    const file = makeFile(ws);
    const stale = await staleSocket(tempDir('bsh-sd-stale-'));
    const ran = await client([file.path], brokerEnv(serve, { BROKERED_SHELL_SOCKET: stale }));
    expect(ran.code).toBe(2);
    expect(ran.stderr).toContain('ECONNREFUSED');
    expectUntouched(serve, file);
  });

  it('--local: the fallback moves the file to the local trash itself (no broker, no backup)', async () => {
    const file = makeFile(ws);
    const ran = await client(['--local', file.path], downEnv(serve));
    expect(ran.code).toBe(0);
    expect(ran.stderr).toContain('to the local trash');
    expectTrashed(serve, file);
    await expectNoBackup(serve, [file], 'client local');
  });

  it('--local --recursive trashes a tree; --local never deletes permanently when the trash is unusable', async () => {
    const dir = path.join(ws, 'tree-local');
    const a = makeFile(path.join(dir, 'x'));
    expect((await client(['--local', '--recursive', dir], downEnv(serve))).code).toBe(0);
    expect(readFileSync(path.join(trashDir(serve), 'files', 'tree-local', 'x', path.basename(a.path)))).toEqual(a.bytes);

    // XDG_DATA_HOME under a regular file: no trash can be made there.
    const blocker = path.join(tempDir('bsh-sd-blocked-'), 'not-a-dir');
    writeFileSync(blocker, 'x');
    const file = makeFile(ws);
    const ran = await client(['--local', file.path], downEnv(serve, { XDG_DATA_HOME: path.join(blocker, 'data'), HOME: path.join(blocker, 'home') }));
    expect(ran.code).toBe(1);
    expect(ran.stderr).toContain('brokered-shell safe-delete: cannot delete');
    expect(readFileSync(file.path)).toEqual(file.bytes);
  });
});

describe('safe-delete client: a broker that accepts but never answers', () => {
  it('exit 1 after the timeout (fail closed, not a fallback), file untouched', async () => {
    const silent = await silentBroker(tempDir('bsh-sd-silent-'));
    try {
      const file = makeFile(ws);
      const ran = await client([file.path], brokerEnv(serve, { BROKERED_SHELL_SOCKET: silent.socket, BROKERED_SHELL_CLIENT_TIMEOUT_MS: '300' }));
      expect(ran.code).toBe(1);
      expect(ran.stderr).toMatch(/accepted the connection but did not answer within 300 ms; '.*' was not deleted \(failing closed, no fallback\)/);
      expect(silent.connections()).toBe(1);
      expectUntouched(serve, file);
    } finally {
      await silent.close();
    }
  });
});
