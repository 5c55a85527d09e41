/**
 * Every common way of changing a file, on the real kernel sandbox: the change
 * happens, exits are 0, and the (fake) broker was asked before it happened — its
 * backup holds the bytes the file had before.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  buildFixture,
  createFakeBroker,
  removeDir,
  runBash,
  tempDir,
  type FakeBroker,
  type RunResult,
} from '../fixtures/sandbox/harness.js';

let bin: string;
let ws: string;
let scratch: string;
let broker: FakeBroker;

beforeAll(() => {
  bin = tempDir('bin');
  for (const name of ['ftruncate', 'mmap-write']) buildFixture(name, bin);
});
afterAll(() => removeDir(bin));

beforeEach(() => {
  ws = tempDir('ws');
  scratch = tempDir('scratch');
  broker = createFakeBroker(ws);
});
afterEach(() => {
  removeDir(ws);
  removeDir(scratch);
});

const file = (name: string) => path.join(ws, name);
const read = (name: string) => fs.readFileSync(file(name), 'utf8');
const write = (name: string, text: string) => fs.writeFileSync(file(name), text);
const bash = (script: string) => runBash(script, { cwd: ws, broker, scratch: [scratch], env: { BIN: bin } });
/** A Python program of these lines, run by the sandboxed bash. */
const python = (lines: readonly string[]) => bash(`python3 -c "${lines.join('\n')}"`);

function expectOk(result: RunResult): void {
  expect(result.code, result.stderr).toBe(0);
}

/** What the broker was asked, in order: each request's operation and the last name of its path. */
const askedFor = () => broker.requests.map((r) => [r.op, path.basename(r.path)]);

/** The broker saw the file before it changed: its backup holds the old bytes. */
function expectBackedUp(name: string, before: string): void {
  expect(broker.backups.get(file(name))?.toString('utf8')).toBe(before);
}

interface ContentCase {
  name: string;
  script: string;
  files?: Record<string, string>;
  after: string;
}

const contentCases: ContentCase[] = [
  { name: 'redirect >', script: 'echo new > f', after: 'new\n' },
  { name: 'append >>', script: 'echo new >> f', after: 'old\nnew\n' },
  { name: 'cp a f', script: 'cp a f', files: { a: 'from a\n' }, after: 'from a\n' },
  { name: 'sed -i', script: 'sed -i s/o/0/ f', after: '0ld\n' },
  { name: '/usr/bin/sed -i (absolute path)', script: '/usr/bin/sed -i s/o/0/ f', after: '0ld\n' },
  { name: 'truncate -s 0', script: 'truncate -s 0 f', after: '' },
  { name: 'dd of=', script: 'dd if=a of=f status=none', files: { a: 'dd data\n' }, after: 'dd data\n' },
  { name: 'python open(w)', script: `python3 -c "open('f','w').write('py')"`, after: 'py' },
  { name: 'node writeFileSync', script: `"${process.execPath}" -e "require('fs').writeFileSync('f','js')"`, after: 'js' },
  { name: 'perl -pi', script: `perl -pi -e 's/o/0/' f`, after: '0ld\n' },
  { name: 'ftruncate on an O_RDWR fd', script: '"$BIN/ftruncate" f 2', after: 'ol' },
  { name: 'MAP_SHARED mmap write', script: '"$BIN/mmap-write" f NEW', after: 'NEW\n' },
  { name: 'static busybox sh', script: `busybox sh -c 'echo bb > f'`, after: 'bb\n' },
];

describe('modifications of existing workspace files', () => {
  it.each(contentCases)('$name', async ({ script, files, after }) => {
    write('f', 'old\n');
    for (const [name, text] of Object.entries(files ?? {})) write(name, text);
    const result = await bash(script);
    expectOk(result);
    expect(read('f')).toBe(after);
    expectBackedUp('f', 'old\n');
    expect(broker.requests.some((r) => r.path === file('f') || r.to === file('f'))).toBe(true);
  });

  it('mv a f replaces f and the broker saw both files first', async () => {
    write('f', 'old\n');
    write('a', 'moved\n');
    expectOk(await bash('mv a f'));
    expect(read('f')).toBe('moved\n');
    expect(fs.existsSync(file('a'))).toBe(false);
    expectBackedUp('f', 'old\n');
    expectBackedUp('a', 'moved\n');
    expect(broker.requests.find((r) => r.op === 'rename')).toMatchObject({ path: file('a'), to: file('f') });
  });

  it('python os.rename (the rename syscall)', async () => {
    write('f', 'old\n');
    write('a', 'renamed\n');
    expectOk(await bash(`python3 -c "import os; os.rename('a', 'f')"`));
    expect(read('f')).toBe('renamed\n');
    expectBackedUp('f', 'old\n');
  });

  it('rm f', async () => {
    write('f', 'old\n');
    expectOk(await bash('rm f'));
    expect(fs.existsSync(file('f'))).toBe(false);
    expectBackedUp('f', 'old\n');
    expect(broker.requests).toContainEqual(expect.objectContaining({ op: 'unlink', path: file('f'), follow: false }));
  });

  it('rm -rf dir removes a tree, every file seen first', async () => {
    fs.mkdirSync(file('dir/sub'), { recursive: true });
    write('dir/x', 'x\n');
    write('dir/sub/y', 'y\n');
    expectOk(await bash('rm -rf dir'));
    expect(fs.existsSync(file('dir'))).toBe(false);
    expectBackedUp('dir/x', 'x\n');
    expectBackedUp('dir/sub/y', 'y\n');
    expect(broker.requests.filter((r) => r.op === 'rmdir').map((r) => r.path)).toEqual([file('dir/sub'), file('dir')]);
  });

  it('chmod 600 f', async () => {
    write('f', 'old\n');
    fs.chmodSync(file('f'), 0o644);
    expectOk(await bash('chmod 600 f'));
    expect(fs.statSync(file('f')).mode & 0o7777).toBe(0o600);
    expect(read('f')).toBe('old\n');
    expectBackedUp('f', 'old\n');
    expect(broker.requests).toContainEqual(expect.objectContaining({ op: 'chmod', path: file('f'), mode: 0o600 }));
  });

  it('touch -d sets the time', async () => {
    write('f', 'old\n');
    expectOk(await bash('touch -d 2000-01-01T00:00:00Z f'));
    expect(fs.statSync(file('f')).mtime.toISOString()).toBe('2000-01-01T00:00:00.000Z');
    expectBackedUp('f', 'old\n');
    expect(broker.requests.some((r) => r.op === 'utimes')).toBe(true);
  });

  it('tar -xf over existing files', async () => {
    const src = tempDir('tar-src');
    try {
      fs.mkdirSync(path.join(src, 'd'));
      fs.writeFileSync(path.join(src, 'f'), 'from tar\n');
      fs.writeFileSync(path.join(src, 'd/g'), 'g from tar\n');
      const archive = path.join(scratch, 'a.tar');
      execFileSync('tar', ['-cf', archive, '-C', src, 'f', 'd']);
      write('f', 'old\n');
      fs.mkdirSync(file('d'));
      write('d/g', 'old g\n');
      expectOk(await bash(`tar -xf "${archive}"`));
      expect(read('f')).toBe('from tar\n');
      expect(read('d/g')).toBe('g from tar\n');
      expectBackedUp('f', 'old\n');
      expectBackedUp('d/g', 'old g\n');
    } finally {
      removeDir(src);
    }
  });

  it('ln -sf other f replaces a file with a symlink', async () => {
    write('f', 'old\n');
    expectOk(await bash('ln -sf other f'));
    expect(fs.readlinkSync(file('f'))).toBe('other');
    expectBackedUp('f', 'old\n');
    expect(broker.requests).toContainEqual(expect.objectContaining({ op: 'symlink', linkTarget: 'other' }));
  });

  it('new files, directories and FIFOs are created with the umask applied', async () => {
    expectOk(await bash('umask 027; echo n > new; mkdir d; mkfifo p; mkdir -p a/b/c'));
    expect(read('new')).toBe('n\n');
    expect(fs.statSync(file('new')).mode & 0o777).toBe(0o640);
    expect(fs.statSync(file('d')).mode & 0o777).toBe(0o750);
    expect(fs.statSync(file('p')).isFIFO()).toBe(true);
    expect(fs.statSync(file('a/b/c')).isDirectory()).toBe(true);
  });

  it('metadata calls by path and by fd: xattrs, fchmod, chown, utime', async () => {
    write('f', 'old\n');
    const result = await python([
      'import os',
      "os.setxattr('f', 'user.a', b'1')",
      "os.setxattr('f', 'user.b', b'2')",
      "os.removexattr('f', 'user.b')",
      "fd = os.open('f', os.O_RDONLY)",
      "os.setxattr(fd, 'user.c', b'3')",
      'os.fchmod(fd, 0o640)',
      "os.chown('f', os.getuid(), os.getgid())",
      "os.utime('f', (1000000000, 1000000000))",
    ]);
    expectOk(result);
    const stat = fs.statSync(file('f'));
    expect(stat.mode & 0o777).toBe(0o640);
    expect(stat.mtimeMs).toBe(1e12);
    const attrs = execFileSync('python3', ['-c', `import os; print(sorted(os.listxattr('${file('f')}')))`]);
    expect(attrs.toString()).toBe("['user.a', 'user.c']\n");
    expect(read('f')).toBe('old\n');
    expectBackedUp('f', 'old\n');
    const ops = new Set(broker.requests.map((r) => r.op));
    expect([...ops].sort()).toEqual(['chmod', 'chown', 'removexattr', 'setxattr', 'utimes']);
    const fdBased = broker.requests.filter((r) => (r.flags & 0x1000) !== 0).map((r) => r.op);
    expect(fdBased).toEqual(['setxattr', 'chmod']);
  });

  it('an fd chown or chmod that changes nothing is answered without asking the broker', async () => {
    write('f', 'old\n');
    fs.chmodSync(file('f'), 0o640);
    const result = await python([
      'import os',
      "fd = os.open('f', os.O_RDONLY)",
      'os.fchown(fd, os.getuid(), os.getgid())',
      'os.fchown(fd, -1, -1)',
      'os.fchmod(fd, 0o640)',
      "print('done')",
    ]);
    expectOk(result);
    expect(result.stdout).toBe('done\n');
    const stat = fs.statSync(file('f'));
    expect(stat.mode & 0o7777).toBe(0o640);
    expect([stat.uid, stat.gid]).toEqual([process.getuid?.(), process.getgid?.()]);
    expect(broker.requests.map((r) => r.op)).toEqual([]);
  });

  it('an fd chown or chmod that would change something, even only a set-id bit, is still asked', async () => {
    write('suid', 'x');
    fs.chmodSync(file('suid'), 0o4755);
    write('plain', 'y');
    fs.chmodSync(file('plain'), 0o644);
    const result = await python([
      'import os',
      "s = os.open('suid', os.O_RDONLY)",
      'os.fchown(s, os.getuid(), os.getgid())',
      "p = os.open('plain', os.O_RDONLY)",
      'os.fchmod(p, 0o600)',
      "q = os.open('plain', os.O_PATH)",
      'try:',
      '    os.fchmod(q, 0o600)',
      'except OSError as e:',
      "    print('O_PATH', e.errno)",
    ]);
    expectOk(result);
    // The kernel's own answers: a chown drops the set-id bit, fchmod on an O_PATH fd is EBADF.
    expect(result.stdout).toBe('O_PATH 9\n');
    expect(fs.statSync(file('suid')).mode & 0o7777).toBe(0o755);
    expect(fs.statSync(file('plain')).mode & 0o7777).toBe(0o600);
    expect(askedFor()).toEqual([
      ['chown', 'suid'],
      ['chmod', 'plain'],
      ['chmod', 'plain'],
    ]);
  });

  it('O_CREAT|O_EXCL of a name that is there gets EEXIST from the supervisor, without a question', async () => {
    write('there', 'kept\n');
    fs.symlinkSync(file('nowhere'), file('dangling'));
    const result = await python([
      'import os',
      "for name in ('there', 'dangling', 'new'):",
      '    try:',
      '        os.close(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))',
      "        print(name, 'created')",
      '    except OSError as e:',
      '        print(name, e.errno)',
    ]);
    expectOk(result);
    // EEXIST for a file and for a dangling link (O_EXCL never follows it), as the kernel says.
    expect(result.stdout).toBe('there 17\ndangling 17\nnew created\n');
    expect(read('there')).toBe('kept\n');
    expect(fs.existsSync(file('nowhere'))).toBe(false);
    expect(askedFor()).toEqual([['open', 'new']]);
    expect(broker.backups.size).toBe(0);
  });

  it('a rename with RENAME_NOREPLACE onto a name that is there gets EEXIST from the supervisor, without a question (mv tries it first)', async () => {
    write('a', 'moved\n');
    write('b', 'kept\n');
    const result = await python([
      'import ctypes, os',
      'libc = ctypes.CDLL(None, use_errno=True)',
      'AT_FDCWD = -100',
      "for source, target in (('a', 'b'), ('missing', 'b'), ('a', 'c')):",
      '    rc = libc.renameat2(AT_FDCWD, source.encode(), AT_FDCWD, target.encode(), 1)',
      "    print(source, target, 'renamed' if rc == 0 else ctypes.get_errno())",
    ]);
    expectOk(result);
    // EEXIST over a name that is there; a missing source is the kernel's ENOENT; a free name is asked and renamed.
    expect(result.stdout).toBe('a b 17\nmissing b 2\na c renamed\n');
    expect(read('b')).toBe('kept\n');
    expect(read('c')).toBe('moved\n');
    expect(askedFor().filter(([op]) => op === 'rename')).toEqual([
      ['rename', 'missing'],
      ['rename', 'a'],
    ]);
  });

  it('a create in a directory that is not there gets ENOENT from the supervisor, without a question', async () => {
    fs.symlinkSync(file('nowhere'), file('dangling'));
    const result = await python([
      'import os, stat',
      'W = os.O_WRONLY | os.O_CREAT | os.O_EXCL',
      "calls = [('open', lambda p: os.close(os.open(p, W, 0o600))), ('mkdir', os.mkdir), ('symlink', lambda p: os.symlink('t', p)),",
      "         ('mknod', lambda p: os.mknod(p, 0o600 | stat.S_IFIFO))]",
      "for parent in ('missing', 'missing/deeper', 'dangling', '.'):",
      '    for op, call in calls:',
      "        name = parent + '/' + op",
      '        try:',
      '            call(name)',
      "            print(name, 'made')",
      '        except OSError as e:',
      '            print(name, e.errno)',
    ]);
    expectOk(result);
    // ENOENT as the kernel's walk gives it, also through a link to nothing; a real parent is asked.
    const ops = ['open', 'mkdir', 'symlink', 'mknod'];
    const missing = ['missing', 'missing/deeper', 'dangling'].flatMap((p) => ops.map((op) => `${p}/${op} 2`));
    expect(result.stdout).toBe([...missing, ...ops.map((op) => `./${op} made`), ''].join('\n'));
    expect(fs.existsSync(file('nowhere'))).toBe(false);
    expect(fs.lstatSync(file('mknod')).isFIFO()).toBe(true);
    expect(askedFor()).toEqual(ops.map((op) => [op, op]));
  });

  it('a file opened on the command\'s behalf is non-blocking only when the command asked for it', async () => {
    write('existing', 'x');
    const result = await python([
      'import os, fcntl',
      'W, C, X, T, N = os.O_WRONLY, os.O_CREAT, os.O_EXCL, os.O_TRUNC, os.O_NONBLOCK',
      "for name, flags in (('excl', W | C | X), ('excl-nb', W | C | X | N), ('creat', W | C | T), ('existing', W | T), ('existing', W | N)):",
      '    fd = os.open(name, flags, 0o600)',
      "    print(name, bool(fcntl.fcntl(fd, fcntl.F_GETFL) & N), os.fstat(fd).st_mode & 0o170000 == 0o100000)",
      '    os.close(fd)',
    ]);
    expectOk(result);
    expect(result.stdout).toBe('excl False True\nexcl-nb True True\ncreat False True\nexisting False True\nexisting True True\n');
    // Every one of them went through the broker and was opened by the supervisor.
    expect(askedFor()).toEqual([
      ['open', 'excl'],
      ['open', 'excl-nb'],
      ['open', 'creat'],
      ['open', 'existing'],
      ['open', 'existing'],
    ]);
  });

  it('mkdir of a name that is there gets EEXIST from the supervisor: mkdir -p over existing levels asks nothing', async () => {
    fs.mkdirSync(file('a/b/c'), { recursive: true });
    write('a/plain', 'x');
    const result = await bash('mkdir -p a/b/c && mkdir -p a/b/c/d; mkdir a/plain; echo $?');
    expectOk(result);
    expect(result.stdout).toBe('1\n');
    expect(result.stderr).toMatch(/File exists/);
    expect(fs.statSync(file('a/b/c/d')).isDirectory()).toBe(true);
    expect(read('a/plain')).toBe('x');
    // Only the directory that was not there reached the broker.
    expect(broker.requests.map((r) => [r.op, path.relative(ws, r.path)])).toEqual([['mkdir', 'a/b/c/d']]);
  });

  it('rmdir of a directory with names in it gets ENOTEMPTY from the supervisor, without a question', async () => {
    for (const dir of ['full', 'hidden', 'empty', 'slashed']) fs.mkdirSync(file(dir));
    write('full/x', 'x');
    write('hidden/.keep', '');
    write('slashed/x', 'x');
    const result = await python([
      'import os',
      "for name in ('full', 'hidden', 'empty', 'slashed/'):",
      '    try:',
      '        os.rmdir(name)',
      "        print(name, 'removed')",
      '    except OSError as e:',
      '        print(name, e.errno)',
    ]);
    expectOk(result);
    expect(result.stdout).toBe('full 39\nhidden 39\nempty removed\nslashed/ 39\n');
    expect(read('full/x')).toBe('x');
    expect(fs.existsSync(file('hidden/.keep'))).toBe(true);
    // The empty one was asked for; a trailing slash (which would follow a link) is asked as before.
    expect(askedFor()).toEqual([
      ['rmdir', 'empty'],
      ['rmdir', 'slashed'],
    ]);
  });

  it('a rename out of the temp dir gets EXDEV, as between file systems: mv copies, and each file it makes is asked about', async () => {
    const result = await python([
      'import os, subprocess',
      "t = os.environ['TMPDIR']",
      "os.makedirs(t + '/d/sub')",
      "open(t + '/d/sub/f', 'w').write('made in the temp dir')",
      'try:',
      "    os.rename(t + '/d', 'd')",
      "    print('renamed')",
      'except OSError as e:',
      "    print('rename', e.errno)",
      "subprocess.run(['mv', t + '/d', 'moved'], check=True)",
      "print(open('moved/sub/f').read())",
    ]);
    expectOk(result);
    expect(result.stdout).toBe('rename 18\nmade in the temp dir\n');
    expect(fs.existsSync(file('d'))).toBe(false);
    // No rename reached the broker: the copy's directories and file did, one by one.
    expect(broker.requests.some((r) => r.op === 'rename')).toBe(false);
    expect(askedFor()).toEqual(expect.arrayContaining([['mkdir', 'moved'], ['mkdir', 'sub'], ['open', 'f']]));
  });

  it('hard links, and an O_TMPFILE published with linkat(/proc/self/fd/N)', async () => {
    write('a', 'a\n');
    const script = [
      'import os',
      "fd = os.open('.', os.O_TMPFILE | os.O_WRONLY, 0o600)",
      "os.write(fd, b'tmpfile')",
      // A dir fd makes CPython call linkat(..., AT_SYMLINK_FOLLOW) rather than link().
      "os.link(f'/proc/self/fd/{fd}', 'published', dst_dir_fd=os.open('.', os.O_RDONLY), follow_symlinks=True)",
    ].join('\n');
    const result = await bash(`ln a b && python3 -c "${script}"`);
    expectOk(result);
    expect(fs.statSync(file('b')).ino).toBe(fs.statSync(file('a')).ino);
    expect(read('published')).toBe('tmpfile');
    expect(broker.requests.filter((r) => r.op === 'link').map((r) => r.to)).toEqual([file('b'), file('published')]);
  });

  it('the program sees the errors of the operation itself (EEXIST, ENOENT, ENOTEMPTY)', async () => {
    fs.mkdirSync(file('full'));
    write('full/x', 'x');
    const result = await bash(
      'mkdir full; echo $?; rm missing; echo $?; rmdir full; echo $?; set -o noclobber; echo a > full/x; echo $?',
    );
    expect(result.code).toBe(0);
    expect(result.stdout).toBe('1\n1\n1\n1\n');
    expect(result.stderr).toMatch(/File exists/);
    expect(result.stderr).toMatch(/No such file or directory/);
    expect(result.stderr).toMatch(/Directory not empty/);
    expect(read('full/x')).toBe('x');
  });
});
