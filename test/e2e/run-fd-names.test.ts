/**
 * Names reached through a descriptor, in the real kernel sandbox (`brokered-shell run`):
 * - an fd alias used as a directory (/dev/fd/N/name, /dev/stdin/name) reaches the
 *   directory that fd holds, as /proc/self/fd/N/name does; one of a directory outside the
 *   roots is refused and makes nothing;
 * - an O_TMPFILE made in the workspace gets a workspace name by every way the kernel
 *   offers (linkat of /proc/self/fd/N or /dev/fd/N with AT_SYMLINK_FOLLOW, AT_EMPTY_PATH,
 *   another sandboxed process's /proc/<pid>/fd/N); a link of the magic link itself
 *   (no AT_SYMLINK_FOLLOW, Python's os.link before 3.14) gets the kernel's EXDEV;
 * - a descriptor of a file that has a name is linked as that file where it lives: an
 *   outside file is refused, a workspace file gets a second name.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ST, caseStatuses, describeRun, makeWorld, removeWorld, run, treeState, type CliRun, type NodeState, type World } from './run-helpers.js';

const EACCES = 13;
const EEXIST = 17;
const EXDEV = 18;

/** linkat(2) in each form, from Python through ctypes; prints `@@NAME ERRNO` (0: done). */
const LINK_PY = `
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, AT_SYMLINK_FOLLOW, AT_EMPTY_PATH = -100, 0x400, 0x1000

def report(name, rc):
    print('@@%s %d' % (name, 0 if rc == 0 else ctypes.get_errno()), flush=True)

def linkat(old_fd, old, new, flags):
    return libc.linkat(old_fd, old.encode(), AT_FDCWD, new.encode(), flags)

def tmpfile(where, data):
    fd = os.open(where, os.O_TMPFILE | os.O_WRONLY, 0o644)
    os.write(fd, data)
    return fd

fd = tmpfile('.', b'follow\\n')
report('tmpfile-proc-follow', linkat(AT_FDCWD, '/proc/self/fd/%d' % fd, 't-proc.txt', AT_SYMLINK_FOLLOW))
fd = tmpfile('.', b'devfd\\n')
report('tmpfile-devfd-follow', linkat(AT_FDCWD, '/dev/fd/%d' % fd, 't-devfd.txt', AT_SYMLINK_FOLLOW))
fd = tmpfile('sub', b'empty\\n')
report('tmpfile-empty-path', linkat(fd, '', 't-empty.txt', AT_EMPTY_PATH))
fd = tmpfile('.', b'nofollow\\n')
report('tmpfile-nofollow', linkat(AT_FDCWD, '/proc/self/fd/%d' % fd, 't-nofollow.txt', 0))
try:
    os.link('/proc/self/fd/%d' % fd, 't-oslink.txt')
    print('@@tmpfile-os-link 0')
except OSError as e:
    print('@@tmpfile-os-link %d' % e.errno)
report('tmpfile-nofollow-existing', linkat(AT_FDCWD, '/proc/self/fd/%d' % fd, 't-proc.txt', 0))

# Another sandboxed process holds the O_TMPFILE; this one names it through /proc/<pid>/fd/N.
r, w = os.pipe()
child = os.fork()
if child == 0:
    held = tmpfile('.', b'other\\n')
    os.write(w, b'%d\\n' % held)
    time.sleep(30)
    os._exit(0)
held = int(os.read(r, 32))
report('tmpfile-other-process', linkat(AT_FDCWD, '/proc/%d/fd/%d' % (child, held), 't-other.txt', AT_SYMLINK_FOLLOW))
os.kill(child, 9)
os.waitpid(child, 0)

secret = os.open(os.environ['OUT'] + '/dir/secret.txt', os.O_RDONLY)
report('named-outside-follow', linkat(AT_FDCWD, '/proc/self/fd/%d' % secret, 'stolen-follow.txt', AT_SYMLINK_FOLLOW))
report('named-outside-empty-path', linkat(secret, '', 'stolen-empty.txt', AT_EMPTY_PATH))
mine = os.open('named.txt', os.O_RDONLY)
report('named-workspace-follow', linkat(AT_FDCWD, '/proc/self/fd/%d' % mine, 'named-too.txt', AT_SYMLINK_FOLLOW))
`;

let world: World;
let result: CliRun;
let statuses: Map<string, number>;
let outsideBefore: Record<string, NodeState>;

beforeAll(async () => {
  world = await makeWorld('fd-names');
  await fs.mkdir(path.join(world.ws, 'sub'));
  await fs.writeFile(path.join(world.ws, 'named.txt'), 'named\n');
  await fs.mkdir(path.join(world.outside, 'dir'));
  await fs.writeFile(path.join(world.outside, 'dir', 'secret.txt'), 'secret\n');
  await fs.writeFile(path.join(world.tools, 'link.py'), LINK_PY);
  outsideBefore = await treeState(world.outside);
  const script = [
    ST,
    'exec 3<sub',
    'echo via-devfd > /dev/fd/3/a.txt; st devfd-write',
    'mkdir /dev/fd/3/d; st devfd-mkdir',
    'mv /dev/fd/3/a.txt /dev/fd/3/d/a.txt; st devfd-mv',
    'echo x > /dev/fd/3/gone.txt && rm /dev/fd/3/gone.txt; st devfd-rm',
    'echo via-proc > /proc/self/fd/3/b.txt; st procfd-write',
    '(exec 0<sub; echo via-stdin > /dev/stdin/c.txt); st stdin-write',
    'exec 4<"$OUT/dir"',
    'echo x > /dev/fd/4/evil.txt; st devfd-outside',
    'mkdir /dev/fd/4/evil-dir; st devfd-outside-mkdir',
    'echo x > /proc/self/fd/4/evil2.txt; st procfd-outside',
    'echo x > /proc/$PPID/fd/0/evil3.txt; st supervisor-fd',
    'python3 "$TOOLS/link.py"',
  ].join('\n');
  result = await run(world, script, { session: 'fd-names' });
  statuses = caseStatuses(result.out);
}, 60_000);

afterAll(async () => {
  await removeWorld(world);
});

const ws = (...parts: string[]) => path.join(world.ws, ...parts);
const read = (file: string) => fs.readFile(file, 'utf8');

describe('an fd alias used as a directory', () => {
  it.each(['devfd-write', 'devfd-mkdir', 'devfd-mv', 'devfd-rm', 'procfd-write', 'stdin-write'])('%s works', (name) => {
    expect(statuses.get(name), describeRun(result)).toBe(0);
  });

  it('reaches the directory the fd holds, as the kernel does', async () => {
    expect(await read(ws('sub', 'd', 'a.txt'))).toBe('via-devfd\n');
    expect(await read(ws('sub', 'b.txt'))).toBe('via-proc\n');
    expect(await read(ws('sub', 'c.txt'))).toBe('via-stdin\n');
    expect((await fs.readdir(ws('sub'))).sort()).toEqual(['b.txt', 'c.txt', 'd']);
  });

  it.each(['devfd-outside', 'devfd-outside-mkdir', 'procfd-outside', 'supervisor-fd'])('%s is refused', (name) => {
    expect(statuses.get(name), describeRun(result)).toBe(1);
  });

  it('outside the roots nothing is made, and the refusal names the real directory', async () => {
    expect(await treeState(world.outside)).toEqual(outsideBefore);
    expect(result.stderr).toContain(`denied write ${path.join(world.outside, 'dir', 'evil.txt')}`);
    expect(result.stderr).toMatch(/names descriptor 0 of process \d+, which is outside the sandbox/);
  });
});

describe('an O_TMPFILE gets a name', () => {
  it.each([
    ['tmpfile-proc-follow', 't-proc.txt', 'follow\n'],
    ['tmpfile-devfd-follow', 't-devfd.txt', 'devfd\n'],
    ['tmpfile-empty-path', 't-empty.txt', 'empty\n'],
    ['tmpfile-other-process', 't-other.txt', 'other\n'],
  ])('by %s', async (name, file, content) => {
    expect(statuses.get(name), describeRun(result)).toBe(0);
    expect(await read(ws(file))).toBe(content);
  });

  it('a link of the magic link itself gets the kernel answers: EXDEV, EEXIST for a name that is there', async () => {
    expect(statuses.get('tmpfile-nofollow'), describeRun(result)).toBe(EXDEV);
    expect(statuses.get('tmpfile-os-link'), describeRun(result)).toBe(EXDEV);
    expect(statuses.get('tmpfile-nofollow-existing'), describeRun(result)).toBe(EEXIST);
    for (const name of ['t-nofollow.txt', 't-oslink.txt']) await expect(fs.lstat(ws(name))).rejects.toThrow(/ENOENT/);
    expect(await read(ws('t-proc.txt'))).toBe('follow\n');
    // The kernel's own answer, not a policy refusal: nothing about it on stderr.
    expect(result.stderr).not.toMatch(/t-nofollow|t-oslink/);
  });
});

describe('a descriptor of a file that has a name', () => {
  it('of an outside file is refused by either form, and nothing is linked', async () => {
    expect(statuses.get('named-outside-follow'), describeRun(result)).toBe(EACCES);
    expect(statuses.get('named-outside-empty-path'), describeRun(result)).toBe(EACCES);
    for (const name of ['stolen-follow.txt', 'stolen-empty.txt']) await expect(fs.lstat(ws(name))).rejects.toThrow(/ENOENT/);
    expect((await fs.stat(path.join(world.outside, 'dir', 'secret.txt'))).nlink).toBe(1);
  });

  it('of a workspace file is a hard link of that file', async () => {
    expect(statuses.get('named-workspace-follow'), describeRun(result)).toBe(0);
    const [a, b] = [await fs.stat(ws('named.txt')), await fs.stat(ws('named-too.txt'))];
    expect(b.ino).toBe(a.ino);
    expect(a.nlink).toBe(2);
  });
});
