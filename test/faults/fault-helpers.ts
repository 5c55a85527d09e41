/**
 * Helpers for the fault-injection suites: a scripted writer that runs inside the
 * sandbox (one modifying operation per plan line, each outcome printed with its errno,
 * `sync NAME` lines that wait for the test to inject a fault), a subreaper wrapper that
 * reports how every process of a `run` ended (also the ones orphaned when `run` is
 * killed), snapshots of target files, and the one check every fault ends with: no file
 * changed without its previous bytes in the store.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { BackupHome, type BackupEntry, type TurnManifest } from '../../src/backup/index.js';
import type { Durability } from '../../src/backup/settings.js';
import type { World } from '../e2e/run-helpers.js';

export const sha256 = (bytes: string | Buffer) => createHash('sha256').update(bytes).digest('hex');

/**
 * The writer: `python3 writer.py PLAN SYNC_DIR`. Plan lines: `OP ARG...`, where OP is
 * write (O_TRUNC), append, truncate (truncate(2) to 1 byte), rdwr (O_RDWR then
 * ftruncate to 2 bytes), unlink, rename FROM TO, chmod (0600), fchmod (through an fd
 * opened read-only), `killself-at NAME` (a thread SIGKILLs the writer once SYNC_DIR/NAME
 * exists), or `sync NAME` (print `@@sync NAME`, wait for SYNC_DIR/NAME).
 * Every operation prints `@@OP ARGS RESULT` with RESULT `OK` or the errno's name, and
 * goes on whatever happened; `@@end` at the end.
 */
export const WRITER_PY = String.raw`
import errno, os, sys, time
plan, sync_dir = sys.argv[1], sys.argv[2]

def write(p):
    with open(p, 'wb') as f:
        f.write(b'new content of ' + p.encode() + b'\n')

def append(p):
    with open(p, 'ab') as f:
        f.write(b'appended\n')

def rdwr(p):
    fd = os.open(p, os.O_RDWR)
    try:
        os.ftruncate(fd, 2)
    finally:
        os.close(fd)

def fchmod(p):
    fd = os.open(p, os.O_RDONLY)
    try:
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)

def killself_at(marker):
    # A thread kills the whole process once the marker appears (the main thread is then blocked in a request).
    import signal, threading
    def killer():
        while not os.path.exists(os.path.join(sync_dir, marker)):
            time.sleep(0.005)
        os.kill(os.getpid(), signal.SIGKILL)
    threading.Thread(target=killer, daemon=True).start()

OPS = {
    'write': write,
    'append': append,
    'truncate': lambda p: os.truncate(p, 1),
    'rdwr': rdwr,
    'unlink': os.unlink,
    'rename': os.rename,
    'chmod': lambda p: os.chmod(p, 0o600),
    'fchmod': fchmod,
    'killself-at': killself_at,
}

with open(plan) as lines:
    steps = [line.split() for line in lines if line.strip()]
for step in steps:
    op, args = step[0], step[1:]
    if op == 'sync':
        print('@@sync', args[0], flush=True)
        while not os.path.exists(os.path.join(sync_dir, args[0])):
            time.sleep(0.005)
        continue
    try:
        OPS[op](*args)
        result = 'OK'
    except OSError as e:
        result = errno.errorcode.get(e.errno, str(e.errno))
    print('@@' + op, ' '.join(args), result, flush=True)
print('@@end', flush=True)
`;

/**
 * `python3 subreaper.py PROGRAM ARGS...`: runs PROGRAM as a child subreaper, so the
 * processes its tree orphans come to it, and appends `PID COMM exit|signal N` to
 * $REAP_REPORT for every process it reaps. Its own status mirrors PROGRAM's.
 */
export const SUBREAPER_PY = String.raw`
import ctypes, os, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
    sys.exit(120)
child = subprocess.Popen(sys.argv[1:])
status = 1
with open(os.environ['REAP_REPORT'], 'a') as out:
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT)
        except ChildProcessError:
            break
        if info is None:
            continue
        try:
            with open('/proc/%d/comm' % info.si_pid) as f:
                comm = f.read().strip()
        except OSError:
            comm = '?'
        os.waitpid(info.si_pid, 0)
        kind = 'exit' if info.si_code == os.CLD_EXITED else 'signal'
        out.write('%d %s %s %d\n' % (info.si_pid, comm, kind, info.si_status))
        out.flush()
        if info.si_pid == child.pid:
            status = info.si_status if kind == 'exit' else 128 + info.si_status
sys.exit(status)
`;

/** Writes the writer and the subreaper into `world.tools`. */
export async function installScripts(world: World): Promise<{ writer: string; subreaper: string }> {
  const writer = path.join(world.tools, 'writer.py');
  const subreaper = path.join(world.tools, 'subreaper.py');
  await fs.writeFile(writer, WRITER_PY);
  await fs.writeFile(subreaper, SUBREAPER_PY);
  return { writer, subreaper };
}

/** Writes a plan (one step per entry) and returns the command line that runs it. */
export async function writerCommand(world: World, name: string, steps: readonly string[]): Promise<string> {
  const plan = path.join(world.tools, `${name}.plan`);
  await fs.writeFile(plan, `${steps.join('\n')}\n`);
  // `; true`: bash forks the writer instead of exec'ing it, so it is the supervisor's grandchild.
  return `python3 "$TOOLS/writer.py" "$TOOLS/${name}.plan" "$OUT"; true`;
}

/** A --policy file (in `world.tools`) choosing the store's durability (backup/settings.ts). */
export async function durabilityPolicy(world: World, durability: Durability): Promise<string> {
  const file = path.join(world.tools, `durability-${durability}.json`);
  await fs.writeFile(file, JSON.stringify({ backup: { durability } }));
  return file;
}

/** Environment for the writer: no bytecode files (the tools dir is outside every root). */
export const WRITER_ENV: NodeJS.ProcessEnv = { PYTHONDONTWRITEBYTECODE: '1' };

export interface StepOutcome {
  op: string;
  args: string[];
  result: string;
}

/** The `@@OP ARGS RESULT` lines of the writer's stdout, in order. */
export function stepOutcomes(stdout: string): StepOutcome[] {
  const out: StepOutcome[] = [];
  for (const line of stdout.split('\n')) {
    if (!line.startsWith('@@') || line.startsWith('@@sync') || line.startsWith('@@end')) continue;
    const words = line.slice(2).split(' ');
    const op = words[0] ?? '';
    const result = words.at(-1) ?? '';
    out.push({ op, args: words.slice(1, -1), result });
  }
  return out;
}

/** The state of one target before a fault: its bytes and mode, or absent. */
export type FileSnapshot = { bytes: Buffer; mode: number } | null;

export async function snapshot(files: readonly string[]): Promise<Map<string, FileSnapshot>> {
  const out = new Map<string, FileSnapshot>();
  for (const file of files) {
    try {
      const stats = await fs.lstat(file);
      out.set(file, stats.isFile() ? { bytes: await fs.readFile(file), mode: stats.mode & 0o7777 } : null);
    } catch {
      out.set(file, null);
    }
  }
  return out;
}

const same = (a: FileSnapshot, b: FileSnapshot) =>
  a === null || b === null ? a === b : a.mode === b.mode && a.bytes.equals(b.bytes);

export interface BackingReport {
  targets: number;
  /** Targets whose bytes, mode or existence differ from before. */
  changed: string[];
  /** Changed targets whose previous bytes and mode are in the store (blob verified). */
  backed: string[];
  /** Changed targets without their previous state in the store: must be empty. */
  unbacked: string[];
  /** Targets with an entry in the turn (changed or not). */
  withEntry: number;
}

/**
 * The promise under test: every target that changed has an entry in the session's
 * turns whose blob (read through the store, which verifies its hash) holds the bytes
 * it had before, with its mode; a target without such an entry is unchanged.
 */
export async function checkBacking(
  home: string,
  sessionId: string,
  before: ReadonlyMap<string, FileSnapshot>,
): Promise<BackingReport> {
  const backupHome = new BackupHome({ home });
  const turns: TurnManifest[] = (await backupHome.listSessions()).includes(sessionId) ? await backupHome.listTurns({ sessionId }) : [];
  const entries = new Map<string, BackupEntry>();
  for (const turn of turns) for (const entry of turn.files) if (!entries.has(entry.path)) entries.set(entry.path, entry);
  // A change of a file's metadata alone keeps that metadata, not its bytes: the file has an entry all the same.
  const metadataOnly = new Set<string>();
  for (const turn of turns) for (const entry of turn.structure ?? []) if (entry.kind === 'metadata') metadataOnly.add(entry.path);
  const store = turns.length > 0 ? await backupHome.session(sessionId) : undefined;
  const after = await snapshot([...before.keys()]);
  const report: BackingReport = { targets: before.size, changed: [], backed: [], unbacked: [], withEntry: 0 };
  for (const [file, was] of before) {
    const entry = entries.get(file);
    if (entry || metadataOnly.has(file)) report.withEntry++;
    if (same(was, after.get(file) ?? null)) continue;
    report.changed.push(file);
    let ok = false;
    if (was !== null && entry?.kind === 'file' && entry.sha256 !== null && store) {
      const saved = await store.readBlob(entry.sha256).catch(() => undefined);
      ok = saved !== undefined && saved.equals(was.bytes) && entry.mode === was.mode;
    }
    (ok ? report.backed : report.unbacked).push(file);
  }
  return report;
}

/** Pids of the direct children of `pid` (every thread's list). */
export async function childrenOf(pid: number): Promise<number[]> {
  const out: number[] = [];
  const tasks = await fs.readdir(`/proc/${pid}/task`).catch(() => [] as string[]);
  for (const task of tasks) {
    const text = await fs.readFile(`/proc/${pid}/task/${task}/children`, 'utf8').catch(() => '');
    for (const word of text.split(/\s+/)) if (word !== '') out.push(Number(word));
  }
  return out;
}

export async function commOf(pid: number): Promise<string | undefined> {
  return (await fs.readFile(`/proc/${pid}/comm`, 'utf8').catch(() => undefined))?.trim();
}

/** Every descendant of `pid`, depth first. */
export async function descendantsOf(pid: number): Promise<number[]> {
  const out: number[] = [];
  for (const child of await childrenOf(pid)) out.push(child, ...(await descendantsOf(child)));
  return out;
}

/** The first descendant of `pid` whose comm is `comm` (comm is cut at 15 characters). */
export async function findDescendant(pid: number, comm: string): Promise<number | undefined> {
  for (const candidate of await descendantsOf(pid)) if ((await commOf(candidate)) === comm.slice(0, 15)) return candidate;
  return undefined;
}

export async function fdCount(pid: number | 'self'): Promise<number> {
  return (await fs.readdir(`/proc/${pid}/fd`)).length;
}

export function alive(pid: number): boolean {
  return existsSync(`/proc/${pid}`);
}

/** Whether `pid` has died (gone, or a zombie waiting to be reaped). */
export async function dead(pid: number): Promise<boolean> {
  const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  return stat === undefined || stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
}

export async function cmdlineOf(pid: number): Promise<string[]> {
  const text = await fs.readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
  return text.split('\0').filter((word) => word !== '');
}

/** The first descendant of `pid` whose command line has a word ending in `suffix`. */
export async function findByArgument(pid: number, suffix: string): Promise<number | undefined> {
  for (const candidate of await descendantsOf(pid)) if ((await cmdlineOf(candidate)).some((w) => w.endsWith(suffix))) return candidate;
  return undefined;
}

export { waitFor } from '../helpers/wait-for.js';

/** Mount a tmpfs of `size` (e.g. '1m') on `dir` (root only). */
export function mountTmpfs(dir: string, size: string): void {
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size},mode=0700`, 'tmpfs', dir]);
}

/**
 * Remount the file system at `dir` read-only or read-write. A remount to read-only is
 * refused (busy) while a file there is being created or is open for writing, which the
 * broker may be doing in the background (spare temp files, a deferred journal write): it
 * is tried again for up to two seconds.
 */
export async function remount(dir: string, mode: 'ro' | 'rw'): Promise<void> {
  const deadline = Date.now() + 2_000;
  for (;;) {
    try {
      execFileSync('mount', ['-o', `remount,${mode}`, dir], { stdio: ['ignore', 'ignore', 'pipe'] });
      return;
    } catch (error) {
      const busy = /busy/i.test(String((error as { stderr?: unknown }).stderr ?? ''));
      if (!busy || Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}

export function unmount(dir: string): void {
  try {
    execFileSync('umount', [dir], { stdio: 'ignore' });
  } catch {
    execFileSync('umount', ['-l', dir], { stdio: 'ignore' });
  }
}

/** Distinct, recognisable content of `size` bytes for file number `i`. */
export function contentFor(name: string, size: number): Buffer {
  const out = Buffer.alloc(size);
  let seed = createHash('sha256').update(name).digest();
  for (let offset = 0; offset < size; offset += seed.length) {
    seed.copy(out, offset);
    seed = createHash('sha256').update(seed).digest();
  }
  return out;
}

/** `<home>/workspace/sessions/<id>/modify_backup` */
export function sessionStoreDir(home: string, sessionId: string): string {
  return path.join(home, 'workspace', 'sessions', sessionId, 'modify_backup');
}
