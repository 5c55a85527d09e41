import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, lstatSync, mkdirSync, readFileSync, readdirSync, readlinkSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { BackupHome } from '../../src/backup/index.js';
import { findProgram, fromDebian, requirePrograms } from '../helpers/debian-packages.js';
import { REPO_ROOT, startServe, tempDir, type ServeHandle } from '../helpers/serve-process.js';

const BIN = path.join(REPO_ROOT, 'shims', 'brokered-bin');
const ENV_SCRIPT = path.join(REPO_ROOT, 'shims', 'brokered-env.sh');
const CLIENT = path.join(REPO_ROOT, 'build', 'Release', 'brokered-request');
const APPLETS = 'cat chmod cp dd find grep head ln ls mkdir mv readlink realpath rm rmdir sed tail tee touch truncate unlink wc'.split(' ');

const READY = requirePrograms([
  ['toybox', fromDebian('toybox')],
  [CLIENT, 'build it with `npx node-gyp rebuild`'],
]);
/** The real toybox, found once; the wrapper below logs each call and execs it. */
const TOYBOX = findProgram('toybox') ?? 'toybox';

interface Result {
  status: number | null;
  stdout: string;
  stderr: string;
}

let base: string;
let ws: string;
let wrapper: string;
let log: string;
let cache: string;

beforeEach(() => {
  if (!READY) return;
  base = tempDir('bsh-dispatch-');
  ws = path.join(base, 'ws');
  cache = path.join(base, 'cache');
  log = path.join(base, 'toybox.log');
  wrapper = path.join(base, 'toybox-logged');
  mkdirSync(ws);
  // One line per call: each argument in brackets.
  writeFileSync(wrapper, `#!/bin/sh\nfor a in "$@"; do printf '[%s]' "$a"; done >> '${log}'\necho >> '${log}'\nexec '${TOYBOX}' "$@"\n`);
  chmodSync(wrapper, 0o755);
});
afterEach(() => rmSync(base, { recursive: true, force: true }));

/** The environment brokered-env.sh gives a shell, with no broker unless a test adds one. */
function dispatchEnv(extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PATH: `${BIN}:${process.env.PATH ?? ''}`,
    BROKERED_SHELL_BIN_DIR: BIN,
    BROKERED_SHELL_TOYBOX: wrapper,
    BROKERED_SHELL_REQUEST: CLIENT,
    BROKERED_SHELL_CACHE_DIR: cache,
    BROKERED_SHELL_SOCKET: undefined,
    BROKERED_SHELL_SESSION_ID: undefined,
    BROKERED_SHELL_TOOL_CALL_ID: undefined,
    BROKERED_SHELL_TRACE_ID: undefined,
    ...extra,
  };
  return env;
}

/** Runs a link (or the dispatcher) as a plain process, without blocking this event loop. */
function run(command: string, args: string[], options: { cwd?: string; input?: string; env?: Record<string, string | undefined> } = {}): Promise<Result> {
  return new Promise((resolve, reject) => {
    const file = command.includes('/') ? command : path.join(BIN, command);
    const child = spawn(file, args, { cwd: options.cwd ?? ws, env: dispatchEnv(options.env), stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += String(chunk)));
    child.stderr.on('data', (chunk) => (stderr += String(chunk)));
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, stdout, stderr }));
    child.stdin.on('error', () => undefined);
    child.stdin.end(options.input ?? '');
  });
}

/** Calls of the toybox wrapper that ran an applet (not the --help and list look-ups). */
function toyboxRuns(): string[] {
  if (!existsSync(log)) return [];
  return readFileSync(log, 'utf8')
    .split('\n')
    .filter((line) => line !== '' && !line.endsWith('[--help]'));
}

const explain = async (args: string[]) => (await run('brokered-dispatch', ['--explain', ...args])).stdout.trim();

function seed(files: Record<string, string>): void {
  for (const [name, content] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(ws, name)), { recursive: true });
    writeFileSync(path.join(ws, name), content);
  }
}

describe('command files', () => {
  it('every command is an executable file (archives drop links) that sources brokered-dispatch', () => {
    for (const applet of APPLETS) {
      const file = path.join(BIN, applet);
      const info = lstatSync(file);
      expect(info.isFile(), applet).toBe(true);
      expect(info.mode & 0o111, applet).toBe(0o111);
      expect(readFileSync(file, 'utf8'), applet).toMatch(/\n\. "\$\{__bsh_wrapper%\/\*\}\/brokered-dispatch" "\$@"\n$/);
    }
    const entries = readdirSync(BIN).filter((name) => name !== 'README.md' && name !== 'brokered-dispatch');
    expect(entries.sort()).toEqual([...APPLETS].sort());
  });

  it('runs as its own name when called by a relative path with no directory (bash wc)', async () => {
    writeFileSync(path.join(ws, 'three.txt'), 'a\nb\nc\n');
    const result = spawnSync('bash', ['wc', '-l', path.join(ws, 'three.txt')], { cwd: BIN, env: dispatchEnv(), encoding: 'utf8' });
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout.trim()).toBe(`3 ${path.join(ws, 'three.txt')}`);
  });

  it.each<[string, string[], (r: Result) => void]>([
    ['wc', ['-l', 'lines.txt'], (r) => expect(r.stdout.trim()).toBe('3 lines.txt')],
    ['cat', ['-e', 'lines.txt'], (r) => expect(r.stdout).toBe('a$\nb$\nc$\n')],
    ['head', ['-n', '2', 'lines.txt'], (r) => expect(r.stdout).toBe('a\nb\n')],
    ['head', ['-2', 'lines.txt'], (r) => expect(r.stdout).toBe('a\nb\n')],
    ['tail', ['-n', '1', 'lines.txt'], (r) => expect(r.stdout).toBe('c\n')],
    ['grep', ['-n', '-e', 'b', 'lines.txt'], (r) => expect(r.stdout).toBe('2:b\n')],
    ['sed', ['-n', '2p', 'lines.txt'], (r) => expect(r.stdout).toBe('b\n')],
    ['ls', ['-1', 'dir'], (r) => expect(r.stdout).toBe('inner.txt\n')],
    ['find', ['dir', '-name', '*.txt', '-type', 'f'], (r) => expect(r.stdout).toBe('dir/inner.txt\n')],
    ['realpath', ['dir/../lines.txt'], (r) => expect(r.stdout).toBe(`${ws}/lines.txt\n`)],
    ['readlink', ['link'], (r) => expect(r.stdout).toBe('lines.txt\n')],
    ['mkdir', ['-p', 'made/deeper'], () => expect(lstatSync(path.join(ws, 'made', 'deeper')).isDirectory()).toBe(true)],
    ['rmdir', ['empty'], () => expect(existsSync(path.join(ws, 'empty'))).toBe(false)],
    ['touch', ['touched'], () => expect(existsSync(path.join(ws, 'touched'))).toBe(true)],
    ['cp', ['lines.txt', 'copy.txt'], () => expect(readFileSync(path.join(ws, 'copy.txt'), 'utf8')).toBe('a\nb\nc\n')],
    ['mv', ['dir/inner.txt', 'moved.txt'], () => expect(readFileSync(path.join(ws, 'moved.txt'), 'utf8')).toBe('inner')],
    ['ln', ['-s', 'lines.txt', 'new-link'], () => expect(readlinkSync(path.join(ws, 'new-link'))).toBe('lines.txt')],
    ['chmod', ['600', 'lines.txt'], () => expect(lstatSync(path.join(ws, 'lines.txt')).mode & 0o777).toBe(0o600)],
    ['rm', ['-f', 'dir/inner.txt'], () => expect(existsSync(path.join(ws, 'dir', 'inner.txt'))).toBe(false)],
    ['unlink', ['lines.txt'], () => expect(existsSync(path.join(ws, 'lines.txt'))).toBe(false)],
    ['tee', ['-a', 'lines.txt'], () => expect(readFileSync(path.join(ws, 'lines.txt'), 'utf8')).toBe('a\nb\nc\nteed\n')],
    ['truncate', ['-s', '2', 'lines.txt'], () => expect(readFileSync(path.join(ws, 'lines.txt'), 'utf8')).toBe('a\n')],
  ])('%s %j runs as the toybox applet', async (applet, args, check) => {
    seed({ 'lines.txt': 'a\nb\nc\n', 'dir/inner.txt': 'inner' });
    mkdirSync(path.join(ws, 'empty'));
    spawnSync('ln', ['-s', 'lines.txt', path.join(ws, 'link')]);
    const result = await run(applet, args, { input: 'teed\n' });
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    check(result);
    expect(toyboxRuns()).toEqual([[applet, ...args].map((a) => `[${a}]`).join('')]);
  });

  it('the dispatcher named directly takes the applet as its first argument', async () => {
    seed({ 'lines.txt': 'a\nb\n' });
    const result = await run('brokered-dispatch', ['wc', '-l', 'lines.txt']);
    expect(result).toMatchObject({ status: 0, stdout: '2 lines.txt\n' });
    expect(toyboxRuns()).toEqual(['[wc][-l][lines.txt]']);
  });

  it('brokered-env.sh puts the bin dir first on PATH once, and names toybox and the client', () => {
    const script = `source '${ENV_SCRIPT}'; source '${ENV_SCRIPT}'; printf '%s\\n' "$PATH" "$BROKERED_SHELL_BIN_DIR" "$BROKERED_SHELL_TOYBOX" "$BROKERED_SHELL_REQUEST"; type -P wc`;
    const env = { ...process.env, BROKERED_SHELL_TOYBOX: undefined, BROKERED_SHELL_REQUEST: undefined, BROKERED_SHELL_BIN_DIR: undefined };
    const [pathLine, binDir, toybox, client, wc] = spawnSync('bash', ['-c', script], { env, encoding: 'utf8' }).stdout.split('\n');
    expect(binDir).toBe(BIN);
    expect(pathLine?.split(':').filter((entry) => entry === BIN)).toHaveLength(1);
    expect(pathLine?.startsWith(`${BIN}:`)).toBe(true);
    expect(toybox).toBe(TOYBOX);
    expect(client).toBe(CLIENT);
    expect(wc).toBe(path.join(BIN, 'wc'));
  });
});

describe('falling back to the system command', () => {
  it.each<[string, string[], string]>([
    ['an option toybox sed lacks', ['sed', '--debug', '-n', '2p', 'lines.txt'], 'b'],
    ['a long option toybox grep lacks', ['grep', '--color=never', 'b', 'lines.txt'], 'b\n'],
    ['a find primary toybox lacks', ['find', '.', '-regex', '.*/lines\\.txt'], './lines.txt\n'],
    ['an attached value toybox head does not list', ['head', '-c1', 'lines.txt'], 'a'],
  ])('%s: the system command runs and toybox does not', async (_label, [applet, ...args], expected) => {
    seed({ 'lines.txt': 'a\nb\nc\n' });
    const result = await run(applet ?? '', args);
    expect(result.status).toBe(0);
    expect(result.stdout).toContain(expected);
    expect(toyboxRuns()).toEqual([]);
  });

  it('dd, which toybox 0.8.9 lacks, runs as the system dd', async () => {
    seed({ a: 'new bytes', f: 'old' });
    const result = await run('dd', ['if=a', 'of=f']);
    expect(result.status).toBe(0);
    expect(result.stderr).toMatch(/records in/);
    expect(readFileSync(path.join(ws, 'f'), 'utf8')).toBe('new bytes');
    expect(toyboxRuns()).toEqual([]);
  });

  it('with no toybox at all every command falls back', async () => {
    seed({ 'lines.txt': 'a\nb\n' });
    const result = await run('wc', ['-l', 'lines.txt'], { env: { BROKERED_SHELL_TOYBOX: path.join(base, 'no-toybox') } });
    expect(result).toMatchObject({ status: 0, stdout: '2 lines.txt\n' });
  });

  it('the fallback runs without the bin dir on PATH, so it cannot come back to the dispatcher', async () => {
    const fake = path.join(base, 'fake-bin');
    mkdirSync(fake);
    // A "system sed" that shows the PATH it got and whether `sed` would find the dispatcher again.
    writeFileSync(path.join(fake, 'sed'), '#!/bin/sh\nprintf "%s\\n" "$PATH"\ntype sed\n');
    chmodSync(path.join(fake, 'sed'), 0o755);
    const result = await run('sed', ['--debug'], { env: { PATH: `${BIN}:${fake}:${BIN}/:/usr/bin:/bin` } });
    expect(result.status).toBe(0);
    const [pathLine, typeLine] = result.stdout.split('\n');
    expect(pathLine?.split(':')).toEqual([fake, '/usr/bin', '/bin']);
    expect(typeLine).toContain(path.join(fake, 'sed'));
  });

  it.each<[string[], string]>([
    [['rm', '--', '-odd'], 'toybox'],
    [['cat', '-', 'x'], 'toybox'],
    [['grep', '-e', '-x', 'f'], 'toybox'],
    [['grep', '-A1', '-B', '2', '-x', 'f'], 'toybox'],
    [['grep', '--exclude-dir=d', '--include', '*.c', 'x'], 'toybox'],
    [['tail', '-5', 'f'], 'toybox'],
    [['chmod', '-x', 'f'], 'toybox'],
    [['chmod', 'u+x', 'f'], 'toybox'],
    [['sed', '-i.bak', '-e', 's/a/b/', 'f'], 'toybox'],
    [['sed', '-ne', '1p', 'f'], 'toybox'],
    [['truncate', '-s', '0', 'f'], 'toybox'],
    [['cp', '--preserve=mode', '-t', 'd', 'f'], 'toybox'],
    [['cp', '--parents', 'a/f', 'd'], 'toybox'],
    [['ls', '--color', '-la'], 'toybox'],
    [['ls', '--color=auto'], 'toybox'],
    [['realpath', '--relative-to', '/x', 'f'], 'toybox'],
    [['find', '-L', '.', '-mtime', '-3', '-newermt', '2020-01-01', '!', '-name', 'x', '-exec', 'echo', '{}', ';'], 'toybox'],
    [['find', '.', '(', '-name', 'a', '-o', '-name', 'b', ')', '-print0'], 'toybox'],
    [['wc', '-L', 'f'], 'system: toybox wc has no option -L'],
    [['ls', '--colour'], 'system: toybox ls has no option --colour'],
    [['rmdir', '--ignore-fail-on-non-empty=1', 'd'], 'system: toybox rmdir --ignore-fail-on-non-empty takes no value'],
    [['unlink', '--', 'f'], 'toybox'],
    [['unlink', '-v', 'f'], 'system: toybox unlink has no option -v'],
    [['find', '.', '-regex', 'x'], 'system: toybox find has no primary -regex'],
    [['find', '-X', '.'], 'system: toybox find has no option -X'],
    [['dd', 'if=a'], 'system: toybox has no dd'],
    [['sed', '-z', '--', '--debug'], 'toybox'],
  ])('%j → %s', async (argv, expected) => {
    expect(await explain(argv)).toBe(expected);
    expect(toyboxRuns()).toEqual([]);
  });
});

describe('the option tables', () => {
  it('are parsed once per toybox binary and read from the cache afterwards', async () => {
    seed({ 'lines.txt': 'a\n' });
    await run('wc', ['-l', 'lines.txt']);
    await run('wc', ['-c', 'lines.txt']);
    const lines = readFileSync(log, 'utf8').split('\n').filter(Boolean);
    expect(lines.filter((line) => line === '[wc][--help]')).toHaveLength(1);
    expect(lines.filter((line) => line === '')).toHaveLength(0);
    const [dir] = readdirSync(path.join(cache, 'toybox'));
    expect(dir).toMatch(/toybox-logged$/);
    expect(readFileSync(path.join(cache, 'toybox', dir ?? '', 'wc.options'), 'utf8')).toMatch(/^s l$/m);
  });

  it('a changed toybox binary (new mtime) is parsed again', async () => {
    await explain(['wc', '-l']);
    utimesSync(wrapper, new Date('2001-01-01T00:00:00Z'), new Date('2001-01-01T00:00:00Z'));
    await explain(['wc', '-l']);
    const helps = readFileSync(log, 'utf8').split('\n').filter((line) => line === '[wc][--help]');
    expect(helps).toHaveLength(2);
    expect(readdirSync(path.join(cache, 'toybox'))).toHaveLength(2);
  });

  it('an unwritable cache only costs speed', async () => {
    seed({ 'lines.txt': 'a\n' });
    writeFileSync(cache, 'not a directory');
    const result = await run('wc', ['-l', 'lines.txt']);
    expect(result).toMatchObject({ status: 0, stdout: '1 lines.txt\n', stderr: '' });
    expect(toyboxRuns()).toEqual(['[wc][-l][lines.txt]']);
  });

  it("lists no option toybox's own parser rejects", async () => {
    // toybox parses every option before an applet runs and stops at the first unknown
    // one. So `APPLET <listed option> --bsh-probe` must complain about --bsh-probe, never
    // about the listed option. Applets that pass unknown options on (head, tail, chmod,
    // find) or take none (unlink) are skipped: the probe would run them.
    const scratch = path.join(base, 'probe');
    mkdirSync(scratch);
    const probe = (applet: string, args: string[]) =>
      spawnSync(TOYBOX, [applet, ...args, '--bsh-probe'], { cwd: scratch, encoding: 'utf8', input: '', timeout: 10_000 }).stderr;
    let checked = 0;
    for (const applet of APPLETS.filter((a) => a !== 'dd')) {
      await explain([applet]);
      if (!probe(applet, []).includes("Unknown option 'bsh-probe'")) continue;
      const [dir] = readdirSync(path.join(cache, 'toybox'));
      const table = readFileSync(path.join(cache, 'toybox', dir ?? '', `${applet}.options`), 'utf8');
      for (const line of table.split('\n').filter((entry) => entry !== '' && !entry.startsWith('#'))) {
        const [kind, name, value] = line.split(' ');
        const args =
          kind === 'l' ? [value === 'n' ? `--${name}` : `--${name}=1`] : kind === 'v' ? [`-${name}`, '1'] : kind === 'o' ? [`-${name}x`] : [`-${name}`];
        // toybox names a rejected short option by its letter and a long one by its name.
        expect(probe(applet, args), `${applet} ${args.join(' ')}`).not.toContain(`Unknown option '${name}'`);
        checked += 1;
      }
    }
    expect(checked).toBeGreaterThan(100);
    expect(readdirSync(scratch)).toEqual([]);
  });
});

describe('pre-backup through a real broker (kernel layer off)', () => {
  let serve: ServeHandle;
  let denying: ServeHandle;
  beforeAll(async () => {
    serve = await startServe();
    const policyDir = tempDir('bsh-dispatch-policy-');
    const policy = path.join(policyDir, 'policy.json');
    writeFileSync(policy, JSON.stringify({ rules: [{ pattern: 'keep.bin', decision: 'deny' }] }));
    denying = await startServe({ extraArgs: ['--policy', policy] });
    rmSync(policyDir, { recursive: true, force: true });
  });
  afterAll(() => {
    serve.cleanup();
    denying.cleanup();
  });

  const brokerEnv = (handle: ServeHandle) => ({
    BROKERED_SHELL_SOCKET: handle.socket,
    BROKERED_SHELL_SESSION_ID: 's1',
    BROKERED_SHELL_TOOL_CALL_ID: 'tool-1',
    BROKERED_SHELL_TRACE_ID: 'trace-1',
  });

  /** Commits the open turn and returns each backed-up file (relative to the workspace) with its saved bytes. */
  async function commit(handle: ServeHandle, commitMsg: string): Promise<Record<string, string>> {
    const answer = await handle.control({ command: 'CommitModifyBackup', commitMsg });
    expect(answer).toMatchObject({ ok: true });
    const { store, manifest } = await new BackupHome({ home: handle.home }).findTurn(String(answer.turnId));
    expect(manifest.message).toBe(commitMsg);
    const files: Record<string, string> = {};
    for (const entry of manifest.files) files[path.relative(handle.workspace, entry.path)] = entry.sha256 === null ? '(no content)' : (await store.readBlob(entry.sha256)).toString();
    return files;
  }

  function seedIn(handle: ServeHandle, files: Record<string, string>): void {
    for (const [name, content] of Object.entries(files)) writeFileSync(path.join(handle.workspace, name), content);
  }
  const read = (handle: ServeHandle, name: string) => readFileSync(path.join(handle.workspace, name), 'utf8');

  it('dd if=a of=f: the broker keeps f’s previous bytes, then dd overwrites it', async () => {
    seedIn(serve, { a: 'replacement', f: 'previous bytes of f' });
    const result = await run('dd', ['if=a', 'of=f'], { cwd: serve.workspace, env: brokerEnv(serve) });
    expect(result.status).toBe(0);
    expect(read(serve, 'f')).toBe('replacement');
    expect(await commit(serve, 'dd turn')).toEqual({ f: 'previous bytes of f' });
  });

  it('truncate -s 0 f: backed up, then emptied by toybox truncate', async () => {
    seedIn(serve, { f: 'to be truncated' });
    const result = await run('truncate', ['-s', '0', 'f'], { cwd: serve.workspace, env: brokerEnv(serve) });
    expect(result).toMatchObject({ status: 0, stderr: '' });
    expect(read(serve, 'f')).toBe('');
    expect(toyboxRuns()).toEqual(['[truncate][-s][0][f]']);
    expect(await commit(serve, 'truncate turn')).toEqual({ f: 'to be truncated' });
  });

  it('echo x | tee f g: both files backed up before tee writes them', async () => {
    seedIn(serve, { f: 'old f', g: 'old g' });
    const result = await run('tee', ['f', 'g'], { cwd: serve.workspace, env: brokerEnv(serve), input: 'x\n' });
    expect(result).toMatchObject({ status: 0, stdout: 'x\n' });
    expect(read(serve, 'f')).toBe('x\n');
    expect(read(serve, 'g')).toBe('x\n');
    expect(await commit(serve, 'tee turn')).toEqual({ f: 'old f', g: 'old g' });
  });

  it('dd with of= in a subdirectory, named relative to the cwd', async () => {
    mkdirSync(path.join(serve.workspace, 'sub'), { recursive: true });
    seedIn(serve, { 'sub/out': 'old out', a: 'fresh' });
    const result = await run('dd', ['if=../a', 'of=out'], { cwd: path.join(serve.workspace, 'sub'), env: brokerEnv(serve) });
    expect(result.status).toBe(0);
    expect(read(serve, 'sub/out')).toBe('fresh');
    expect(await commit(serve, 'subdir turn')).toEqual({ 'sub/out': 'old out' });
  });

  it('a denied of= target: dd does not run, exit 1, the file untouched', async () => {
    seedIn(denying, { a: 'replacement', 'keep.bin': 'precious' });
    const result = await run('dd', ['if=a', 'of=keep.bin'], { cwd: denying.workspace, env: brokerEnv(denying) });
    expect(result.status).toBe(1);
    expect(result.stderr).toMatch(/^brokered-shell: dd: refused to write keep\.bin: /);
    expect(result.stderr).not.toMatch(/records/);
    expect(read(denying, 'keep.bin')).toBe('precious');
    expect(await commit(denying, 'denied turn')).toEqual({});
  });

  it('tee with one denied file writes none of them', async () => {
    seedIn(denying, { f: 'old f', 'keep.bin': 'precious' });
    const result = await run('tee', ['f', 'keep.bin'], { cwd: denying.workspace, env: brokerEnv(denying), input: 'x\n' });
    expect(result).toMatchObject({ status: 1, stdout: '' });
    expect(read(denying, 'f')).toBe('old f');
    expect(read(denying, 'keep.bin')).toBe('precious');
    expect(toyboxRuns()).toEqual([]);
  });

  it('a session the broker does not serve is refused', async () => {
    seedIn(serve, { f: 'kept' });
    const result = await run('truncate', ['-s', '0', 'f'], { cwd: serve.workspace, env: { ...brokerEnv(serve), BROKERED_SHELL_SESSION_ID: 'someone-else' } });
    expect(result.status).toBe(1);
    expect(result.stderr).toMatch(/session/);
    expect(read(serve, 'f')).toBe('kept');
  });

  it('dd without of= (stdout) asks the broker and runs', async () => {
    seedIn(serve, { a: 'to stdout' });
    const result = await run('dd', ['if=a', 'status=none'], { cwd: serve.workspace, env: brokerEnv(serve) });
    expect(result).toMatchObject({ status: 0, stdout: 'to stdout' });
  });

  it('commands that write nothing by argument are not announced', async () => {
    seedIn(serve, { f: 'plain' });
    // A broker address that does not answer would refuse an announcement; cat never makes one.
    const result = await run('cat', ['f'], { cwd: serve.workspace, env: { ...brokerEnv(serve), BROKERED_SHELL_REQUEST: path.join(base, 'no-client') } });
    expect(result).toMatchObject({ status: 0, stdout: 'plain' });
  });
});

describe('when the broker cannot be asked', () => {
  const servers: net.Server[] = [];
  const connections = new Set<net.Socket>();
  afterEach(async () => {
    for (const connection of connections) connection.destroy();
    connections.clear();
    for (const server of servers.splice(0)) await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  /** A Unix socket server in this process; every connection is closed after the test. */
  async function listen(socket: string, onConnection: (client: net.Socket) => void): Promise<void> {
    const server = net.createServer((client) => {
      connections.add(client);
      client.on('error', () => undefined);
      onConnection(client);
    });
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(socket, resolve));
  }

  // Documented behaviour: exit 2 of the client means "no broker here", and the links stay
  // usable in a shell without a broker — the command runs unannounced.
  it('no broker (the socket variable points nowhere): the command still runs', async () => {
    seed({ a: 'new', f: 'old' });
    const result = await run('dd', ['if=a', 'of=f'], { env: { BROKERED_SHELL_SOCKET: path.join(base, 'nowhere.sock'), BROKERED_SHELL_SESSION_ID: 's1' } });
    expect(result.status).toBe(0);
    expect(readFileSync(path.join(ws, 'f'), 'utf8')).toBe('new');
  });

  it('no socket variable at all: the command runs', async () => {
    seed({ f: 'old' });
    const result = await run('truncate', ['-s', '1', 'f']);
    expect(result.status).toBe(0);
    expect(readFileSync(path.join(ws, 'f'), 'utf8')).toBe('o');
  });

  it('a broker that does not answer in time: refused, not run (fail closed)', async () => {
    const socket = path.join(base, 'silent.sock');
    await listen(socket, () => undefined);
    seed({ f: 'old' });
    const result = await run('truncate', ['-s', '0', 'f'], { env: { BROKERED_SHELL_SOCKET: socket, BROKERED_SHELL_SESSION_ID: 's1', BROKERED_SHELL_REQUEST_TIMEOUT_MS: '300' } });
    expect(result.status).toBe(1);
    expect(result.stderr).toMatch(/refused: no answer from the broker/);
    expect(readFileSync(path.join(ws, 'f'), 'utf8')).toBe('old');
  });

  it('a broker answering something that is not ok:true: refused', async () => {
    const socket = path.join(base, 'odd.sock');
    await listen(socket, (client) => client.on('data', () => client.end('{"id":1,"ok":true}\n')));
    seed({ f: 'old' });
    const result = await run('tee', ['f'], { input: 'x\n', env: { BROKERED_SHELL_SOCKET: socket, BROKERED_SHELL_SESSION_ID: 's1' } });
    expect(result.status).toBe(1);
    expect(readFileSync(path.join(ws, 'f'), 'utf8')).toBe('old');
  });

  it('a socket is set but the client is missing: refused', async () => {
    seed({ f: 'old' });
    const result = await run('truncate', ['-s', '0', 'f'], {
      env: { BROKERED_SHELL_SOCKET: path.join(base, 'any.sock'), BROKERED_SHELL_REQUEST: path.join(base, 'no-client') },
    });
    expect(result.status).toBe(1);
    expect(result.stderr).toMatch(/cannot run the broker client/);
    expect(readFileSync(path.join(ws, 'f'), 'utf8')).toBe('old');
  });
});
