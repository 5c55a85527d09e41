/**
 * `brokered-shell run` as a process: its exit status is the command's (128+n when a
 * signal killed it), 126 with a clear message when the sandbox cannot start (the kernel
 * refuses another Landlock layer; the temp dir cannot be made); the command finds the
 * broker through its environment and a token request it sends gets SANDBOX inside the
 * workspace and DENY outside; stdout is the command's own, byte for byte; a signal
 * that stops `run` stops the command and the turn is still committed.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ASK_PY,
  REPO_ROOT,
  ST,
  blobOf,
  brokeredShell,
  caseStatuses,
  describeRun,
  entryFor,
  makeWorld,
  onlyTurn,
  removeWorld,
  run,
  turnsOf,
  writeOld,
  type World,
} from './run-helpers.js';

/**
 * nest.py PROGRAM ARGS...: stacks Landlock layers on itself until the kernel refuses
 * another (it allows 16), then execs PROGRAM. The layers only forbid making block
 * devices (and allow cross-directory renames everywhere), so the CLI works as usual,
 * but the sandbox's own landlock_restrict_self fails: a real refusal, no test hook.
 */
const NEST_PY = `
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
MAKE_BLOCK, REFER = 1 << 11, 1 << 13
CREATE, ADD_RULE, RESTRICT = 444, 445, 446  # same numbers on x86_64 and aarch64
if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
    sys.exit('no_new_privs: errno %d' % ctypes.get_errno())
root = os.open('/', os.O_PATH)
layers = 0
while True:
    attr = ctypes.create_string_buffer(struct.pack('Q', MAKE_BLOCK | REFER), 8)
    ruleset = libc.syscall(CREATE, attr, 8, 0)
    if ruleset < 0:
        sys.exit('landlock_create_ruleset: errno %d' % ctypes.get_errno())
    rule = ctypes.create_string_buffer(struct.pack('=Qi', REFER, root), 12)
    if libc.syscall(ADD_RULE, ruleset, 1, rule, 0) != 0:
        sys.exit('landlock_add_rule: errno %d' % ctypes.get_errno())
    done = libc.syscall(RESTRICT, ruleset, 0) != 0
    err = ctypes.get_errno()
    os.close(ruleset)
    if done:
        if err != 7:  # E2BIG: the layer limit, what we came for
            sys.exit('landlock_restrict_self: errno %d' % err)
        break
    layers += 1
print('landlock layers', layers, file=sys.stderr)
os.execvp(sys.argv[1], sys.argv[1:])
`;

/** Tries calls that fail without any sandbox and prints each errno, to compare inside and outside. */
const ERRNO_PY = `
import os
def t(name, fn):
    try:
        fn()
        print(name, 'ok')
    except OSError as e:
        print(name, e.errno, os.strerror(e.errno))
t('open-missing-dir', lambda: os.open('missing/f', os.O_WRONLY | os.O_CREAT))
t('open-dir', lambda: os.open('dir', os.O_WRONLY))
t('open-through-file', lambda: os.open('a/x', os.O_WRONLY | os.O_CREAT))
t('open-excl', lambda: os.open('a', os.O_WRONLY | os.O_CREAT | os.O_EXCL))
t('unlink-missing', lambda: os.unlink('missing'))
t('unlink-dir', lambda: os.unlink('dir'))
t('mkdir-exists', lambda: os.mkdir('dir'))
t('mkdir-missing-parent', lambda: os.mkdir('missing/sub'))
t('rmdir-nonempty', lambda: os.rmdir('full'))
t('rmdir-file', lambda: os.rmdir('a'))
t('rename-missing', lambda: os.rename('missing', 'b'))
t('rename-into-missing', lambda: os.rename('a', 'missing/b'))
t('rename-dir-over-file', lambda: os.rename('dir', 'a'))
t('rename-file-over-dir', lambda: os.rename('a', 'dir'))
t('symlink-exists', lambda: os.symlink('x', 'a'))
t('link-exists', lambda: os.link('a', 'a'))
t('chmod-missing', lambda: os.chmod('missing', 0o600))
t('truncate-missing', lambda: os.truncate('missing', 0))
t('utime-missing', lambda: os.utime('missing'))
t('name-too-long', lambda: os.open('x' * 300, os.O_WRONLY | os.O_CREAT))
t('symlink-loop', lambda: (os.symlink('loop', 'loop'), os.open('loop', os.O_WRONLY | os.O_CREAT)))
`;

let world: World;

beforeAll(async () => {
  world = await makeWorld('process');
  await fs.writeFile(path.join(world.tools, 'ask.py'), ASK_PY);
  await fs.writeFile(path.join(world.tools, 'nest.py'), NEST_PY);
});

afterAll(() => removeWorld(world));

describe('run: exit status', () => {
  it.concurrent.for<[string, number]>([
    ['exit 7', 7],
    ['false', 1],
    ['kill -TERM $$', 128 + 15],
    ['kill -KILL $$', 128 + 9],
    ['sh -c "kill -SEGV \\$\\$"', 128 + 11],
    ['no-such-program-anywhere', 127],
  ])('%s → %i', async ([command, status], { expect }) => {
    const result = await run(world, command);
    expect(result.status, describeRun(result)).toBe(status);
    expect(result.signal).toBeNull();
  });
});

describe('run: the sandbox cannot start → 126, a clear message, nothing ran', () => {
  it('when the kernel refuses another Landlock layer', async () => {
    const result = await run(world, 'echo ran > ran.txt', { session: 'no-landlock' }, { wrapper: ['python3', path.join(world.tools, 'nest.py')] });
    expect(result.stderr).toMatch(/^landlock layers \d+$/m);
    expect(result.status, describeRun(result)).toBe(126);
    expect(result.stderr).toMatch(/^brokered-sandbox: the sandbox cannot be set up, nothing was run: landlock_restrict_self: Argument list too long$/m);
    await expect(fs.stat(path.join(world.ws, 'ran.txt'))).rejects.toThrow(/ENOENT/);
  });

  it('when the temp dir for the command cannot be made', async () => {
    const missing = path.join(world.base, 'no-such-tmp');
    const result = await run(world, 'echo ran > ran.txt', {}, { env: { TMPDIR: missing } });
    expect(result.status, describeRun(result)).toBe(126);
    expect(result.stderr).toContain('brokered-shell run: the sandbox cannot start, nothing was run: ');
    expect(result.stderr).toContain(missing);
    await expect(fs.stat(path.join(world.ws, 'ran.txt'))).rejects.toThrow(/ENOENT/);
  });
});

describe('run: the launcher was never built → 126', () => {
  it('a copy of the package without build/ says so and runs nothing', async () => {
    // The package as a fresh clone would be after `tsc` alone: dist/, bin/, package.json, no native build.
    const pkg = path.join(world.base, 'unbuilt-package');
    await fs.mkdir(pkg);
    for (const part of ['dist', 'bin', 'package.json']) await fs.cp(path.join(REPO_ROOT, part), path.join(pkg, part), { recursive: true });
    await fs.symlink(path.join(REPO_ROOT, 'node_modules'), path.join(pkg, 'node_modules'));
    const result = await run(world, 'echo ran > ran.txt', {}, { cli: path.join(pkg, 'bin', 'brokered-shell.js') });
    expect(result.status, describeRun(result)).toBe(126);
    expect(result.stderr).toContain('brokered-shell run: the sandbox cannot start, nothing was run: the brokered-sandbox launcher was not found');
    expect(result.stderr).toContain(path.join(pkg, 'build', 'Release', 'brokered-sandbox'));
    await expect(fs.stat(path.join(world.ws, 'ran.txt'))).rejects.toThrow(/ENOENT/);
  });
});

describe('run: a TMPDIR too deep for a socket path', () => {
  it('still runs, and leaves nothing behind in TMPDIR', async () => {
    const deep = path.join(world.base, 'd'.repeat(100));
    await fs.mkdir(deep);
    await writeOld(path.join(world.ws, 'deep.txt'), 'before\n');
    const result = await run(world, 'echo after > deep.txt; test -S "$BROKERED_SHELL_SOCKET" && echo socket-ok', { session: 'deep' }, { env: { TMPDIR: deep } });
    expect(result.status, describeRun(result)).toBe(0);
    expect(result.out).toBe('socket-ok\n');
    expect(await fs.readFile(path.join(world.ws, 'deep.txt'), 'utf8')).toBe('after\n');
    expect((await onlyTurn(world, 'deep')).files.map((f) => f.path)).toEqual([path.join(world.ws, 'deep.txt')]);
    expect(await fs.readdir(deep)).toEqual([]);
  });
});

describe('run: what the command finds in its environment', () => {
  it('the broker variables, and a socket that answers SANDBOX inside the workspace and DENY outside', async () => {
    await writeOld(path.join(world.ws, 'env.txt'), 'before\n');
    await writeOld(path.join(world.ws, 'kernel.txt'), 'before\n');
    const line = (cls: string, file: string) => `"${cls}"$'\\t'"${file}"$'\\t'"$BROKERED_SHELL_SESSION_ID"$'\\t'"$BROKERED_SHELL_TOOL_CALL_ID"`;
    const script = [
      ST,
      'env | grep "^BROKERED_SHELL_" | sort',
      'test -S "$BROKERED_SHELL_SOCKET"; st socket',
      `python3 "$TOOLS/ask.py" ${line('file.read-write', '$PWD/env.txt')} ${line('file.read-write', '$OUT/elsewhere')} ${line('file.read', '$PWD/env.txt')}`,
      'echo changed > kernel.txt',
    ].join('\n');
    const result = await run(world, script, { session: 'env-session' });
    expect(result.status, describeRun(result)).toBe(0);
    const vars = Object.fromEntries([...result.out.matchAll(/^(BROKERED_SHELL_[A-Z_]+)=(.*)$/gm)].map((m) => [m[1] ?? '', m[2] ?? '']));
    expect(Object.keys(vars)).toEqual(
      expect.arrayContaining(['BROKERED_SHELL_SOCKET', 'BROKERED_SHELL_SESSION_ID', 'BROKERED_SHELL_TOOL_CALL_ID', 'BROKERED_SHELL_TRACE_ID']),
    );
    expect(vars.BROKERED_SHELL_SESSION_ID).toBe('env-session');
    expect(vars.BROKERED_SHELL_TOOL_CALL_ID).not.toBe('');
    expect(vars.BROKERED_SHELL_TRACE_ID).not.toBe('');
    expect(caseStatuses(result.out).get('socket')).toBe(0);
    expect([...result.out.matchAll(/^answer (.*)$/gm)].map((m) => m[1])).toEqual(['SANDBOX', 'DENY', 'SANDBOX']);
    // The socket and its directory are gone once the run is over.
    await expect(fs.stat(path.dirname(vars.BROKERED_SHELL_SOCKET ?? '/nonexistent/x'))).rejects.toThrow(/ENOENT/);
    // A read-write token is a promise to write: the file was backed up for it, under the tool call it named.
    const turn = await onlyTurn(world, 'env-session');
    const tokenEntry = entryFor(turn, path.join(world.ws, 'env.txt'));
    expect(tokenEntry?.operation).toBe('open');
    expect(tokenEntry?.toolCallId).toBe(vars.BROKERED_SHELL_TOOL_CALL_ID);
    // A write the kernel reported carries the ids the command was given.
    const kernelEntry = entryFor(turn, path.join(world.ws, 'kernel.txt'));
    expect(kernelEntry?.toolCallId).toBe(vars.BROKERED_SHELL_TOOL_CALL_ID);
    expect(kernelEntry?.traceId).toBe(vars.BROKERED_SHELL_TRACE_ID);
    expect(turn.files.map((f) => path.basename(f.path)).sort()).toEqual(['env.txt', 'kernel.txt']);
  });
});

describe('run: errors the kernel would give anyway', () => {
  it('reach the program exactly as without the sandbox, and are not reported as denials', async () => {
    const script = path.join(world.tools, 'errno.py');
    await fs.writeFile(script, ERRNO_PY);
    const setUp = async (dir: string) => {
      await fs.mkdir(path.join(dir, 'dir'), { recursive: true });
      await fs.mkdir(path.join(dir, 'full'));
      await fs.writeFile(path.join(dir, 'full', 'x'), 'x\n');
      await fs.writeFile(path.join(dir, 'a'), 'a\n');
    };
    const twin = path.join(world.base, 'native-twin');
    await setUp(twin);
    await setUp(path.join(world.ws, 'errno'));
    const native = execFileSync('python3', [script], { cwd: twin, encoding: 'utf8' });
    expect(native).toMatch(/^open-missing-dir 2 /m);
    const result = await run(world, `cd errno && python3 "${script}"`);
    expect(result.status, describeRun(result)).toBe(0);
    expect(result.out).toBe(native);
    expect(result.stderr).not.toContain('brokered-shell: denied');
  });
});

describe('run: output', () => {
  it("stdout is exactly the command's, byte for byte; brokered-shell speaks on stderr", async () => {
    await writeOld(path.join(world.ws, 'out.txt'), 'before\n');
    const result = await run(world, `printf 'line one\\n'; printf 'to stderr\\n' >&2; echo changed > out.txt; printf '\\000\\377 end'`);
    expect(result.status, describeRun(result)).toBe(0);
    expect(result.stdout.equals(Buffer.concat([Buffer.from('line one\n'), Buffer.from([0, 0xff]), Buffer.from(' end')]))).toBe(true);
    expect(result.stderr).toMatch(/^to stderr$/m);
    expect(result.stderr).toMatch(/^brokered-shell: turn \S+ backed up 1 file /m);
  });

  it('reopening its own stdout/stderr by name works when they are files outside the workspace; a read-only fd stays read-only', async () => {
    const logOut = path.join(world.outside, 'stdout.log');
    const logErr = path.join(world.outside, 'stderr.log');
    await writeOld(path.join(world.outside, 'ro.txt'), 'read only\n', 0o644);
    const script = [
      `printf 'one\\n' >> /dev/stdout; s1=$?`,
      `printf 'two\\n' >> /proc/self/fd/1; s2=$?`,
      `printf 'err\\n' >> /dev/stderr; s3=$?`,
      `exec 4<"$OUT/ro.txt"; printf bad >> /dev/fd/4; s4=$?`,
      'echo "statuses $s1 $s2 $s3 $s4"',
    ].join('\n');
    // The caller sends the output to files (appending, so every writer's bytes stay in order).
    const wrapper = ['sh', '-c', 'exec "$0" "$@" >>"$LOG_OUT" 2>>"$LOG_ERR"'];
    const result = await run(world, script, {}, { wrapper, env: { LOG_OUT: logOut, LOG_ERR: logErr } });
    const stderr = await fs.readFile(logErr, 'utf8');
    expect(result.status, stderr).toBe(0);
    expect(await fs.readFile(logOut, 'utf8')).toBe('one\ntwo\nstatuses 0 0 0 1\n');
    expect(stderr).toMatch(/^err$/m);
    expect(stderr).toMatch(/\/dev\/fd\/4: Permission denied/);
    expect(stderr).toContain(`brokered-shell: denied write ${path.join(world.outside, 'ro.txt')}: `);
    expect(await fs.readFile(path.join(world.outside, 'ro.txt'), 'utf8')).toBe('read only\n');
  });

  it('the command reads its own stdin', async () => {
    const result = await brokeredShell(world, ['run', '--workspace', world.ws, '--', 'tr a-z A-Z'], { stdin: 'piped in\n' });
    expect(result.status, describeRun(result)).toBe(0);
    expect(result.out).toBe('PIPED IN\n');
  });
});

describe('run: what the command leaves running', () => {
  it('ends with the command: a background process is stopped, not left holding stdout', async () => {
    const result = await run(world, 'sleep 120 & echo "background $!"');
    expect(result.status, describeRun(result)).toBe(0);
    const pid = Number(/^background (\d+)$/m.exec(result.out)?.[1]);
    expect(pid).toBeGreaterThan(0);
    // Gone (or, if the pid was reused already, no longer that sleep).
    const cmdline = await fs.readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    expect(cmdline).not.toBe('sleep\u0000120\u0000');
  });
});

describe('run: several runs of one session at once', () => {
  it('each commits its own turn with its own backups', async () => {
    const names = ['p1', 'p2', 'p3', 'p4'];
    for (const name of names) await writeOld(path.join(world.ws, `${name}.txt`), `${name} before\n`);
    const results = await Promise.all(names.map((name) => run(world, `echo changed > ${name}.txt`, { session: 'parallel', message: name })));
    for (const result of results) expect(result.status, describeRun(result)).toBe(0);
    const turns = await turnsOf(world, 'parallel');
    expect(turns.map((t) => t.message).sort()).toEqual(names);
    for (const turn of turns) {
      expect(turn.committedAt).not.toBeNull();
      expect(turn.files.map((f) => f.path)).toEqual([path.join(world.ws, `${turn.message ?? ''}.txt`)]);
      const [entry] = turn.files;
      if (entry) expect((await blobOf(world, turn, entry)).toString('utf8')).toBe(`${turn.message ?? ''} before\n`);
    }
  });
});

describe('run: stopped by a signal', () => {
  // SIGINT stops a shell waiting for a program only when the program gets it too: bash waits, then carries on.
  it.each([
    ['SIGTERM', 143],
    ['SIGINT', 130],
    ['SIGHUP', 129],
  ] as const)('passes %s on to the command and what it started, commits the turn, exits %i and cleans up', async (signal, status) => {
    const tmp = path.join(world.base, `tmp-${signal}`);
    const name = `stopped-${signal}.txt`;
    const session = `stopped-${signal}`;
    await fs.mkdir(tmp);
    await writeOld(path.join(world.ws, name), 'before\n');
    let pid = -1;
    let sent = false;
    const result = await run(
      world,
      `echo changed > ${name}; echo ready; sleep 600; echo not-reached`,
      { session },
      {
        env: { TMPDIR: tmp },
        onSpawn: (p) => (pid = p),
        onStdout: (text) => {
          if (sent || !text.includes('ready\n')) return;
          sent = true;
          process.kill(pid, signal);
        },
      },
    );
    expect(result.status, describeRun(result)).toBe(status);
    expect(result.out).toBe('ready\n');
    expect(await fs.readFile(path.join(world.ws, name), 'utf8')).toBe('changed\n');
    const turn = await onlyTurn(world, session);
    const entry = entryFor(turn, path.join(world.ws, name));
    if (!entry) throw new Error(`${name} was not backed up`);
    expect((await blobOf(world, turn, entry)).toString('utf8')).toBe('before\n');
    expect(await fs.readdir(tmp)).toEqual([]);
    expect((await turnsOf(world, session)).every((t) => t.committedAt !== null)).toBe(true);
  });
});
