/**
 * `brokered-shell run` end to end: what the command must not be able to do to the
 * machinery that protects it. It cannot turn backups off or commit the turn through
 * the broker socket, cannot change the backup store, cannot kill, stop or ptrace the
 * supervisor or the broker, cannot use io_uring and cannot mount — and after every
 * attempt its writes are still backed up and the turn is committed as usual.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TurnManifest } from '../../src/backup/index.js';
import {
  ASK_PY,
  ST,
  blobOf,
  caseStatuses,
  describeRun,
  entryFor,
  makeWorld,
  removeWorld,
  run,
  treeState,
  turnsOf,
  writeOld,
  type CliRun,
  type NodeState,
  type World,
} from './run-helpers.js';

const SESSION = 'lockdown';

/**
 * sys.py ptrace PID | io_uring: tries the call; exit 0 if it worked (and undoes it),
 * else exit with the errno.
 */
const SYS_PY = `
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.ptrace.restype = ctypes.c_long
what = sys.argv[1]
if what == 'ptrace':
    pid = int(sys.argv[2])
    worst = 0
    for request in (16, 0x4206):  # PTRACE_ATTACH, PTRACE_SEIZE
        if libc.ptrace(request, pid, None, None) == 0:
            libc.ptrace(17, pid, None, None)  # PTRACE_DETACH
            sys.exit(0)
        worst = ctypes.get_errno()
    sys.exit(worst)
if what == 'io_uring':
    params = ctypes.create_string_buffer(120)
    fd = libc.syscall(425, 8, params)  # io_uring_setup, same number on x86_64 and aarch64
    if fd >= 0:
        os.close(fd)
        sys.exit(0)
    sys.exit(ctypes.get_errno())
sys.exit(100)
`;

/** Each must end with a non-zero status (the control commands are checked by their answers). */
const ATTEMPTS = [
  'home-new-file',
  'home-overwrite',
  'home-append',
  'home-rm',
  'home-mv',
  'home-chmod',
  'kill-supervisor',
  'kill-broker',
  'stop-broker',
  'ptrace-supervisor',
  'ptrace-broker',
  'broker-mem',
  'io-uring',
  'mount',
  'unshare-mount',
] as const;

let world: World;
let homeBefore: Record<string, NodeState>;
let firstTurn: TurnManifest;
let result: CliRun;
let statuses: Map<string, number>;
let turns: TurnManifest[];

beforeAll(async () => {
  world = await makeWorld('lockdown');
  await fs.writeFile(path.join(world.tools, 'ask.py'), ASK_PY);
  await fs.writeFile(path.join(world.tools, 'sys.py'), SYS_PY);
  const f = path.join(world.ws, 'f');
  await writeOld(f, 'zero\n', 0o640);
  // A first turn, so the store holds a manifest and a blob the command could go after.
  const first = await run(world, 'echo one > f', { session: SESSION });
  if (first.status !== 0) throw new Error(describeRun(first));
  const [committed] = await turnsOf(world, SESSION);
  if (!committed) throw new Error('the first turn was not committed');
  firstTurn = committed;
  homeBefore = await treeState(world.home);

  const script = [
    ST,
    `python3 "$TOOLS/ask.py" '{"command":"EnableModifyBackup","enabled":false}' '{"command":"CommitModifyBackup","commitMsg":"from inside"}' '{"command":"Shutdown"}'; st control`,
    'echo two > f; st write-after-control',
    'echo x > "$BROKERED_SHELL_HOME/evil"; st home-new-file',
    'files=$(find "$BROKERED_SHELL_HOME" -type f); echo "store files: $(echo "$files" | wc -l)"',
    // Status 0 if any one of the store's files could be written.
    'w=no; for x in $files; do echo x > "$x" 2>/dev/null && w=yes; done; [ $w = yes ]; st home-overwrite',
    'w=no; for x in $files; do echo x >> "$x" 2>/dev/null && w=yes; done; [ $w = yes ]; st home-append',
    'rm -rf "$BROKERED_SHELL_HOME" 2>/dev/null; st home-rm',
    'mv "$BROKERED_SHELL_HOME" "$BROKERED_SHELL_HOME.gone"; st home-mv',
    'chmod -R 777 "$BROKERED_SHELL_HOME" 2>/dev/null; st home-chmod',
    'SUP=$PPID; BROKER=$(awk \'/^PPid:/{print $2}\' /proc/$SUP/status)',
    'echo "pids $SUP $(cat /proc/$SUP/comm) $BROKER"',
    'kill -KILL $SUP; st kill-supervisor',
    'kill -KILL $BROKER; st kill-broker',
    'kill -STOP $BROKER; st stop-broker',
    'python3 "$TOOLS/sys.py" ptrace $SUP; st ptrace-supervisor',
    'python3 "$TOOLS/sys.py" ptrace $BROKER; st ptrace-broker',
    'echo x > /proc/$BROKER/mem; st broker-mem',
    'python3 "$TOOLS/sys.py" io_uring; st io-uring',
    'mount -t tmpfs none "$PWD"; st mount',
    `unshare -rm sh -c 'mount -t tmpfs none "$PWD" && echo mounted'; st unshare-mount`,
    'echo three >> f; st write-at-end',
  ].join('\n');
  result = await run(world, script, { session: SESSION, message: 'lockdown attempts' });
  statuses = caseStatuses(result.out);
  turns = await turnsOf(world, SESSION);
});

afterAll(() => removeWorld(world));

describe('run: the command cannot undermine the broker', () => {
  it('finishes normally: exit 0, every attempt reported', () => {
    expect(result.status, describeRun(result)).toBe(0);
    expect(result.signal).toBeNull();
    for (const name of [...ATTEMPTS, 'control', 'write-after-control', 'write-at-end']) expect(statuses.has(name), name).toBe(true);
  });

  it.each(ATTEMPTS)('%s: fails', (name) => {
    expect(statuses.get(name), describeRun(result)).not.toBe(0);
  });

  it('found the right processes: its supervisor and the run process itself', () => {
    const match = /^pids (\d+) (\S+) (\d+)$/m.exec(result.out);
    expect(match, describeRun(result)).not.toBeNull();
    expect(match?.[2]).toBe('brokered-sandbo');
    expect(Number(match?.[3])).toBe(result.pid);
  });

  it('control commands on the socket are refused', () => {
    const answers = [...result.out.matchAll(/^answer (.*)$/gm)].map((m) => JSON.parse(m[1] ?? 'null') as Record<string, unknown>);
    expect(answers).toHaveLength(3);
    for (const answer of answers) {
      expect(answer.ok).toBe(false);
      expect(answer.errorCode).toBe('BSH_CONTROL_REFUSED');
    }
  });

  it('the turn is still backed up and committed once, with the run message', async () => {
    expect(turns.map((t) => t.message)).toEqual(['echo one > f', 'lockdown attempts']);
    const turn = turns[1];
    if (!turn) throw new Error('no second turn');
    expect(turn.committedAt).not.toBeNull();
    const entry = entryFor(turn, path.join(world.ws, 'f'));
    expect(entry, 'f was not backed up after the attempt to disable backups').toBeDefined();
    if (entry) expect((await blobOf(world, turn, entry)).toString('utf8')).toBe('one\n');
    expect(await fs.readFile(path.join(world.ws, 'f'), 'utf8')).toBe('two\nthree\n');
  });

  it('the store is untouched: every file it held is as it was, and nothing was added by the command', async () => {
    expect(Number(/^store files: (\d+)$/m.exec(result.out)?.[1])).toBeGreaterThan(1);
    const after = await treeState(world.home);
    for (const [rel, state] of Object.entries(homeBefore)) {
      if (state.type === 'dir') continue;
      expect(after[rel], rel).toEqual(state);
    }
    expect(after.evil).toBeUndefined();
    await expect(fs.stat(`${world.home}.gone`)).rejects.toThrow();
    expect(firstTurn.files.map((f) => f.path)).toEqual([path.join(world.ws, 'f')]);
  });

  it('stderr names the refused store writes', () => {
    expect(result.stderr).toContain(`brokered-shell: denied write ${path.join(world.home, 'evil')}: `);
    expect(result.stderr).toMatch(/brokered-shell: denied delete \S*home\S*: /);
  });

  it('nothing got mounted', () => {
    expect(result.out).not.toMatch(/^mounted$/m);
  });
});
