/**
 * Escape suite, syscalls that go around paths: device and fifo nodes, io_uring, file
 * handles, mounts and namespaces, chroot and pivot_root, ptrace / kill / pidfd signals /
 * process_vm_writev at the supervisor and the broker, writes to the backup store, and
 * changes to outside files through read-only descriptors (ftruncate, fallocate, a shared
 * mmap, fchmod, fchown, futimens, fsetxattr) and by name (truncate, chmod, chown, utimes,
 * setxattr, removexattr). Each is refused, changes nothing, and is audited.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { describeSeccompFilter } from '../../src/sandbox/info.js';
import { run, turnsOf } from '../e2e/run-helpers.js';
import { describeRun, judge, makeSecurityWorld, removeWorld, reportSummary, runRoutes, writeOld, type Route, type RoutesRun, type SecurityWorld } from './helpers.js';

/** ftruncate, fallocate and a shared mmap through a writable fd of a workspace file: they still work. */
const WRITABLE_FD_PY = [
  'import mmap, os',
  'fd = os.open("own.txt", os.O_RDWR)',
  'os.ftruncate(fd, 4)',
  'os.posix_fallocate(fd, 0, 8)',
  'm = mmap.mmap(fd, 8, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)',
  'm[0:2] = b"ZZ"',
  'm.close()',
].join('\n');

let world: SecurityWorld;
let routes: Route[];
let ran: RoutesRun;
/** Files of the backup store after a first turn (a manifest, a blob, …). */
let storeFiles: string[];

/** How many of the store's files the store routes aim at (the first and the last). */
const STORE_PICKS = 2;

const FD_OPS = ['ftruncate', 'fallocate', 'punch', 'mmap', 'fchmod', 'fchown', 'futimens', 'fsetxattr', 'setflags'] as const;
/** Refused by the supervisor itself (audited as the syscall); the rest are broker denials of the file. */
const FD_SYSCALL: Partial<Record<(typeof FD_OPS)[number], string>> = { ftruncate: 'ftruncate', fallocate: 'fallocate', punch: 'fallocate', mmap: 'mmap', setflags: 'ioctl' };
const PATH_OPS = ['truncate', 'chmod', 'chown', 'utimes', 'setxattr', 'removexattr', 'setxattrat', 'file_setattr'] as const;
const PATH_SYSCALL: Partial<Record<(typeof PATH_OPS)[number], string>> = { file_setattr: 'file_setattr' };

function table(w: Pick<SecurityWorld, 'outside' | 'ws' | 'home'>, store: readonly string[]): Route[] {
  const out = (name: string) => path.join(w.outside, name);
  const file = (name: string) => [out(name)];
  const canary = out('canary');
  const esc = (args: string) => `"$TOOLS/escape" ${args}`;
  const routes: Route[] = [
    { name: 'mknod-dev-outside', script: esc('mknod "$OUT/mknod-dev-outside" dev'), targets: [w.outside], audit: { paths: [out('mknod-dev-outside')] } },
    { name: 'mknod-dev-workspace', script: esc('mknod devs/null dev'), targets: [path.join(w.ws, 'devs')], audit: { paths: [path.join(w.ws, 'devs', 'null')] } },
    { name: 'mknod-fifo-outside', script: esc('mknod "$OUT/mknod-fifo-outside" fifo'), targets: [w.outside], audit: { paths: [out('mknod-fifo-outside')] } },
    { name: 'mkfifo-outside', script: 'mkfifo "$OUT/mkfifo-outside"', targets: [w.outside], audit: { paths: [out('mkfifo-outside')] } },
    { name: 'io-uring', script: esc('io_uring'), targets: [canary], audit: { syscalls: ['io_uring_setup'] } },
    { name: 'handle', script: esc('handle "$OUT/handle"'), targets: file('handle'), audit: { syscalls: ['name_to_handle_at', 'open_by_handle_at'] } },
    { name: 'mount', script: esc('mount "$OUT" "$OUT/canary"'), targets: [canary, w.outside], audit: { syscalls: ['mount'] } },
    { name: 'unshare', script: esc('unshare "$OUT" "$OUT/canary"'), targets: [canary], audit: { syscalls: ['unshare'] } },
    { name: 'unshare-cli', script: `unshare -rm sh -c 'mount -t tmpfs none "$OUT" && echo x > "$OUT/canary"'`, targets: [canary, w.outside], audit: { syscalls: ['unshare'] } },
    { name: 'chroot', script: esc('chroot "$OUT" /canary'), targets: [canary], audit: { syscalls: ['chroot'] } },
    { name: 'pivot-root', script: esc('pivot_root "$OUT" "$OUT/canary"'), targets: [canary], audit: { syscalls: ['pivot_root'] } },
    { name: 'ptrace-supervisor', script: esc('ptrace $SUP'), targets: [canary], audit: { syscalls: ['ptrace'] } },
    { name: 'ptrace-broker', script: esc('ptrace $BROKER'), targets: [canary], audit: { syscalls: ['ptrace'] } },
    { name: 'kill-supervisor', script: esc('kill $SUP'), targets: [canary], audit: { syscalls: ['kill'] } },
    { name: 'kill-broker', script: esc('kill $BROKER'), targets: [canary], audit: { syscalls: ['kill'] } },
    { name: 'kill-bash-broker', script: 'kill -STOP $BROKER', targets: [canary], audit: { syscalls: ['kill'] } },
    { name: 'pidfd-supervisor', script: esc('pidfd $SUP'), targets: [canary], audit: { syscalls: ['pidfd_send_signal'] } },
    { name: 'pidfd-broker', script: esc('pidfd $BROKER'), targets: [canary], audit: { syscalls: ['pidfd_send_signal'] } },
    { name: 'vm-write-supervisor', script: esc('vm-write $SUP'), targets: [canary], audit: { syscalls: ['process_vm_writev'] } },
    { name: 'vm-write-broker', script: esc('vm-write $BROKER'), targets: [canary], audit: { syscalls: ['process_vm_writev'] } },
    // Every fd the broker and the supervisor hold (the store's journal among them), reopened for writing.
    { name: 'proc-fd-broker-all', script: '( for f in /proc/$BROKER/fd/*; do echo x >> "$f" 2>/dev/null && exit 0; done; exit 1 )', targets: [canary, ...store], audit: { syscalls: ['open', 'openat'] } },
    { name: 'proc-fd-supervisor-all', script: '( for f in /proc/$SUP/fd/*; do echo x >> "$f" 2>/dev/null && exit 0; done; exit 1 )', targets: [canary, ...store], audit: { syscalls: ['open', 'openat'] } },
    { name: 'proc-mem-broker', script: 'echo x > /proc/$BROKER/mem', targets: [canary], audit: { pathMatch: /^\/proc\/\d+\/mem$/ } },
    ...store.map((f, i): Route => ({ name: `store-overwrite-${i}`, script: `echo x > '${f}'`, targets: [f] })),
    ...store.map((f, i): Route => ({ name: `store-rm-${i}`, script: `rm -f '${f}'`, targets: [f] })),
    { name: 'store-new-file', script: 'echo x > "$BROKERED_SHELL_HOME/evil"', targets: [w.home], audit: { paths: [path.join(w.home, 'evil')] } },
    { name: 'store-mv', script: 'mv "$BROKERED_SHELL_HOME/workspace" "$BROKERED_SHELL_HOME/gone"', targets: [w.home, path.join(w.home, 'workspace'), ...store], audit: { paths: [path.join(w.home, 'workspace')] } },
    { name: 'store-chmod', script: `chmod 777 '${store[0] ?? ''}'`, targets: store.slice(0, 1) },
    ...FD_OPS.map((op): Route => {
      const syscall = FD_SYSCALL[op];
      return { name: `fd-${op}`, script: esc(`fd ${op} "$OUT/fd-${op}"`), targets: file(`fd-${op}`), ...(syscall ? { audit: { syscalls: [syscall] } } : {}) };
    }),
    ...PATH_OPS.map((op): Route => {
      const syscall = PATH_SYSCALL[op];
      return { name: `path-${op}`, script: esc(`path ${op} "$OUT/path-${op}"`), targets: file(`path-${op}`), ...(syscall ? { audit: { syscalls: [syscall] } } : {}) };
    }),
  ];
  return routes;
}

const NAMES = table({ outside: '/nowhere/out', ws: '/nowhere/ws', home: '/nowhere/home' }, Array.from({ length: STORE_PICKS }, (_, i) => `/nowhere/store/${i}`)).map((r) => r.name);

beforeAll(async () => {
  world = await makeSecurityWorld('syscalls');
  // A first turn, so the store holds a manifest and a blob the command could go after.
  await writeOld(path.join(world.ws, 'f'), 'zero\n', 0o640);
  const first = await run(world, 'echo one > f', { session: 'security-store' });
  if (first.status !== 0) throw new Error(describeRun(first));
  if ((await turnsOf(world, 'security-store')).length !== 1) throw new Error('the first turn was not committed');
  storeFiles = (await fs.readdir(world.home, { recursive: true, withFileTypes: true }))
    .filter((e) => e.isFile())
    .map((e) => path.join(e.parentPath, e.name))
    .sort();
  if (storeFiles.length < STORE_PICKS) throw new Error(`the store holds ${storeFiles.length} files`);
  routes = table(world, [storeFiles[0] ?? '', storeFiles.at(-1) ?? '']);
  await fs.mkdir(path.join(world.ws, 'devs'));
  await writeOld(path.join(world.outside, 'canary'), 'canary\n', 0o644);
  for (const route of routes) {
    const own = path.join(world.outside, route.name);
    if (route.targets.includes(own)) await writeOld(own, `${route.name} outside\n`.repeat(8), 0o644);
  }
  // removexattr needs an xattr to remove (set here, outside the sandbox).
  execFileSync('python3', ['-c', 'import os, sys; os.setxattr(sys.argv[1], "user.keep", b"1")', path.join(world.outside, 'path-removexattr')]);
  await writeOld(path.join(world.ws, 'own.txt'), 'abcdef\n', 0o640);
  ran = await runRoutes(world, routes, { session: 'security-store', epilogue: ['echo fine > alive.txt; st alive', `python3 -c '${WRITABLE_FD_PY}'; st writable-fd`] });
}, 120_000);

afterAll(async () => {
  reportSummary('routes-syscalls', ran, routes);
  await removeWorld(world);
});

describe('escape suite: syscalls around paths, other processes, the store, read-only descriptors', () => {
  it('the run finished with the broker and supervisor alive', () => {
    expect(ran.statuses.get('alive'), describeRun(ran.result)).toBe(0);
    expect(ran.result.signal).toBeNull();
  });

  it('changes through a writable descriptor still work (the refusals above are the read-only ones only)', async () => {
    expect(ran.statuses.get('writable-fd'), describeRun(ran.result)).toBe(0);
    expect(await fs.readFile(path.join(world.ws, 'own.txt'))).toEqual(Buffer.from('ZZcd\0\0\0\0'));
  });

  it('the filter sends ftruncate, fallocate and shared writable mmap to the supervisor', () => {
    expect(describeSeccompFilter().notifyFdWrite.map((e) => e.name)).toEqual(['ftruncate', 'fallocate', 'mmap']);
  });

  it('the route names are fixed before the world exists', () => {
    expect(routes.map((r) => r.name)).toEqual(NAMES);
  });

  it.each(NAMES)('%s: refused, unchanged, audited', (name) => {
    const route = routes.find((r) => r.name === name);
    if (!route) throw new Error(`no route ${name}`);
    const outcome = judge(ran, route);
    expect(outcome, outcome.detail).toMatchObject({ refused: true, unchanged: true, audited: true });
  });
});
