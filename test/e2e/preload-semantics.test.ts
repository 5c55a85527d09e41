/**
 * The preload runtime keeps the semantics programs rely on: reads never reach the
 * broker; a host operation's failure comes back with the kernel's errno (EXDEV so `mv`
 * copies across file systems, ENOENT, ENOTEMPTY, EISDIR, EEXIST); new directories get
 * the mode the caller's umask gives; a process that forks, and one with many threads,
 * each get their answers.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { otherDevice, type OtherDevice } from '../native/helpers.js';
import { PRELOAD_MARK, SHOW_RUNTIME, openNetworkPolicy, runPreload } from './preload-helpers.js';
import { ST, brokeredShell, caseStatuses, describeRun, entryFor, makeWorld, onlyTurn, removeWorld, writeOld, type CliRun, type World } from './run-helpers.js';

let world: World;
const ws = (...parts: string[]) => path.join(world.ws, ...parts);
const read = (file: string) => fs.readFile(file, 'utf8');
const missing = (file: string) =>
  fs.lstat(file).then(
    () => false,
    () => true,
  );

beforeAll(async () => {
  world = await makeWorld('preload-semantics');
});
afterAll(() => removeWorld(world));

/** The log lines of one request kind in a debug-level run's stderr. */
function requestLines(stderr: string, message: 'token request' | 'host operation'): Array<Record<string, unknown>> {
  return stderr
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((line) => line.msg === message);
}

describe('reads', () => {
  let result: CliRun;

  beforeAll(async () => {
    for (let i = 0; i < 20; i++) await writeOld(ws('reads', `f${i}`), `line ${i}\n`);
    const script = [
      'cd reads',
      'cat f0 f1 > /dev/null',
      'grep -r line . > /dev/null',
      'wc -l f* > /dev/null',
      `python3 -c "import glob; [open(p).read() for p in glob.glob('f*')]"`,
      `"$NODE" -e "require('fs').readdirSync('.').forEach((f) => require('fs').readFileSync(f))"`,
      'echo x > f3',
    ].join('\n');
    result = await brokeredShell(world, ['run', '--runtime', 'preload', '--log-level', 'debug', '--workspace', world.ws, '--policy', openNetworkPolicy(world), '--', script]);
  });

  it('never reach the broker: one token request in all, for the one write', () => {
    expect(result.status, describeRun(result)).toBe(0);
    const tokens = requestLines(result.stderr, 'token request');
    expect(tokens.map((line) => line.path)).toEqual([ws('reads', 'f3')]);
    expect(requestLines(result.stderr, 'host operation')).toEqual([]);
  });
});

describe('errors come back as the kernel would give them', () => {
  const SESSION = 'preload-errno-session';
  let result: CliRun;
  let statuses: Map<string, number>;
  const py = (name: string, code: string) => `python3 -c "
import errno, os, sys
try:
    ${code}
    print('@@${name} 0')
except OSError as e:
    print('@@${name} ' + str(e.errno))
"`;

  beforeAll(async () => {
    await writeOld(ws('errno', 'full', 'inside'), 'x\n');
    await fs.mkdir(ws('errno', 'empty'));
    await fs.mkdir(ws('errno', 'dir'));
    await fs.mkdir(ws('errno', 'src'));
    await writeOld(ws('errno', 'file'), 'file\n');
    const script = [
      ST,
      SHOW_RUNTIME,
      'cd errno',
      py('mkdir-exists', "os.mkdir('dir')"),
      py('mkdir-no-parent', "os.mkdir('nope/x')"),
      py('rmdir-full', "os.rmdir('full')"),
      py('rmdir-file', "os.rmdir('file')"),
      py('unlink-dir', "os.unlink('dir')"),
      py('unlink-missing', "os.unlink('missing')"),
      py('rename-missing', "os.rename('missing', 'x')"),
      py('rename-onto-full', "os.rename('src', 'full')"),
      py('symlink-exists', "os.symlink('x', 'file')"),
      py('link-exists', "os.link('file', 'dir')"),
      py('rmdir-empty', "os.rmdir('empty')"),
      'rmdir full 2>&1; st rmdir-cli',
    ].join('\n');
    result = await runPreload(world, script, { session: SESSION });
    statuses = caseStatuses(result.out);
  });

  it('ran in the preload runtime', () => {
    expect(result.out.split('\n')[0], describeRun(result)).toBe(PRELOAD_MARK);
  });

  it.each([
    ['mkdir-exists', 17],
    ['mkdir-no-parent', 2],
    ['rmdir-full', 39],
    ['rmdir-file', 20],
    ['unlink-dir', 21],
    ['unlink-missing', 2],
    ['rename-missing', 2],
    ['rename-onto-full', 39],
    ['symlink-exists', 17],
    ['link-exists', 17],
    ['rmdir-empty', 0],
  ])('%s → errno %i', (name, errno) => {
    expect(statuses.get(name), describeRun(result)).toBe(errno);
  });

  it('the shell tools print the usual message', () => {
    expect(result.out).toContain("rmdir: failed to remove 'full': Directory not empty");
    expect(statuses.get('rmdir-cli')).toBe(1);
  });

  it('a failed operation changed nothing', async () => {
    expect(await read(ws('errno', 'full', 'inside'))).toBe('x\n');
    expect(await read(ws('errno', 'file'))).toBe('file\n');
    expect(await missing(ws('errno', 'empty'))).toBe(true);
  });
});

describe('across file systems', () => {
  const SESSION = 'preload-exdev-session';
  let other: OtherDevice;
  let result: CliRun;
  let statuses: Map<string, number>;

  beforeAll(async () => {
    other = otherDevice(world.ws);
    await writeOld(ws('xdev', 'a'), 'moved across\n', 0o640);
    await writeOld(ws('xdev', 'b'), 'stays\n');
    const policy = path.join(world.tools, 'xdev.json');
    await fs.writeFile(policy, JSON.stringify({ writableRoots: [other.dir] }));
    const script = [
      ST,
      `cd xdev`,
      `python3 -c "
import os
try:
    os.rename('b', os.environ['OTHER'] + '/b')
    print('@@rename 0')
except OSError as e:
    print('@@rename ' + str(e.errno))
"`,
      'mv a "$OTHER/a"; st mv',
    ].join('\n');
    result = await runPreload(world, script, { session: SESSION, policy }, { env: { OTHER: other.dir } });
    statuses = caseStatuses(result.out);
  });
  afterAll(() => other?.cleanup());

  it('rename(2) fails with EXDEV, as the kernel says', async () => {
    expect(statuses.get('rename'), describeRun(result)).toBe(18);
    expect(await read(ws('xdev', 'b'))).toBe('stays\n');
    // Nothing was refused: run lists no denial for it.
    expect(result.stderr).not.toContain('denied');
  });

  it('so mv copies and deletes, each asked again: the move happens and the source is backed up', async () => {
    expect(statuses.get('mv'), describeRun(result)).toBe(0);
    expect(await read(path.join(other.dir, 'a'))).toBe('moved across\n');
    expect(await missing(ws('xdev', 'a'))).toBe(true);
    const manifest = await onlyTurn(world, SESSION);
    // Backed up before the first attempt (the rename that came back EXDEV).
    expect(entryFor(manifest, ws('xdev', 'a'))).toMatchObject({ kind: 'file', mode: 0o640, size: 'moved across\n'.length });
  });
});

describe('modes, forks and threads', () => {
  const SESSION = 'preload-process-session';
  const THREADS = 8;
  const PER_THREAD = 5;
  let result: CliRun;
  let statuses: Map<string, number>;

  beforeAll(async () => {
    for (const name of ['parent-before', 'child', 'parent-after']) await writeOld(ws('proc', name), 'old\n');
    for (let t = 0; t < THREADS; t++) for (let i = 0; i < PER_THREAD; i++) await writeOld(ws('proc', 'threads', `t${t}-${i}`), `old ${t} ${i}\n`);
    const script = [
      ST,
      'cd proc',
      '(umask 027 && mkdir m027); st mkdir-umask',
      '(umask 0 && mkdir -m 1777 sticky); st mkdir-mode',
      // The parent has a connection before fork; the child must not share it.
      `python3 -c "
import os
open('parent-before', 'w').write('parent')
pid = os.fork()
if pid == 0:
    open('child', 'w').write('child')
    os.rename('child', 'child-moved')
    os._exit(0)
open('parent-after', 'w').write('parent')
_, status = os.waitpid(pid, 0)
raise SystemExit(os.waitstatus_to_exitcode(status))
"; st fork`,
      `python3 -c "
import threading
def work(t):
    for i in range(${PER_THREAD}):
        name = 'threads/t%d-%d' % (t, i)
        with open(name, 'w') as f:
            f.write('new %d %d' % (t, i))
threads = [threading.Thread(target=work, args=(t,)) for t in range(${THREADS})]
[t.start() for t in threads]
[t.join() for t in threads]
"; st threads`,
    ].join('\n');
    result = await runPreload(world, script, { session: SESSION });
    statuses = caseStatuses(result.out);
  });

  it('a new directory gets the mode the caller asked for and its umask allows', async () => {
    expect(statuses.get('mkdir-umask'), describeRun(result)).toBe(0);
    expect((await fs.stat(ws('proc', 'm027'))).mode & 0o7777).toBe(0o750);
    expect(statuses.get('mkdir-mode')).toBe(0);
    expect((await fs.stat(ws('proc', 'sticky'))).mode & 0o7777).toBe(0o1777);
  });

  it('parent and forked child each get their own answers', async () => {
    expect(statuses.get('fork'), describeRun(result)).toBe(0);
    expect(await read(ws('proc', 'parent-before'))).toBe('parent');
    expect(await read(ws('proc', 'parent-after'))).toBe('parent');
    expect(await read(ws('proc', 'child-moved'))).toBe('child');
    const manifest = await onlyTurn(world, SESSION);
    for (const name of ['parent-before', 'child', 'parent-after']) expect(entryFor(manifest, ws('proc', name)), name).toMatchObject({ kind: 'file', size: 4 });
  });

  it('threads writing at once: every write happens and every file is backed up with its own bytes', async () => {
    expect(statuses.get('threads'), describeRun(result)).toBe(0);
    const manifest = await onlyTurn(world, SESSION);
    for (let t = 0; t < THREADS; t++) {
      for (let i = 0; i < PER_THREAD; i++) {
        const file = ws('proc', 'threads', `t${t}-${i}`);
        expect(await read(file)).toBe(`new ${t} ${i}`);
        expect(entryFor(manifest, file), file).toMatchObject({ kind: 'file', size: `old ${t} ${i}\n`.length });
      }
    }
  });
});
