/**
 * ioctls in the real kernel sandbox, on real files: this machine's ext4 and a reflink XFS
 * image (bench/lib/xfs-image.ts). A file system's ioctl is refused (EPERM) on a file or
 * directory unless it is known to change nothing, whatever the fd's mode, and changes
 * nothing: ext4's EXT4_IOC_SETVERSION through a read-only fd leaves the generation as it
 * was, and so for the generic and XFS requests, an unlisted ext4 one, a request number no
 * file system has yet, FIDEDUPERANGE. The read-only requests work and answer what they
 * answer outside; FICLONE works into a writable fd (cp --reflink), and the kernel refuses
 * it into a read-only one. Terminals, pipes, devices, namespaces and pidfds keep their
 * ioctls: stty and os.get_terminal_size on a pty, ls --color without a tty.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mountReflinkImage, type ReflinkMount } from '../../bench/lib/xfs-image.js';
import { createFakeBroker, removeDir, runBash, tempDir, type RunResult } from '../fixtures/sandbox/harness.js';
import { caseStatuses } from './run-helpers.js';

const EPERM = 1;
const EBADF = 9;
const ENOTTY = 25;

/**
 * `ioctl.py FILE` tries each request on FILE (and pipes, devices, pidfds, namespaces) and
 * prints `@@NAME ERRNO` (0: done) and `=NAME VALUE` for what a read returned.
 */
const IOCTL_PY = `
import array, fcntl, os, struct, sys
def IOC(d, t, nr, size): return (d << 30) | (size << 16) | (ord(t) << 8 if isinstance(t, str) else t << 8) | nr
IO = lambda t, nr: IOC(0, t, nr, 0)
IOW = lambda t, nr, size: IOC(1, t, nr, size)
IOR = lambda t, nr, size: IOC(2, t, nr, size)
IOWR = lambda t, nr, size: IOC(3, t, nr, size)
LONG = struct.calcsize('l')

def attempt(name, fd, request, arg=0):
    try:
        out = fcntl.ioctl(fd, request, arg)
        print('@@%s 0' % name, flush=True)
        return out
    except OSError as e:
        print('@@%s %d' % (name, e.errno), flush=True)
        return None

def show(name, value):
    print('=%s %s' % (name, value), flush=True)

target = sys.argv[1]
ro = os.open(target, os.O_RDONLY)
rw = os.open(target, os.O_RDWR)
long0 = struct.pack('l', 0)
fsx = bytes(28)

# Reads: allowed, answering what they answer outside.
v = attempt('getversion', ro, IOR('v', 1, LONG), long0)
if v: show('generation', struct.unpack('l', v)[0])
v = attempt('ext4-getversion', ro, IOR('f', 3, LONG), long0)
v = attempt('getflags', ro, IOR('f', 1, LONG), long0)
if v: show('flags', struct.unpack('l', v)[0])
v = attempt('fsgetxattr', ro, IOR('X', 31, 28), fsx)
if v: show('xflags', struct.unpack('I', v[:4])[0])
attempt('fiemap', ro, IOWR('f', 11, 32), struct.pack('QQIIII', 0, 2**64 - 1, 0, 0, 0, 0))
v = attempt('figetbsz', ro, IO(0, 2), struct.pack('i', 0))

# Changes: refused, through a read-only fd and a writable one alike.
attempt('ext4-setversion', ro, IOW('f', 4, LONG), struct.pack('l', 12345))
attempt('setversion', ro, IOW('v', 2, LONG), struct.pack('l', 12345))
attempt('setflags', ro, IOW('f', 2, LONG), struct.pack('l', 0x80))        # FS_NOATIME_FL
attempt('setflags-rw', rw, IOW('f', 2, LONG), struct.pack('l', 0x4000))   # FS_NODUMP_FL
attempt('fssetxattr', ro, IOW('X', 32, 28), struct.pack('I', 0x40) + bytes(24))  # FS_XFLAG_NOATIME
attempt('ext4-clear-es-cache', ro, IO('f', 40))
attempt('unknown-f', ro, IO('f', 200))
attempt('unknown-type', ro, IO('Q', 7))
attempt('unknown-type-dir', os.open(os.path.dirname(os.path.abspath(target)), os.O_RDONLY), IO('Q', 7))
attempt('btrfs-snap-create', ro, IOW(0x94, 1, 4096), bytearray(4096))
attempt('dedupe', ro, IOWR(0x94, 54, 24), struct.pack('QQHHI', 0, 4096, 0, 0, 0))

# Clones write only through a writable fd.
src = os.open(target, os.O_RDONLY)
attempt('ficlone-ro', ro, IOW(0x94, 9, 4), src)

# Not files: the request goes to the driver or the pseudo file, as outside.
r, w = os.pipe()
os.write(w, b'abc')
v = attempt('pipe-fionread', r, 0x541B, struct.pack('i', 0))
if v: show('fionread', struct.unpack('i', v)[0])
attempt('pipe-unknown', r, IO('Q', 7))
attempt('null-unknown', os.open('/dev/null', os.O_RDONLY), IO('Q', 7))
attempt('nsfs-nstype', os.open('/proc/self/ns/mnt', os.O_RDONLY), IO(0xb7, 3))
attempt('pidfd-unknown', os.pidfd_open(os.getpid()), IO(0xFF, 200))
attempt('proc-unknown-f', os.open('/proc/self/maps', os.O_RDONLY), IO('f', 200))
`;

/** What FS_IOC_GETVERSION, FS_IOC_GETFLAGS and FS_IOC_FSGETXATTR say outside the sandbox. */
function attributes(file: string): { generation: number; flags: number; xflags: number } {
  const script = `import fcntl, os, struct, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
g = struct.unpack('l', fcntl.ioctl(fd, 0x80087601, bytes(8)))[0]
f = struct.unpack('l', fcntl.ioctl(fd, 0x80086601, bytes(8)))[0]
x = struct.unpack('I', fcntl.ioctl(fd, 0x801C581F, bytes(28))[:4])[0]
print(g, f, x)`;
  const [generation = 0, flags = 0, xflags = 0] = execFileSync('python3', ['-c', script, file], { encoding: 'utf8' }).trim().split(' ').map(Number);
  return { generation, flags, xflags };
}

const values = (stdout: string) => new Map([...stdout.matchAll(/^=(\S+) (\S+)$/gm)].map((m) => [m[1] ?? '', Number(m[2])]));

let tools: string;
beforeAll(() => {
  tools = tempDir('ioctl-tools');
  fs.writeFileSync(path.join(tools, 'ioctl.py'), IOCTL_PY);
});
afterAll(() => removeDir(tools));

async function inSandbox(ws: string, script: string, writeDevs: string[] = []): Promise<RunResult> {
  const scratch = tempDir('ioctl-scratch');
  try {
    return await runBash(script, { cwd: ws, broker: createFakeBroker(ws), scratch: [scratch], writeDevs, env: { TOOLS: tools, SCRATCH: scratch } });
  } finally {
    removeDir(scratch);
  }
}

const REFUSED = ['ext4-setversion', 'setversion', 'setflags', 'setflags-rw', 'fssetxattr', 'ext4-clear-es-cache', 'unknown-f', 'unknown-type', 'unknown-type-dir', 'btrfs-snap-create', 'dedupe'];
const READS = ['getversion', 'getflags', 'fsgetxattr', 'fiemap', 'figetbsz'];

describe.each(['ext4 (this disk)', 'xfs (a reflink image)'])('on %s', (where) => {
  let mount: ReflinkMount | undefined;
  let ws: string;
  let file: string;
  let result: RunResult;
  let statuses: Map<string, number>;
  let before: ReturnType<typeof attributes>;

  beforeAll(async () => {
    if (where.startsWith('xfs')) {
      mount = mountReflinkImage(512);
      ws = path.join(mount.dir, 'ws');
      fs.mkdirSync(ws);
    } else {
      ws = tempDir('ioctl-ws');
    }
    file = path.join(ws, 'file');
    fs.writeFileSync(file, Buffer.alloc(64 * 1024, 7));
    before = attributes(file);
    result = await inSandbox(ws, `python3 "$TOOLS/ioctl.py" file`);
    statuses = caseStatuses(result.stdout);
  }, 60_000);
  afterAll(() => {
    if (mount) mount.release();
    else removeDir(ws);
  });

  it.each(REFUSED)('%s is refused with EPERM', (name) => {
    expect(statuses.get(name), result.stdout + result.stderr).toBe(EPERM);
  });

  it('and nothing changed: generation, inode flags, fsxattr flags, bytes', () => {
    expect(attributes(file)).toEqual(before);
    expect(fs.readFileSync(file).equals(Buffer.alloc(64 * 1024, 7))).toBe(true);
  });

  it.each(READS)('%s works', (name) => {
    expect(statuses.get(name), result.stdout + result.stderr).toBe(0);
  });

  it('the reads answer what they answer outside', () => {
    const seen = values(result.stdout);
    expect([seen.get('generation'), seen.get('flags'), seen.get('xflags')]).toEqual([before.generation, before.flags, before.xflags]);
  });

  it("ext4's own generation query reaches the file system: ext4 answers it, XFS does not know it", () => {
    expect(statuses.get('ext4-getversion')).toBe(where.startsWith('xfs') ? ENOTTY : 0);
  });

  it('FICLONE into a read-only fd gets the kernel answer (EBADF)', () => {
    expect(statuses.get('ficlone-ro')).toBe(EBADF);
  });

  it.each([
    ['pipe-fionread', 0],
    ['pipe-unknown', ENOTTY],
    ['null-unknown', ENOTTY],
    ['nsfs-nstype', 0],
    ['pidfd-unknown', ENOTTY],
    ['proc-unknown-f', ENOTTY],
  ])('%s is left to the kernel (%d)', (name, errno) => {
    expect(statuses.get(name), result.stdout + result.stderr).toBe(errno);
  });
});

describe('ordinary programs', () => {
  let ws: string;
  beforeAll(() => {
    ws = tempDir('ioctl-programs');
    fs.writeFileSync(path.join(ws, 'a.txt'), 'a\n');
    fs.mkdirSync(path.join(ws, 'dir'));
  });
  afterAll(() => removeDir(ws));

  it('stty and os.get_terminal_size on a pty, lsattr, filefrag, ls --color with and without a tty, cp --reflink=auto', async () => {
    const result = await inSandbox(
      ws,
      [
        `script -qec "stty cols 101 rows 33; stty size; python3 -c 'import os; print(os.get_terminal_size())'; ls --color=auto dir" /dev/null`,
        'ls --color=auto; TERM=xterm ls --color=always -d dir',
        'lsattr a.txt >/dev/null && echo lsattr ok',
        'filefrag a.txt >/dev/null && echo filefrag ok',
        'cp --reflink=auto a.txt b.txt && cat b.txt',
      ].join('\n'),
      ['/dev/ptmx'],
    );
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout.replace(/\r/g, '')).toContain('33 101\nos.terminal_size(columns=101, lines=33)\n');
    expect(result.stdout).toContain('a.txt\ndir\n\u001b[0m\u001b[01;34mdir\u001b[0m\n');
    expect(result.stdout).toContain('lsattr ok\nfilefrag ok\na\n');
  });

  it('on XFS, cp --reflink=always clones into the new file: its extents are shared', async () => {
    const mount = mountReflinkImage(512);
    try {
      const xws = path.join(mount.dir, 'ws');
      fs.mkdirSync(xws);
      fs.writeFileSync(path.join(xws, 'big'), Buffer.alloc(1024 * 1024, 3));
      const result = await inSandbox(xws, 'cp --reflink=always big clone && filefrag -v clone');
      expect(result.code, result.stderr).toBe(0);
      expect(result.stdout).toMatch(/\bshared\b/);
      expect(fs.readFileSync(path.join(xws, 'clone')).equals(Buffer.alloc(1024 * 1024, 3))).toBe(true);
    } finally {
      mount.release();
    }
  });
});
