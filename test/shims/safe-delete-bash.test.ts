import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tempDir, type ServeHandle } from '../helpers/serve-process.js';
import {
  BASH_SHIM,
  SHIMS,
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

/** A non-interactive bash with the shims loaded the way env.sh loads them: BASH_ENV. */
const bash = (script: string, env: NodeJS.ProcessEnv) => runProcess('bash', ['-c', script], { env: { ...env, BASH_ENV: BASH_SHIM }, cwd: ws });

beforeAll(async () => {
  serve = await startPolicyServe();
  ws = serve.workspace;
});
afterAll(() => serve.cleanup());

describe('bash rm/unlink/rmdir through the broker', () => {
  it('the functions are what rm, unlink and rmdir mean in a BASH_ENV bash', async () => {
    const ran = await bash('type -t rm unlink rmdir', brokerEnv(serve));
    expect(ran.stdout.split('\n').filter(Boolean)).toEqual(['function', 'function', 'function']);
  });

  it('success: rm exits 0, the file is in the trash with its bytes, the turn has its backup', async () => {
    const file = makeFile(ws);
    const ran = await bash(`rm ${path.basename(file.path)}; echo "status=$?"`, brokerEnv(serve));
    expect(ran.stdout).toBe('status=0\n');
    expect(ran.stderr).toBe('');
    expectTrashed(serve, file);
    await expectBackedUp(serve, [file], 'bash success');
  });

  it('rm -rf of a directory tree: the tree is in the trash, every file backed up', async () => {
    const dir = path.join(ws, 'tree-bash');
    const a = makeFile(dir, 'a.txt');
    const b = makeFile(path.join(dir, 'sub'), 'b.txt');
    const ran = await bash('rm -rf tree-bash', brokerEnv(serve));
    expect(ran.code).toBe(0);
    expect(existsSync(dir)).toBe(false);
    expect(readFileSync(path.join(trashDir(serve), 'files', 'tree-bash', 'sub', 'b.txt'))).toEqual(b.bytes);
    await expectBackedUp(serve, [a, b], 'bash rm -rf');
  });

  it('deny (outside the workspace): non-zero, the broker\'s reason on stderr, file untouched', async () => {
    const file = makeFile(outsideDir(serve));
    const ran = await bash(`rm -f '${file.path}'`, brokerEnv(serve));
    expect(ran.code).toBe(1);
    expect(ran.stderr).toContain('brokered-shell safe-delete: denied:');
    expect(ran.stderr).toContain('outside the writable roots');
    expectUntouched(serve, file);
    await expectNoBackup(serve, [file], 'bash deny outside');
  });

  it('deny (policy rule): rm keep.txt fails, and no local fallback happens', async () => {
    const file = makeFile(ws, 'keep.txt');
    const ran = await bash('rm keep.txt', brokerEnv(serve));
    expect(ran.code).toBe(1);
    expect(ran.stderr).toContain('matches rule keep.txt');
    expectUntouched(serve, file);
  });

  it('rm goes on after a denied operand, like rm, and reports failure at the end', async () => {
    const keep = makeFile(path.join(ws, 'mixed-bash'), 'keep.txt');
    const other = makeFile(path.join(ws, 'mixed-bash'));
    const ran = await bash(`rm mixed-bash/keep.txt 'mixed-bash/${path.basename(other.path)}'`, brokerEnv(serve));
    expect(ran.code).toBe(1);
    expectUntouched(serve, keep);
    expectTrashed(serve, other);
  });

  it('rm -f of a missing file: 0 and silent; without -f: 1 with a message', async () => {
    const forced = await bash('rm -f does-not-exist.txt; echo "status=$?"', brokerEnv(serve));
    expect(forced.stdout).toBe('status=0\n');
    expect(forced.stderr).toBe('');
    const plain = await bash('rm does-not-exist.txt', brokerEnv(serve));
    expect(plain.code).toBe(1);
    expect(plain.stderr).toContain("cannot delete 'does-not-exist.txt': No such file or directory");
  });

  it('rm of a directory needs -r (or -d when empty); options may follow operands', async () => {
    const dir = path.join(ws, 'dir-bash');
    const inner = makeFile(dir);
    const refused = await bash('rm dir-bash', brokerEnv(serve));
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('Is a directory');
    expect((await bash('rm -d dir-bash', brokerEnv(serve))).code).toBe(1);
    expectUntouched(serve, inner);
    expect((await bash('rm dir-bash -R', brokerEnv(serve))).code).toBe(0);
    expect(existsSync(dir)).toBe(false);
    mkdirSync(path.join(ws, 'empty-bash'));
    expect((await bash('rm -d empty-bash', brokerEnv(serve))).code).toBe(0);
    expect(existsSync(path.join(trashDir(serve), 'files', 'empty-bash'))).toBe(true);
  });

  it('rm -v prints what it removed; -- ends the options', async () => {
    const file = makeFile(ws, '-dash.txt');
    const ran = await bash('rm -v -- -dash.txt', brokerEnv(serve));
    expect(ran.code).toBe(0);
    expect(ran.stdout).toBe("removed '-dash.txt'\n");
    expectTrashed(serve, file);
  });

  it('unlink: success, deny, and a directory is refused', async () => {
    const file = makeFile(ws);
    expect((await bash(`unlink '${file.path}'`, brokerEnv(serve))).code).toBe(0);
    expectTrashed(serve, file);
    const keep = makeFile(path.join(ws, 'unlink-deny'), 'keep.txt');
    const denied = await bash('unlink unlink-deny/keep.txt', brokerEnv(serve));
    expect(denied.code).toBe(1);
    expect(denied.stderr).toContain('denied:');
    expectUntouched(serve, keep);
    const dir = await bash('unlink unlink-deny', brokerEnv(serve));
    expect(dir.code).toBe(1);
    expect(dir.stderr).toContain('Is a directory');
    await expectBackedUp(serve, [file], 'bash unlink');
  });

  it('rmdir: an empty directory goes to the trash, a non-empty one stays; -p climbs; --ignore-fail-on-non-empty', async () => {
    mkdirSync(path.join(ws, 'p1', 'p2', 'p3'), { recursive: true });
    const ran = await bash('rmdir -pv p1/p2/p3/', brokerEnv(serve));
    expect(ran.code).toBe(0);
    expect(ran.stdout.split('\n').filter(Boolean)).toEqual([
      "rmdir: removing directory, 'p1/p2/p3/'",
      "rmdir: removing directory, 'p1/p2'",
      "rmdir: removing directory, 'p1'",
    ]);
    expect(existsSync(path.join(ws, 'p1'))).toBe(false);

    const full = makeFile(path.join(ws, 'full-dir'));
    const refused = await bash('rmdir full-dir', brokerEnv(serve));
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('Directory not empty');
    expect((await bash('rmdir --ignore-fail-on-non-empty full-dir', brokerEnv(serve))).code).toBe(0);
    expectUntouched(serve, full);
    const notDir = await bash(`rmdir 'full-dir/${path.basename(full.path)}'`, brokerEnv(serve));
    expect(notDir.code).toBe(1);
    expect(notDir.stderr).toContain('Not a directory');
    expectUntouched(serve, full);
  });

  it('rm -i is refused (nobody can answer, and the real rm would delete for good)', async () => {
    const file = makeFile(ws);
    for (const option of ['-i', '-I', '-fi', '--interactive', '--interactive=always', '--inter']) {
      const ran = await bash(`rm ${option} '${file.path}'`, brokerEnv(serve));
      expect(ran.code, option).toBe(1);
      expect(ran.stderr).toContain('interactive removal');
    }
    expectUntouched(serve, file);
    expect((await bash(`rm --interactive=never '${file.path}'`, brokerEnv(serve))).code).toBe(0);
    expectTrashed(serve, file);
  });

  it('unknown options run the real command unchanged; abbreviated long options are understood', async () => {
    const file = makeFile(ws);
    const bad = await bash(`rm -x '${file.path}'`, brokerEnv(serve));
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/^rm: invalid option -- 'x'/);
    expectUntouched(serve, file);
    const help = await bash('rm --help', brokerEnv(serve));
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^Usage: rm /);
    const dir = path.join(ws, 'abbrev');
    const inner = makeFile(dir);
    expect((await bash('rm --rec --forc abbrev', brokerEnv(serve))).code).toBe(0);
    expect(existsSync(dir)).toBe(false);
    expect(readFileSync(path.join(trashDir(serve), 'files', 'abbrev', path.basename(inner.path)))).toEqual(inner.bytes);
  });

  it('works under set -euo pipefail', async () => {
    const file = makeFile(ws);
    const ran = await bash(`set -euo pipefail; rm '${file.path}'; rm -f missing-too; echo after`, brokerEnv(serve));
    expect(ran.stdout).toBe('after\n');
    expectTrashed(serve, file);
    const keep = makeFile(path.join(ws, 'strict'), 'keep.txt');
    const stopped = await bash('set -e; rm strict/keep.txt; echo not-reached', brokerEnv(serve));
    expect(stopped.code).toBe(1);
    expect(stopped.stdout).toBe('');
    expectUntouched(serve, keep);
  });

  it('a client that cannot run: rm fails closed, nothing deleted', async () => {
    const file = makeFile(ws);
    const ran = await bash(`rm '${file.path}'`, brokerEnv(serve, { BROKERED_SHELL_NODE: path.join(ws, 'no-node-here') }));
    expect(ran.code).toBe(1);
    expect(ran.stderr).toContain('cannot run the safe-delete client');
    expectUntouched(serve, file);
  });
});

describe('bash shims when the broker is down', () => {
  it('socket variable names a dead path: rm exits 0 and the file is in the local trash (no backup)', async () => {
    const file = makeFile(ws);
    const ran = await bash(`rm '${file.path}'; echo "status=$?"`, downEnv(serve));
    expect(ran.stdout).toBe('status=0\n');
    expect(ran.stderr).toContain('broker unreachable');
    expectTrashed(serve, file);
    await expectNoBackup(serve, [file], 'bash down');
  });

  it('rm of several operands falls back as a whole; each problem is said once', async () => {
    const file = makeFile(ws);
    const ran = await bash(`rm -v missing-down.txt '${path.basename(file.path)}'`, downEnv(serve));
    expect(ran.code).toBe(1);
    expect(ran.stdout).toBe(`removed '${path.basename(file.path)}'\n`);
    const lines = ran.stderr.trim().split('\n');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toContain('broker unreachable');
    expect(lines[1]).toBe("brokered-shell safe-delete: cannot delete 'missing-down.txt': No such file or directory");
    expectTrashed(serve, file);
  });

  it('no socket variable: quietly the local trash; rm -r, unlink and rmdir too', async () => {
    const env = brokerEnv(serve);
    delete env.BROKERED_SHELL_SOCKET;
    const file = makeFile(ws);
    const linked = makeFile(ws);
    const dir = path.join(ws, 'tree-down');
    const inner = makeFile(dir);
    mkdirSync(path.join(ws, 'empty-down'));
    const ran = await bash(`rm '${file.path}' && rm -r tree-down && unlink '${linked.path}' && rmdir empty-down && echo ok`, env);
    expect(ran.stdout).toBe('ok\n');
    expect(ran.stderr).toBe('');
    expectTrashed(serve, file);
    expectTrashed(serve, linked);
    expect(readFileSync(path.join(trashDir(serve), 'files', 'tree-down', path.basename(inner.path)))).toEqual(inner.bytes);
    expect(existsSync(path.join(trashDir(serve), 'files', 'empty-down'))).toBe(true);
  });
});

describe('bash shims and a broker that never answers', () => {
  it('rm fails after the timeout (no fallback), file untouched', async () => {
    const silent = await silentBroker(tempDir('bsh-sd-silent-'));
    try {
      const file = makeFile(ws);
      const ran = await bash(`rm '${file.path}'`, brokerEnv(serve, { BROKERED_SHELL_SOCKET: silent.socket, BROKERED_SHELL_CLIENT_TIMEOUT_MS: '300' }));
      expect(ran.code).toBe(1);
      expect(ran.stderr).toContain('did not answer within 300 ms');
      expectUntouched(serve, file);
    } finally {
      await silent.close();
    }
  });
});

describe('env.sh', () => {
  it('prints the variables, and a bash started with them has the shims', async () => {
    const printed = await runProcess('bash', [path.join(SHIMS, 'env.sh')], { env: brokerEnv(serve), cwd: ws });
    expect(printed.code).toBe(0);
    const vars = Object.fromEntries([...printed.stdout.matchAll(/^export ([A-Z_]+)='(.*)'$/gm)].map((m) => [m[1] ?? '', m[2] ?? '']));
    expect(vars).toEqual({
      BROKERED_SHELL_SAFE_DELETE_CLIENT: path.join(SHIMS, 'broker-delete.cjs'),
      NODE_OPTIONS: `--require "${path.join(SHIMS, 'node-safe-delete.cjs')}"`,
      PYTHONPATH: path.join(SHIMS, 'python'),
      BASH_ENV: BASH_SHIM,
    });
    const file = makeFile(ws);
    const script = path.join(tempDir('bsh-sd-env-'), 'script.sh');
    writeFileSync(script, `rm '${file.path}'\n`);
    const ran = await runProcess('bash', ['-c', `source '${path.join(SHIMS, 'env.sh')}' && bash '${script}' && echo done`], { env: brokerEnv(serve), cwd: ws });
    expect(ran.stdout).toBe('done\n');
    expectTrashed(serve, file);
    await expectBackedUp(serve, [file], 'bash via env.sh');
  });
});
