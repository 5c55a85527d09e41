/**
 * Helpers for the `brokered-shell run` end-to-end tests: the real CLI as a process
 * (real kernel sandbox, real broker, real store), temp dirs for the workspace, the
 * store and the trash, and snapshots of files and trees to compare before and after.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, type BigIntStats } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { BackupHome, type BackupEntry, type TurnManifest } from '../../src/backup/index.js';
import { buildFixture } from '../fixtures/sandbox/harness.js';
import { CLI, REPO_ROOT } from '../helpers/serve-process.js';

if (!existsSync(path.join(REPO_ROOT, 'dist', 'cli', 'main.js'))) {
  throw new Error('dist/ is missing: build it first with `npx tsc -p tsconfig.build.json`');
}

export { CLI, REPO_ROOT };

/** A committer for git runs in tests, so no run depends on the machine's git config. */
export const GIT_IDENTITY = { GIT_AUTHOR_NAME: 'a', GIT_AUTHOR_EMAIL: 'a@example.com', GIT_COMMITTER_NAME: 'a', GIT_COMMITTER_EMAIL: 'a@example.com' };

export const sha256 = (bytes: string | Buffer) => createHash('sha256').update(bytes).digest('hex');

/** One test's world: every directory realpath'd (manifests and the supervisor use resolved paths). */
export interface World {
  base: string;
  /** The workspace: cwd and writable root of the command. */
  ws: string;
  /** `$BROKERED_SHELL_HOME`: the backup store. */
  home: string;
  /** `$XDG_DATA_HOME`: where a trash would go. */
  xdg: string;
  /** A directory outside every root. */
  outside: string;
  /** Read-only helpers for the command (scripts, fixture binaries). */
  tools: string;
}

export async function makeWorld(prefix: string): Promise<World> {
  const base = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), `bsh-run-${prefix}-`)));
  const world: World = {
    base,
    ws: path.join(base, 'ws'),
    home: path.join(base, 'home'),
    xdg: path.join(base, 'xdg'),
    outside: path.join(base, 'out'),
    tools: path.join(base, 'tools'),
  };
  for (const dir of [world.ws, world.home, world.xdg, world.outside, world.tools]) await fs.mkdir(dir);
  return world;
}

export async function removeWorld(world: World | undefined): Promise<void> {
  if (world) await fs.rm(world.base, { recursive: true, force: true });
}

/** Compiles the named C fixtures (test/fixtures/sandbox/*.c) into `world.tools`. */
export function buildTools(world: World, names: readonly string[]): void {
  for (const name of names) buildFixture(name, world.tools);
}

export interface CliRun {
  status: number | null;
  signal: NodeJS.Signals | null;
  stdout: Buffer;
  /** stdout as text. */
  out: string;
  stderr: string;
  pid: number;
}

export interface CliOptions {
  cwd?: string;
  /** Extra environment for the CLI (and so for the command). */
  env?: NodeJS.ProcessEnv;
  /** Program and leading arguments to wrap the CLI with (e.g. an interpreter script). */
  wrapper?: readonly string[];
  /** Called once the process started. */
  onSpawn?: (pid: number) => void;
  /** Called with all stdout so far, each time more arrives. */
  onStdout?: (text: string) => void;
  /** Another copy of bin/brokered-shell.js to run (default: this checkout's). */
  cli?: string;
  /** Bytes for the process's stdin (default: none, stdin is /dev/null). */
  stdin?: string;
}

/** The environment every CLI process of a world gets: its store, its trash, quiet logs. */
export function worldEnv(world: World, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    BROKERED_SHELL_HOME: world.home,
    XDG_DATA_HOME: world.xdg,
    BROKERED_SHELL_LOG_LEVEL: 'error',
    LANG: 'C.UTF-8',
    LC_ALL: 'C.UTF-8',
    NODE: process.execPath,
    TOOLS: world.tools,
    OUT: world.outside,
    ...extra,
  };
  delete env.FORCE_COLOR;
  delete env.NODE_OPTIONS;
  return env;
}

/** `node bin/brokered-shell.js ARGS` as a real process, output collected as bytes. */
export function brokeredShell(world: World, args: readonly string[], options: CliOptions = {}): Promise<CliRun> {
  const [program, ...leading] = options.wrapper ?? [process.execPath];
  if (program === undefined) throw new Error('empty wrapper');
  const cli = options.cli ?? CLI;
  const argv = options.wrapper ? [...leading, process.execPath, cli, ...args] : [cli, ...args];
  return new Promise((resolve, reject) => {
    const child = spawn(program, argv, {
      cwd: options.cwd ?? world.ws,
      env: worldEnv(world, options.env),
      stdio: [options.stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
    if (options.stdin !== undefined) child.stdin?.end(options.stdin);
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout?.on('data', (chunk: Buffer) => {
      out.push(chunk);
      options.onStdout?.(Buffer.concat(out).toString('utf8'));
    });
    child.stderr?.on('data', (chunk: Buffer) => err.push(chunk));
    child.once('error', reject);
    if (child.pid !== undefined) options.onSpawn?.(child.pid);
    child.once('close', (status, signal) => {
      const stdout = Buffer.concat(out);
      resolve({ status, signal, stdout, out: stdout.toString('utf8'), stderr: Buffer.concat(err).toString('utf8'), pid: child.pid ?? -1 });
    });
  });
}

export interface RunFlags {
  session?: string;
  policy?: string;
  message?: string;
  noBackup?: boolean;
}

/** `brokered-shell run --workspace WS [flags] -- COMMAND`. */
export function run(world: World, command: string, flags: RunFlags = {}, options: CliOptions = {}): Promise<CliRun> {
  const args = ['run', '--workspace', world.ws];
  if (flags.session !== undefined) args.push('--session', flags.session);
  if (flags.policy !== undefined) args.push('--policy', flags.policy);
  if (flags.message !== undefined) args.push('--message', flags.message);
  if (flags.noBackup) args.push('--no-backup');
  args.push('--', command);
  return brokeredShell(world, args, options);
}

/** A failed expectation's context: the status and everything the run said. */
export function describeRun(result: CliRun): string {
  return `exit ${String(result.status)} signal ${String(result.signal)}\n--- stdout\n${result.out}\n--- stderr\n${result.stderr}`;
}

/**
 * The statuses a composite command reported with `st NAME` (a shell function printing
 * `@@NAME $?`): one entry per case, in order.
 */
export function caseStatuses(stdout: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const match of stdout.matchAll(/^@@(\S+) (\d+)$/gm)) out.set(match[1] ?? '', Number(match[2]));
  return out;
}

/**
 * A socket client for inside the sandbox (`python3 ask.py LINE...`): sends each
 * argument as one line on $BROKERED_SHELL_SOCKET, one connection each, and prints
 * `answer <line>` for each reply.
 */
export const ASK_PY = `
import os, socket, sys
for line in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(os.environ['BROKERED_SHELL_SOCKET'])
    s.sendall(line.encode() + b'\\n')
    data = b''
    while not data.endswith(b'\\n'):
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    print('answer ' + data.decode().strip())
`;

/** The shell function the composite commands use to report each case's status. */
export const ST = 'st() { echo "@@$1 $?"; }';

/** The turns of one session in the world's store (none when the session has no store). */
export async function turnsOf(world: World, sessionId: string): Promise<TurnManifest[]> {
  const home = new BackupHome({ home: world.home });
  if (!(await home.listSessions()).includes(sessionId)) return [];
  return home.listTurns({ sessionId });
}

/** The one committed turn of a session; fails when there is not exactly one. */
export async function onlyTurn(world: World, sessionId: string): Promise<TurnManifest> {
  const turns = await turnsOf(world, sessionId);
  if (turns.length !== 1 || !turns[0]) throw new Error(`session ${sessionId} has ${turns.length} turns, expected 1`);
  if (turns[0].committedAt === null) throw new Error(`turn ${turns[0].id} is not committed`);
  return turns[0];
}

export function entryFor(manifest: TurnManifest, file: string): BackupEntry | undefined {
  return manifest.files.find((entry) => entry.path === file);
}

/** The bytes a manifest entry saved. */
export async function blobOf(world: World, manifest: TurnManifest, entry: BackupEntry): Promise<Buffer> {
  if (entry.sha256 === null) throw new Error(`${entry.path} has no content in turn ${manifest.id}`);
  const store = await new BackupHome({ home: world.home }).session(manifest.sessionId);
  return store.readBlob(entry.sha256);
}

/** `brokered-shell backups restore TURN`. */
export function restoreTurn(world: World, turnId: string, extra: readonly string[] = []): Promise<CliRun> {
  return brokeredShell(world, ['backups', 'restore', turnId, ...extra]);
}

/** What a restore must bring back for one path (directories: type and mode only). */
export type NodeState =
  | { type: 'file'; mode: number; sha256: string; size: number; mtimeNs: string }
  | { type: 'symlink'; target: string }
  | { type: 'dir'; mode: number }
  | { type: 'other' };

export async function nodeState(file: string): Promise<NodeState | undefined> {
  let stats: BigIntStats;
  try {
    stats = await fs.lstat(file, { bigint: true });
  } catch {
    return undefined;
  }
  const mode = Number(stats.mode & 0o7777n);
  if (stats.isFile()) {
    const bytes = await fs.readFile(file);
    return { type: 'file', mode, sha256: sha256(bytes), size: bytes.length, mtimeNs: stats.mtimeNs.toString() };
  }
  if (stats.isSymbolicLink()) return { type: 'symlink', target: await fs.readlink(file) };
  if (stats.isDirectory()) return { type: 'dir', mode };
  return { type: 'other' };
}

/** Every path under `dir` (relative, sorted) with its state. */
export async function treeState(dir: string): Promise<Record<string, NodeState>> {
  const out: Record<string, NodeState> = {};
  const walk = async (rel: string): Promise<void> => {
    const entries = await fs.readdir(path.join(dir, rel), { withFileTypes: true });
    for (const entry of entries.sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const child = rel === '' ? entry.name : `${rel}/${entry.name}`;
      const state = await nodeState(path.join(dir, child));
      if (state) out[child] = state;
      if (entry.isDirectory()) await walk(child);
    }
  };
  await walk('');
  return out;
}

/** Writes a file with a mode and an old, distinctive mtime (so a restore that loses either shows). */
export async function writeOld(file: string, content: string | Buffer, mode = 0o640, seconds = 981_173_045): Promise<void> {
  await fs.mkdir(path.dirname(file), { recursive: true });
  await fs.writeFile(file, content);
  await fs.chmod(file, mode);
  await fs.utimes(file, seconds, seconds);
}

/** The `brokered-shell: denied ACCESS PATH: …` lines of a run's stderr, as "ACCESS PATH". */
export function deniedLines(stderr: string): string[] {
  return [...stderr.matchAll(/^brokered-shell: denied (\S+) (.+?): /gm)].map((m) => `${m[1] ?? ''} ${m[2] ?? ''}`);
}
