// Writes the seed corpus of every fuzz target into native/fuzz/corpus/<target>/.
// Deterministic: run it again after changing a harness's input layout, and commit the
// result. Usage: node native/fuzz/make-corpus.mjs
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const u8 = (v) => Buffer.from([v & 0xff]);
const u16 = (v) => { const b = Buffer.alloc(2); b.writeUInt16LE(v & 0xffff); return b; };
const u32 = (v) => { const b = Buffer.alloc(4); b.writeUInt32LE(v >>> 0); return b; };
const u64 = (v) => { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt.asUintN(64, BigInt(v))); return b; };
const str = (s) => Buffer.concat([Buffer.isBuffer(s) ? s : Buffer.from(s, 'utf8'), Buffer.from([0])]);
const cat = (...parts) => Buffer.concat(parts);

const seeds = {};

// lexical-path: u8 cap selector, u32 tgid, u32 tid, base NUL raw NUL dir NUL utf8-bytes
seeds['lexical-path'] = [
  ['/home/u/ws', 'a/./b//c/', '/home/u', 'plain ascii'],
  ['/home/u/ws', '../x/..', '/home', Buffer.from([0xc3, 0xa9, 0xe2, 0x82, 0xac, 0xf0, 0x9f, 0x98, 0x80])],
  ['/', '/proc/self/fd/3', '/proc', Buffer.from([0xed, 0xa0, 0x80])],
  ['/w', '/proc/thread-self/fd/1', '/', Buffer.from([0xc0, 0xaf])],
  ['/w', '.', '/w', Buffer.from([0xf4, 0x90, 0x80, 0x80])],
  ['/w', '/root2/x', '/root', Buffer.from([0xe0, 0x80, 0x80])],
  ['/w', 'x/.', '/w/x', Buffer.from([0xf0, 0x8f, 0xbf, 0xbf])],
  ['/w', `${'d/'.repeat(1500)}f`, '/w/d', 'long'],
].map(([base, raw, dir, text], i) =>
  cat(u8(i % 2 ? 200 : 0), u16(i * 37 + 3), u32(1000 + i), u32(2000 + i), str(base), str(raw), str(dir), Buffer.from(text)),
);

// fast-path: u32 tgid, u32 tid, u8 counts (scratch | write-dev << 2), dirs NUL, path
const fast = (tgid, tid, scratch, devs, p) =>
  cat(u32(tgid), u32(tid), u8(scratch.length | (devs.length << 2)), ...scratch.flatMap(([a, b]) => [str(a), str(b)]), ...devs.map(str), str(p));
seeds['fast-path'] = [
  fast(100, 101, [['/tmp/scratch', '/private/tmp/scratch']], [], '/tmp/scratch/x'),
  fast(100, 101, [['/tmp/s', '/tmp/s']], [], '/tmp/s2/x'),
  fast(100, 101, [], [], '/dev/fd/3'),
  fast(100, 101, [], [], '/dev/stdout'),
  fast(100, 101, [], [], '/proc/100/fd/7'),
  fast(100, 101, [], [], '/proc/100/task/101/fd/7'),
  fast(100, 101, [], [], '/proc/99/task/101/fd/7'),
  fast(100, 101, [], [['/dev/kvm']], '/dev/kvm'),
  fast(100, 101, [], [], '/dev/pts/4'),
  fast(100, 101, [], [], '/proc/0100/fd/99999999999'),
];

// target-string: u16 cap, u16 gap, u8 flags, data
seeds['target-string'] = [
  cat(u16(4095), u16(0), u8(0), Buffer.from('/etc/passwd\0')),
  cat(u16(4095), u16(0), u8(0), Buffer.from('no terminator')),
  cat(u16(10), u16(100), u8(0), Buffer.from('0123456789abcdef\0')),
  cat(u16(300), u16(4000), u8(1), Buffer.alloc(5000, 0x61)),
  cat(u16(4095), u16(0), u8(2), Buffer.from('x\0')),
];

// answer-frame: u8 mode. Even: the stream that follows. 1: request layout. 3: answer round trip.
const answer = (id, errno, p, to) => {
  const pb = Buffer.from(p), tb = Buffer.from(to);
  const body = cat(u32(id), u32(errno), u16(pb.length), pb, u16(tb.length), tb);
  return cat(u32(body.length), body);
};
seeds['answer-frame'] = [
  cat(u8(0), answer(1, 0, '/w/file', '')),
  cat(u8(0), answer(2, 13, '', ''), answer(3, 0, '/w/a', '/w/b')),
  cat(u8(0), answer(4, 0, '/w/file', '').subarray(0, 9)),
  cat(u8(0), u32(99999), u32(1)),
  cat(u8(0), answer(5, 0, '/a\0b', '')),
  cat(u8(1), u32(7), u8(4), u32(100), u32(100), u32(0), u32(0), u8(0), str('/w/a'), str('/w/b'), str(''), u8(1)),
  cat(u8(3), u32(8), u32(0), str('/w/file'), str('')),
];

// syscall-decode: u8 syscall index, u8 flags (1: the second thread, cwd <tree>/ws),
// u32 kinds (3 bits per argument: 0 raw, 1 string A, 2 string B, 3 struct bytes,
// 4 one of the harness's fds, 5 NULL, 6 small number, 7 AT_FDCWD), 6 x u64, A NUL B NUL struct
const NR = ['open', 'creat', 'rename', 'unlink', 'rmdir', 'link', 'symlink', 'mkdir', 'mknod', 'chmod', 'chown',
  'lchown', 'utime', 'utimes', 'futimesat', 'setxattr', 'lsetxattr', 'removexattr', 'lremovexattr', 'openat',
  'openat2', 'truncate', 'renameat', 'renameat2', 'unlinkat', 'linkat', 'symlinkat', 'mkdirat', 'mknodat', 'fchmod',
  'fchmodat', 'fchmodat2', 'fchown', 'fchownat', 'utimensat', 'fsetxattr', 'fremovexattr', 'setxattrat',
  'removexattrat', 'file_setattr', 'read', 'getpid'];
const call = (name, kinds, raw, a = '', b = '', blob = Buffer.alloc(0), thread = 1) => {
  const k = kinds.reduce((acc, kind, i) => acc | (kind << (3 * i)), 0);
  const args = [0, 1, 2, 3, 4, 5].map((i) => u64(raw[i] ?? 0));
  return cat(u8(NR.indexOf(name)), u8(thread), u32(k), ...args, str(a), str(b), blob);
};
const O = { WRONLY: 1, RDWR: 2, CREAT: 0o100, EXCL: 0o200, TRUNC: 0o1000, APPEND: 0o2000, NOFOLLOW: 0o400000, TMPFILE: 0o20200000 };
const openHow = (flags, mode, resolve) => cat(u64(flags), u64(mode), u64(resolve));
seeds['syscall-decode'] = [
  call('openat', [7, 1, 0, 0], [0, 0, O.WRONLY | O.CREAT, 0o644], 'file'),
  call('openat', [7, 1, 0, 0], [0, 0, O.WRONLY | O.CREAT, 0o644], '../scratch/new'),
  call('openat', [7, 1, 0, 0], [0, 0, O.WRONLY | O.TRUNC], 'to-scratch/file'),
  call('openat', [4, 1, 0, 0], [2, 0, O.RDWR | O.CREAT | O.EXCL, 0o600], 'x'),
  call('openat', [7, 1, 0, 0], [0, 0, O.WRONLY], '/proc/self/fd/3'),
  call('openat', [7, 1, 0, 0], [0, 0, O.WRONLY | O.APPEND], '/dev/stdout'),
  call('openat', [7, 1, 0, 0], [0, 0, O.WRONLY | O.NOFOLLOW], '../scratch/out'),
  call('openat', [7, 1, 0, 0], [0, 0, 0], 'file'),
  call('open', [1, 0, 0], [0, O.WRONLY | O.CREAT, 0o644], 'sub/../file'),
  call('creat', [1, 0], [0, 0o644], '/dev/null'),
  call('openat2', [7, 1, 3, 0], [0, 0, 0, 24], 'file', '', openHow(O.WRONLY | O.CREAT, 0o644, 0x08)),
  call('openat2', [7, 1, 3, 0], [0, 0, 0, 24], '../scratch/f', '', openHow(O.WRONLY, 0, 0x04)),
  call('truncate', [1, 0], [0, 10], 'file'),
  call('unlinkat', [7, 1, 0], [0, 0, 0], 'file'),
  call('unlinkat', [4, 1, 0], [2, 0, 0x200], 'sub/..'),
  call('rename', [1, 2], [], 'file', '../scratch/file'),
  call('renameat2', [7, 1, 7, 2, 0], [0, 0, 0, 0, 1], '../scratch/a', '../scratch/b'),
  call('linkat', [7, 1, 7, 2, 0], [0, 0, 0, 0, 0x400], '/proc/self/fd/4', '../scratch/linked'),
  call('linkat', [4, 1, 7, 2, 0], [4, 0, 0, 0, 0x1000], '', 'file2'),
  call('symlinkat', [1, 7, 2], [], '/etc/passwd', 'evil'),
  call('mkdirat', [7, 1, 0], [0, 0, 0o755], 'newdir/'),
  call('mknodat', [7, 1, 0, 0], [0, 0, 0o10644, 0], '../scratch/fifo'),
  call('fchmodat', [7, 1, 0], [0, 0, 0o600], 'file'),
  call('fchmodat2', [7, 1, 0, 0], [0, 0, 0o600, 0x100], '../scratch/file'),
  call('fchmod', [4, 0], [3, 0o600]),
  call('fchownat', [4, 1, 0, 0, 0], [1, 0, 1000, 1000, 0x1000], ''),
  call('utimensat', [4, 5, 5, 0], [2, 0, 0, 0]),
  call('utimensat', [7, 1, 3, 0], [0, 0, 0, 0], 'file', '', cat(u64(1), u64(0), u64(2), u64(0x3ffffffe))),
  call('setxattr', [1, 2, 3, 0, 0], [0, 0, 0, 4, 0], 'file', 'user.x', Buffer.from('abcd')),
  call('fsetxattr', [4, 1, 3, 0, 0], [4, 0, 0, 4, 1], 'user.y', '', Buffer.from('abcd')),
  call('setxattrat', [7, 1, 0, 2, 3, 0], [0, 0, 0, 0, 0, 16], '../scratch/file', 'user.z', cat(u64(0), u32(0), u32(0))),
  call('removexattrat', [4, 1, 0, 2], [1, 0, 0x100, 0], 'file', 'user.x'),
  call('utimes', [1, 3], [], '/proc/thread-self/fd/0', '', cat(u64(1), u64(999999), u64(2), u64(0))),
  call('chown', [1, 0, 0], [0, 0, 0], '../ws/../scratch/out/x'),
  call('file_setattr', [7, 1], [], 'file'),
  call('read', [0], [0]),
  call('openat', [7, 1, 0, 0], [0, 0, O.WRONLY | O.CREAT, 0o644], 'file', '', Buffer.alloc(0), 0),
];

for (const [target, list] of Object.entries(seeds)) {
  const dir = path.join(here, 'corpus', target);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  list.forEach((seed, i) => writeFileSync(path.join(dir, `seed-${String(i).padStart(2, '0')}`), seed));
  console.log(`${target}: ${list.length} seeds`);
}
