/**
 * What the preload runtime does NOT see, asserted as it really is, and what still holds
 * then. The library lives inside dynamically linked programs that keep LD_PRELOAD: a
 * statically linked busybox, a program that clears its environment, or a raw syscall
 * changes a file in the workspace without asking — and without a backup. Landlock is
 * the floor under that: even those cannot write outside the writable roots.
 *
 * Also here: the library fails closed when the broker cannot be reached.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TurnManifest } from '../../src/backup/index.js';
import { locatePreloadLibrary } from '../../src/sandbox/index.js';
import { PRELOAD_MARK, SHOW_RUNTIME, runPreload } from './preload-helpers.js';
import { ST, caseStatuses, describeRun, entryFor, makeWorld, onlyTurn, removeWorld, writeOld, type CliRun, type World } from './run-helpers.js';

const SESSION = 'preload-limits-session';
const OLD = 'old bytes\n';
/** unlinkat(2)'s number, for a program that calls the kernel directly. */
const SYS_UNLINKAT = os.arch() === 'arm64' ? 35 : 263;
const AT_FDCWD = -100;

let world: World;
let result: CliRun;
let statuses: Map<string, number>;
let manifest: TurnManifest;
/** A unix socket outside every root, standing for another session's `serve` or a root service. */
let service: net.Server;
let serviceConnections = 0;
const ws = (name: string) => path.join(world.ws, name);
const read = (file: string) => fs.readFile(file, 'utf8');
const missing = (file: string) =>
  fs.lstat(file).then(
    () => false,
    () => true,
  );

beforeAll(async () => {
  world = await makeWorld('preload-limits');
  for (const name of ['static', 'cleared', 'raw', 'asked']) await writeOld(ws(name), OLD);
  await writeOld(path.join(world.outside, 'static'), OLD);
  await writeOld(path.join(world.outside, 'dynamic'), OLD);
  service = net.createServer((socket) => {
    serviceConnections += 1;
    socket.end();
  });
  await new Promise<void>((resolve) => service.listen(path.join(world.outside, 'service.sock'), resolve));
  const script = [
    ST,
    SHOW_RUNTIME,
    // Limits: not seen by the library, so not asked and not backed up.
    `busybox sh -c 'echo static > static'; st static`,
    `env -i /bin/sh -c 'echo cleared > cleared'; st cleared`,
    `perl -e 'my $p = "raw"; exit(syscall(${SYS_UNLINKAT}, ${AT_FDCWD}, $p, 0) == 0 ? 0 : 1)'; st raw`,
    // The same kind of change by a dynamically linked program is asked for.
    `echo asked > asked; st asked`,
    // Landlock still holds outside the writable roots, for everything.
    `busybox sh -c 'echo x > "$OUT/static"' 2>/dev/null; st outside-static`,
    `echo x > "$OUT/dynamic" 2>/dev/null; st outside-dynamic`,
    // Nothing governs connect(2) here (the seccomp runtime mediates it).
    `perl -MIO::Socket::UNIX -e 'exit(IO::Socket::UNIX->new(Peer => "$ENV{OUT}/service.sock") ? 0 : 1)'; st connect-outside`,
  ].join('\n');
  result = await runPreload(world, script, { session: SESSION });
  statuses = caseStatuses(result.out);
  manifest = await onlyTurn(world, SESSION);
});

afterAll(async () => {
  await new Promise((resolve) => service.close(resolve));
  await removeWorld(world);
});

describe('preload runtime: limits', () => {
  it('ran in the preload runtime', () => {
    expect(result.status, describeRun(result)).toBe(0);
    expect(result.out.split('\n')[0]).toBe(PRELOAD_MARK);
  });

  it('LIMIT: a statically linked busybox writes to an existing file unseen: the change happens, no backup', async () => {
    expect(statuses.get('static'), describeRun(result)).toBe(0);
    expect(await read(ws('static'))).toBe('static\n');
    expect(entryFor(manifest, ws('static'))).toBeUndefined();
  });

  it('LIMIT: a program that clears its environment (and with it LD_PRELOAD) writes unseen', async () => {
    expect(statuses.get('cleared'), describeRun(result)).toBe(0);
    expect(await read(ws('cleared'))).toBe('cleared\n');
    expect(entryFor(manifest, ws('cleared'))).toBeUndefined();
  });

  it('LIMIT: a raw syscall (perl syscall(), no libc wrapper) deletes unseen', async () => {
    expect(statuses.get('raw'), describeRun(result)).toBe(0);
    expect(await missing(ws('raw'))).toBe(true);
    expect(entryFor(manifest, ws('raw'))).toBeUndefined();
  });

  it('LIMIT: a command connects to a unix socket outside every root', () => {
    expect(statuses.get('connect-outside'), describeRun(result)).toBe(0);
    expect(serviceConnections).toBe(1);
  });

  it('the same change by a dynamically linked program is backed up', async () => {
    expect(statuses.get('asked')).toBe(0);
    expect(await read(ws('asked'))).toBe('asked\n');
    expect(entryFor(manifest, ws('asked'))).toMatchObject({ kind: 'file', size: OLD.length });
  });

  it('Landlock stops even the static busybox outside the writable roots', async () => {
    expect(statuses.get('outside-static')).not.toBe(0);
    expect(await read(path.join(world.outside, 'static'))).toBe(OLD);
  });

  it('a dynamically linked write outside the roots is refused by the broker first, and reported', async () => {
    expect(statuses.get('outside-dynamic')).toBe(1);
    expect(await read(path.join(world.outside, 'dynamic'))).toBe(OLD);
    expect(result.stderr).toContain(`brokered-shell: denied write ${path.join(world.outside, 'dynamic')}`);
    // The static write never reached the broker: nothing to report.
    expect(result.stderr).not.toContain(path.join(world.outside, 'static'));
  });
});

describe('preload library without a broker', () => {
  let dir: string;
  const library = () => locatePreloadLibrary();

  beforeAll(async () => {
    dir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'bsh-preload-closed-')));
  });
  afterAll(() => fs.rm(dir, { recursive: true, force: true }));

  /** bash with the library loaded directly (no launcher), in `dir`, with these broker variables. */
  function bash(script: string, brokerEnv: NodeJS.ProcessEnv) {
    const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, LANG: 'C.UTF-8', LC_ALL: 'C.UTF-8', LD_PRELOAD: library(), ...brokerEnv };
    return spawnSync('/bin/bash', ['-c', script], { cwd: dir, env, encoding: 'utf8' });
  }

  it.each([
    ['a socket nobody listens on', { BROKERED_SHELL_SOCKET: '/nonexistent/broker.sock', BROKERED_SHELL_SESSION_ID: 's' }],
    ['no broker variables at all', {}],
  ])('%s: every write it would ask about fails with EACCES and changes nothing; reads work', async (_label, brokerEnv) => {
    await writeOld(path.join(dir, 'f'), OLD);
    const ran = bash(
      [ST, 'cat f; st read', 'echo x > f; st redirect', 'rm f; st rm', 'mv f g; st mv', 'mkdir d; st mkdir', 'chmod 600 f; st chmod'].join('\n'),
      brokerEnv,
    );
    const got = caseStatuses(ran.stdout);
    expect(got.get('read'), ran.stderr).toBe(0);
    expect(ran.stdout).toContain(OLD);
    for (const name of ['redirect', 'rm', 'mv', 'mkdir', 'chmod']) expect(got.get(name), `${name}: ${ran.stderr}`).toBe(1);
    expect(ran.stderr).toContain('f: Permission denied');
    expect(await read(path.join(dir, 'f'))).toBe(OLD);
    expect((await fs.stat(path.join(dir, 'f'))).mode & 0o777).toBe(0o640);
    expect(await missing(path.join(dir, 'g'))).toBe(true);
    expect(await missing(path.join(dir, 'd'))).toBe(true);
  });
});
