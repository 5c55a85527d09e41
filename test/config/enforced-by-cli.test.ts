/**
 * `run` and `serve` enforce the configuration files, not only `config show`: the home
 * config, the project's `.brokered-shell.json` (and its own protection), `--policy` on
 * top; an invalid file runs nothing. Real processes, the kernel sandbox, a real socket.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cli, tempDir } from '../cli/helpers.js';
import { ask, startServe, tempDir as serveTempDir, type ServeHandle } from '../helpers/serve-process.js';

const PROJECT_RULES = JSON.stringify({ fileSafety: { rules: [{ pattern: '*.lock', decision: 'deny' }] } });

/** A store home and a workspace beside it (inside the home, everything is the broker's own). */
async function setUp() {
  const base = await tempDir('bsh-config-run-');
  const home = path.join(base, 'home');
  const ws = path.join(base, 'ws');
  mkdirSync(home);
  mkdirSync(ws);
  return { base, home, ws, run: (command: string, flags: string[] = []) => cli(['run', '--workspace', ws, ...flags, '--', command], { home }) };
}

describe('run enforces the configuration files', () => {
  it("applies the project's deny rule", async () => {
    const { ws, run } = await setUp();
    writeFileSync(path.join(ws, '.brokered-shell.json'), PROJECT_RULES);
    const result = run('echo x > deps.lock; echo "status $?"; echo y > notes.txt');
    expect(result.status).toBe(0);
    expect(result.stdout).toBe('status 1\n');
    expect(result.stderr).toContain(`brokered-shell: denied write ${path.join(ws, 'deps.lock')}: ${path.join(ws, 'deps.lock')} matches rule *.lock (deny for write)`);
    expect(existsSync(path.join(ws, 'deps.lock'))).toBe(false);
    expect(readFileSync(path.join(ws, 'notes.txt'), 'utf8')).toBe('y\n');
  });

  it('protects .brokered-shell.json itself: changing it needs approval', async () => {
    const { ws, run } = await setUp();
    writeFileSync(path.join(ws, '.brokered-shell.json'), PROJECT_RULES);
    const result = run('echo "{}" > .brokered-shell.json');
    expect(result.status).toBe(77);
    expect(result.stderr).toContain(`brokered-shell: needs approval: write ${path.join(ws, '.brokered-shell.json')}`);
    expect(readFileSync(path.join(ws, '.brokered-shell.json'), 'utf8')).toBe(PROJECT_RULES);
  });

  it("applies the home config's writable roots, and --policy adds to it", async () => {
    const { base, home, run } = await setUp();
    const extra = path.join(base, 'extra-root');
    const byPolicy = path.join(base, 'policy-root');
    mkdirSync(extra);
    mkdirSync(byPolicy);
    writeFileSync(path.join(home, 'config.json'), JSON.stringify({ writableRoots: [extra] }));
    writeFileSync(path.join(base, 'policy.json'), JSON.stringify({ writableRoots: [byPolicy] }));
    const result = run(`echo a > ${extra}/a.txt && echo b > ${byPolicy}/b.txt && echo ok`, ['--policy', path.join(base, 'policy.json')]);
    expect(result.status, result.stderr).toBe(0);
    expect(readFileSync(path.join(extra, 'a.txt'), 'utf8')).toBe('a\n');
    expect(readFileSync(path.join(byPolicy, 'b.txt'), 'utf8')).toBe('b\n');
    // Without the home config, the same root is outside what may be written.
    writeFileSync(path.join(home, 'config.json'), '{}');
    expect(run(`echo again > ${extra}/a.txt`).stderr).toContain(`brokered-shell: denied write ${path.join(extra, 'a.txt')}`);
    expect(readFileSync(path.join(extra, 'a.txt'), 'utf8')).toBe('a\n');
  });

  it.each([
    ['sandbox.enabled: false', { sandbox: { enabled: false } }, 'the configuration turns the sandbox off (sandbox.enabled: false)'],
    ['an excluded command', { sandbox: { excludedCommands: ['touch'] } }, "the command is listed in the configuration's sandbox.excludedCommands"],
  ])('says so when %s runs the command outside the sandbox', async (_label, homeConfig, why) => {
    const { home, ws, run } = await setUp();
    writeFileSync(path.join(home, 'config.json'), JSON.stringify(homeConfig));
    const result = run('touch made');
    expect(result.status).toBe(0);
    expect(result.stderr).toBe(`brokered-shell run: ${why}: the command ran without the sandbox and the broker, nothing was checked or backed up\n`);
    expect(existsSync(path.join(ws, 'made'))).toBe(true);
  });

  it('an invalid project file: exit 126, the file and key named, nothing run', async () => {
    const { ws, run } = await setUp();
    writeFileSync(path.join(ws, '.brokered-shell.json'), JSON.stringify({ writableRoots: ['/'] }));
    const result = run('touch ran');
    expect(result.status).toBe(126);
    expect(result.stderr).toContain(`${path.join(ws, '.brokered-shell.json')}:\n    - writableRoots: refused`);
    expect(existsSync(path.join(ws, 'ran'))).toBe(false);
  });
});

describe('serve enforces the configuration files', () => {
  let serve: ServeHandle | undefined;
  afterAll(() => serve?.cleanup());

  it("answers DENY for what the project's rule denies, SANDBOX beside it", async () => {
    const ws = serveTempDir('bsh-config-serve-ws-');
    writeFileSync(path.join(ws, '.brokered-shell.json'), PROJECT_RULES);
    serve = await startServe({ workspace: ws });
    expect(await ask(serve.socket, `x.read-write\t${path.join(ws, 'deps.lock')}\ts1\tt1`)).toBe('DENY');
    expect(await ask(serve.socket, `x.read-write\t${path.join(ws, 'notes.txt')}\ts1\tt1`)).toBe('SANDBOX');
  });
});
