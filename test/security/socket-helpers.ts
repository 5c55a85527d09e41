/**
 * The broker-socket escape suite: routes a sandboxed command tries against the broker's
 * Unix socket, run inside a real `brokered-shell run` (real kernel sandbox, real broker,
 * real store). Each route is judged three ways: refused (the answer is a refusal, or the
 * shell attempt failed), unchanged (its target files are as they were) and audited (a
 * broker audit record, read from the run's `phase: 'audit'` log lines, says deny).
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import type { AuditRecord } from '../../src/plugins/audit.js';
import { ST, brokeredShell, caseStatuses, nodeState, type CliRun, type NodeState, type World } from '../e2e/run-helpers.js';

export type { AuditRecord };

/**
 * `python3 client.py CASES.json`: each case on its own connection: send its chunks, read
 * `want` answer lines (or until the broker closes), take any descriptor passed with an
 * answer (SCM_RIGHTS) and try to write through it — a granted fd would be an escape, and
 * the test then sees the target changed. `flood` holds that many connections open, each
 * having sent the case's chunks, while one more connection sends `after`.
 * `python3 client.py snap PATH...` prints what is at each path (and in it, for a directory).
 */
const CLIENT_PY = String.raw`
import array, base64, hashlib, json, os, socket, sys
SOCK = os.environ['BROKERED_SHELL_SOCKET']
def connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(8.0)
    s.connect(SOCK)
    return s
def read_answers(s, want, out):
    buf = b''
    try:
        while buf.count(b'\n') < want:
            data, anc, _, _ = s.recvmsg(1 << 20, socket.CMSG_SPACE(64))
            for level, kind, payload in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds = array.array('i')
                    fds.frombytes(payload[:len(payload) - len(payload) % 4])
                    for fd in fds:
                        out['fds'] += 1
                        try:
                            os.write(fd, b'ESCAPED\n')
                            out['wrote'] = True
                        except OSError:
                            pass
                        os.close(fd)
            if not data:
                break
            buf += data
    except OSError as e:
        out['error'] = type(e).__name__
    out['answers'] += [l.decode('utf-8', 'replace') for l in buf.split(b'\n')[:-1]]
def exchange(chunks, want, out):
    s = connect()
    try:
        for c in chunks:
            s.sendall(c)
    except OSError as e:
        out['error'] = type(e).__name__
    read_answers(s, want, out)
    s.close()
# Placeholders for what only the command knows: its tool call, the socket and its directory.
PLACEHOLDERS = {
    b'@CALL@': os.environ.get('BROKERED_SHELL_TOOL_CALL_ID', '').encode(),
    b'@SOCKDIR@': os.path.dirname(SOCK).encode(),
    b'@SOCK@': SOCK.encode(),
}
def decode(chunk):
    data = base64.b64decode(chunk)
    for key, value in PLACEHOLDERS.items():
        data = data.replace(key, value)
    return data
def run_case(case):
    out = {'name': case['name'], 'answers': [], 'fds': 0, 'wrote': False}
    chunks = [decode(c) for c in case['chunks']]
    if case.get('flood'):
        held = []
        for _ in range(case['flood']):
            s = connect()
            for c in chunks:
                s.sendall(c)
            held.append(s)
        flood = {'answers': [], 'fds': 0, 'wrote': False}
        if case.get('floodWant'):
            for s in held:
                read_answers(s, case['floodWant'], flood)
        out['floodAnswers'] = len(flood['answers'])
        out['floodFds'] = flood['fds']
        exchange([decode(c) for c in case['after']], 1, out)
        for s in held:
            s.close()
    else:
        exchange(chunks, case['want'], out)
    print('@@R ' + json.dumps(out), flush=True)
def snap(p):
    try:
        st = os.lstat(p)
    except OSError:
        return None
    entry = {'mode': st.st_mode, 'ino': st.st_ino, 'size': st.st_size, 'mtime': st.st_mtime_ns, 'uid': st.st_uid}
    if os.path.isfile(p) and not os.path.islink(p):
        with open(p, 'rb') as f:
            entry['sha256'] = hashlib.sha256(f.read()).hexdigest()
    if os.path.isdir(p) and not os.path.islink(p):
        entry['entries'] = {n: snap(os.path.join(p, n)) for n in sorted(os.listdir(p))}
    return entry
if sys.argv[1] == 'snap':
    print('@@SNAP ' + sys.argv[2] + ' ' + json.dumps({p: snap(p) for p in sys.argv[3:]}), flush=True)
else:
    for case in json.load(open(sys.argv[2])):
        run_case(case)
`;

/** One attempt on the socket (`send`) or in the shell (`shell`, judged by its status). */
export interface Route {
  name: string;
  /**
   * Lines sent on one connection (a string gets its newline; a Buffer is sent as is).
   * `@CALL@`, `@SOCK@` and `@SOCKDIR@` become the command's tool call id, the socket and its directory.
   */
  send?: Array<string | Buffer>;
  /** Answer lines to wait for (default: one per line sent). */
  want?: number;
  /** Shell commands; refused when they end with a non-zero status. */
  shell?: string;
  /** Hold this many connections open, each having sent `send`, while `after` is asked. */
  flood?: number;
  /** Answers each flood connection waits for before `after` is sent (default 0). */
  floodWant?: number;
  after?: string;
  /** Paths whose state (bytes, mode, inode, mtime, entries) must not change. */
  targets: string[];
  /** The run's inside snapshot (AttackOptions.inside) must not change either. */
  inside?: boolean;
  /** The audit record that shows the refusal. */
  audited: (record: AuditRecord) => boolean;
  /** Whether the answers are a refusal (default: each is DENY or `ok: false`, and no fd was granted). */
  refused?: (result: RouteResult) => boolean;
}

export interface RouteResult {
  name: string;
  answers: string[];
  fds: number;
  wrote: boolean;
  error?: string;
  floodAnswers?: number;
  floodFds?: number;
}

export interface Verdict {
  refused: boolean;
  unchanged: boolean;
  audited: boolean;
}

export interface AttackRun {
  run: CliRun;
  results: Map<string, RouteResult>;
  statuses: Map<string, number>;
  audit: AuditRecord[];
  /** The inside snapshot before and after the routes, by path. */
  inside: { before?: Record<string, unknown>; after?: Record<string, unknown> };
  verdicts: Map<string, Verdict>;
}

export interface AttackOptions {
  session: string;
  policy?: string;
  /**
   * Shell words naming paths that exist only while the command runs (the socket and its
   * directory: `"$SOCK"`, `"$SOCKDIR"`), snapshotted inside the sandbox around the routes.
   */
  inside?: string[];
  /** Shell run after the routes (inside the sandbox). */
  after?: string;
  /** Extra `run` flags (default `--no`: whatever needs approval is refused). */
  flags?: string[];
  /** Extra environment for the run. */
  env?: NodeJS.ProcessEnv;
}

const toChunk = (line: string | Buffer) => (typeof line === 'string' ? Buffer.from(`${line}\n`) : line).toString('base64');


/** A refusal: DENY, or a JSON answer with ok:false. */
export function isRefusalAnswer(answer: string): boolean {
  if (answer === 'DENY') return true;
  try {
    return (JSON.parse(answer) as { ok?: unknown }).ok === false;
  } catch {
    return false;
  }
}

/** An audit record of a refusal: not ok, answered deny (a prompt is a deny until a person approves). */
export const isDenyRecord = (record: AuditRecord) => !record.ok && record.decision === 'deny' && (record.verdict === 'deny' || record.verdict === 'prompt');

/** A deny record naming `file` (as given or resolved). */
export const deniedPath = (file: string) => (record: AuditRecord) =>
  isDenyRecord(record) && record.paths.some((p) => p.path === file || p.normalisedPath === file);

/** A deny record of a socket line that named `command`. */
export const deniedCommand = (command: string) => (record: AuditRecord) => isDenyRecord(record) && record.command === command;

/** The audit records a run logged (pino JSON lines on stderr with `phase: 'audit'`). */
function auditRecords(stderr: string): AuditRecord[] {
  const out: AuditRecord[] = [];
  for (const line of stderr.split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      const parsed = JSON.parse(line) as { phase?: string; audit?: AuditRecord };
      if (parsed.phase === 'audit' && parsed.audit) out.push(parsed.audit);
    } catch {
      // The command's own stderr.
    }
  }
  return out;
}

/** State of each path (undefined: absent), for before/after comparison. */
export async function states(paths: readonly string[]): Promise<Array<NodeState | undefined>> {
  const withEntries = async (p: string) => {
    const state = await nodeState(p);
    return state?.type === 'dir' ? ({ ...state, entries: (await fs.readdir(p)).sort().join('/') } as NodeState) : state;
  };
  return Promise.all(paths.map(withEntries));
}

/**
 * Runs every route in one `brokered-shell run` (socket routes first, in order, then the
 * shell routes), with the broker's warn-level log (its audit denials) on stderr.
 */
export async function attack(world: World, routes: readonly Route[], options: AttackOptions): Promise<AttackRun> {
  await writeClient(world.tools, routes);
  const targets = [...new Set(routes.flatMap((r) => r.targets))];
  const before = await states(targets);
  const snap = (phase: string) => (options.inside?.length ? `python3 "$TOOLS/client.py" snap ${phase} ${options.inside.join(' ')}` : '');
  const script = [
    ST,
    'SOCK="$BROKERED_SHELL_SOCKET"; SOCKDIR=$(dirname "$SOCK")',
    snap('before'),
    'python3 "$TOOLS/client.py" cases "$TOOLS/cases.json"',
    ...routes.filter((r) => r.shell).map((r) => `( ${r.shell ?? ''} ) 2>/dev/null; st ${r.name}`),
    snap('after'),
    options.after ?? '',
  ].join('\n');
  const args = ['run', ...(options.flags ?? ['--no']), '--workspace', world.ws, '--session', options.session];
  if (options.policy) args.push('--policy', options.policy);
  const run = await brokeredShell(world, [...args, '--', script], { env: { ...options.env, BROKERED_SHELL_LOG_LEVEL: 'warn' } });
  const after = await states(targets);
  const changed = changedTargets(targets, before, after);
  const snaps = new Map<string, Record<string, unknown>>();
  for (const match of run.out.matchAll(/^@@SNAP (\S+) (.*)$/gm)) snaps.set(match[1] ?? '', JSON.parse(match[2] ?? '{}') as Record<string, unknown>);
  const inside = { before: snaps.get('before'), after: snaps.get('after') };
  const insideSame = inside.before !== undefined && JSON.stringify(inside.before) === JSON.stringify(inside.after);
  const audit = auditRecords(run.stderr);
  const { results, statuses, verdicts } = judge(routes, run.out, audit, changed, insideSame);
  return { run, results, statuses, audit, inside, verdicts };
}

/**
 * Each route's verdict from what the command printed (`@@R` results, `st` statuses), the
 * audit records and the targets that changed.
 */
export function judge(
  routes: readonly Route[],
  stdout: string,
  audit: readonly AuditRecord[],
  changed: ReadonlySet<string>,
  insideSame = false,
): { results: Map<string, RouteResult>; statuses: Map<string, number>; verdicts: Map<string, Verdict> } {
  const results = new Map<string, RouteResult>();
  for (const match of stdout.matchAll(/^@@R (.*)$/gm)) {
    const result = JSON.parse(match[1] ?? '{}') as RouteResult;
    results.set(result.name, result);
  }
  const statuses = caseStatuses(stdout);
  const verdicts = new Map<string, Verdict>();
  for (const route of routes) {
    const result = results.get(route.name);
    let refused: boolean;
    if (route.shell) refused = (statuses.get(route.name) ?? 0) !== 0;
    else if (!result) refused = false;
    else if (route.refused) refused = route.refused(result);
    else refused = result.fds === 0 && result.answers.length > 0 && result.answers.every(isRefusalAnswer);
    verdicts.set(route.name, {
      refused,
      unchanged: (!route.inside || insideSame) && route.targets.every((t) => !changed.has(t)),
      audited: audit.some(route.audited),
    });
  }
  return { results, statuses, verdicts };
}

/** Writes the client and the cases file of the socket routes into `tools`. */
export async function writeClient(tools: string, routes: readonly Route[]): Promise<void> {
  await fs.writeFile(path.join(tools, 'client.py'), CLIENT_PY);
  const cases = routes
    .filter((r) => r.send)
    .map((r) => ({
      name: r.name,
      chunks: (r.send ?? []).map(toChunk),
      want: r.want ?? r.send?.length ?? 1,
      ...(r.flood ? { flood: r.flood, floodWant: r.floodWant ?? 0, after: [toChunk(r.after ?? '')] } : {}),
    }));
  await fs.writeFile(path.join(tools, 'cases.json'), JSON.stringify(cases));
}

/** The targets whose state differs between two `states` snapshots. */
export function changedTargets(targets: readonly string[], before: ReadonlyArray<NodeState | undefined>, after: ReadonlyArray<NodeState | undefined>): Set<string> {
  return new Set(targets.filter((_, i) => JSON.stringify(before[i]) !== JSON.stringify(after[i])));
}

/** The summary line the suite prints per file. */
export function summarise(file: string, verdicts: ReadonlyMap<string, Verdict>): string {
  const all = [...verdicts.values()];
  const count = (key: keyof Verdict) => all.filter((v) => v[key]).length;
  const line = `security: ${file} routes tried ${all.length}, refused ${count('refused')}, unchanged ${count('unchanged')}, audited ${count('audited')}`;
  console.info(line);
  return line;
}

/** A text token request line. */
export const tokenLine = (file: string, session: string, toolCallId = 'call-x', tokenClass = 'com.example.read-write') => `${tokenClass}\t${file}\t${session}\t${toolCallId}`;

/** A HostFileOperation line. */
export const hostOp = (fields: Record<string, unknown>) => JSON.stringify({ command: 'HostFileOperation', ...fields });
