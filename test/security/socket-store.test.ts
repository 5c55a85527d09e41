/**
 * Escape suite: the broker's own files. The socket, its directory and the backup store
 * are never writable from inside the sandbox: not by the command's own syscalls (write,
 * create, rename, unlink, chmod, touch, symlink, rm -rf) and not by asking the broker
 * over its socket (host operations and token requests naming them). Each attempt fails,
 * the socket directory (snapshotted from inside, as it exists only during the run) and
 * the store's files are as they were, and each refusal is audited. Nor can the command
 * make the broker read for it what it may not read itself (a copy's source, or a file it
 * asks to change, whose backup would land in the store it can read).
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeRun, makeWorld, removeWorld, run, turnsOf, writeOld, type World } from '../e2e/run-helpers.js';
import { attack, deniedPath, hostOp, isDenyRecord, summarise, tokenLine, type AttackRun, type AuditRecord, type Route } from './socket-helpers.js';

const SESSION = 'sec-store';

let world: World;
let storeFiles: string[];
let blob: string;
let result: AttackRun;
let routes: Route[];

/** The socket dir is made per run (`brokered-shell-broker-XXXXXX`); records are matched by shape. */
const SOCK_DIR = /\/brokered-shell-broker-[^/]+$/;
const SOCK = /\/brokered-shell-broker-[^/]+\/broker\.sock$/;
const IN_SOCK_DIR = /\/brokered-shell-broker-[^/]+(\/.*)?$/;
const deniedMatching = (pattern: RegExp) => (r: AuditRecord) => isDenyRecord(r) && r.paths.some((p) => pattern.test(p.path) || pattern.test(p.normalisedPath ?? ''));
/** A file the command cannot read: in the workspace (the copy's source outside), owned by uid 1234, mode 0600. */
const secret = (name: string) => path.join(name.startsWith('op-copy') ? world.outside : world.ws, `secret-${name}`);
const deniedUnder = (dir: string) => (r: AuditRecord) => isDenyRecord(r) && r.paths.some((p) => p.path.startsWith(dir) || (p.normalisedPath ?? '').startsWith(dir));

function buildRoutes(): Route[] {
  const sockShell = (name: string, shell: string, pattern = IN_SOCK_DIR): Route => ({ name, shell, targets: [], inside: true, audited: deniedMatching(pattern) });
  const sockOp = (name: string, fields: Record<string, unknown>, pattern = IN_SOCK_DIR): Route => ({
    name,
    send: [hostOp({ sessionId: SESSION, toolCallId: '@CALL@', ...fields })],
    targets: [],
    inside: true,
    audited: deniedMatching(pattern),
  });
  const storeShell = (name: string, shell: string): Route => ({ name, shell, targets: storeFiles, audited: deniedUnder(world.home) });
  const storeOp = (name: string, fields: Record<string, unknown>): Route => ({
    name,
    send: [hostOp({ sessionId: SESSION, toolCallId: '@CALL@', ...fields })],
    targets: storeFiles,
    audited: deniedUnder(world.home),
  });
  const op = (fields: Record<string, unknown>) => hostOp({ sessionId: SESSION, toolCallId: '@CALL@', ...fields });
  const unreadable = (name: string, route: Partial<Route>): Route => ({ name, targets: [secret(name), path.join(world.ws, 'stolen'), ...storeFiles], audited: deniedPath(secret(name)), ...route });
  // Status 0 when any one store file could be changed this way.
  const eachStoreFile = (action: string) => `w=1; for x in $(find "$BROKERED_SHELL_HOME" -type f); do ${action} && w=0; done; exit $w`;
  return [
    sockShell('sockdir-new-file', 'echo x > "$SOCKDIR/evil"'),
    sockShell('sockdir-mkdir', 'mkdir "$SOCKDIR/d"'),
    sockShell('sockdir-symlink', 'ln -s /etc/passwd "$SOCKDIR/link"'),
    sockShell('sock-unlink', 'rm -f "$SOCK"', SOCK),
    sockShell('sock-rename', 'mv "$SOCK" "$SOCK.moved"', SOCK),
    sockShell('sock-chmod', 'chmod 777 "$SOCK"', SOCK),
    sockShell('sock-touch', 'touch -d 2000-01-01 "$SOCK"', SOCK),
    sockShell('sockdir-chmod', 'chmod 777 "$SOCKDIR"', SOCK_DIR),
    sockShell('sockdir-rename', 'mv "$SOCKDIR" "$SOCKDIR.moved"', SOCK_DIR),
    sockShell('sockdir-rm-rf', 'rm -rf "$SOCKDIR"'),
    sockOp('op-delete-sock', { operation: 'delete', path: '@SOCK@', deleteMode: 'unlink' }, SOCK),
    sockOp('op-trash-sock', { operation: 'delete', path: '@SOCK@' }, SOCK),
    sockOp('op-rename-sock', { operation: 'rename', from: '@SOCK@', to: '@SOCKDIR@/moved' }, SOCK),
    sockOp('op-chmod-sockdir', { operation: 'chmod', path: '@SOCKDIR@', mode: '0777' }, SOCK_DIR),
    sockOp('op-touch-sockdir', { operation: 'touch', path: '@SOCKDIR@/new' }),
    sockOp('op-mkdir-sockdir', { operation: 'mkdir', path: '@SOCKDIR@/d' }),
    sockOp('op-delete-sockdir', { operation: 'delete', path: '@SOCKDIR@', recursive: true, deleteMode: 'unlink' }, SOCK_DIR),
    { name: 'token-sockdir', send: [tokenLine('@SOCKDIR@/f', SESSION, '@CALL@')], targets: [], inside: true, audited: deniedMatching(IN_SOCK_DIR) },
    storeShell('store-new-file', 'echo x > "$BROKERED_SHELL_HOME/evil"'),
    storeShell('store-overwrite', eachStoreFile('echo x > "$x"')),
    storeShell('store-append', eachStoreFile('echo x >> "$x"')),
    storeShell('store-truncate', eachStoreFile('truncate -s 0 "$x"')),
    storeShell('store-chmod', eachStoreFile('chmod 666 "$x"')),
    storeShell('store-touch', eachStoreFile('touch -d 2000-01-01 "$x"')),
    storeShell('store-unlink', eachStoreFile('rm -f "$x"')),
    storeShell('store-rename', eachStoreFile('mv "$x" "$x.gone"')),
    storeShell('store-rm-rf', 'rm -rf "$BROKERED_SHELL_HOME"'),
    storeShell('store-move-away', 'mv "$BROKERED_SHELL_HOME" "$BROKERED_SHELL_HOME.gone"'),
    storeOp('op-delete-blob', { operation: 'delete', path: blob, deleteMode: 'unlink' }),
    storeOp('op-rename-blob', { operation: 'rename', from: blob, to: `${blob}.gone` }),
    storeOp('op-chmod-blob', { operation: 'chmod', path: blob, mode: 438 }),
    storeOp('op-touch-blob', { operation: 'touch', path: blob }),
    storeOp('op-copy-over-blob', { operation: 'copy', from: path.join(world.ws, 'f'), to: blob }),
    storeOp('op-symlink-in-store', { operation: 'link', from: '/etc/passwd', to: path.join(world.home, 'link'), symbolic: true }),
    storeOp('op-delete-store', { operation: 'delete', path: world.home, recursive: true, deleteMode: 'unlink' }),
    { name: 'token-blob', send: [tokenLine(blob, SESSION, '@CALL@')], targets: storeFiles, audited: deniedUnder(world.home) },
    // Files the command may not read (another owner, 0600): the broker must not read them for it,
    // neither by copying nor by backing them up into the store the command can read.
    unreadable('op-copy-unreadable', { send: [op({ operation: 'copy', from: secret('op-copy-unreadable'), to: path.join(world.ws, 'stolen') })] }),
    unreadable('token-unreadable', { send: [tokenLine(secret('token-unreadable'), SESSION, '@CALL@')] }),
    unreadable('op-delete-unreadable', { send: [op({ operation: 'delete', path: secret('op-delete-unreadable') })] }),
    unreadable('prebackup-unreadable', {
      send: [JSON.stringify({ command: 'CommandPrebackup', argv: ['tee', secret('prebackup-unreadable')], cwd: world.ws, sessionId: SESSION })],
    }),
    unreadable('append-unreadable', { shell: `echo x >> "${secret('append-unreadable')}"` }),
    unreadable('rm-unreadable', { shell: `rm -f "${secret('rm-unreadable')}"` }),
  ];
}

beforeAll(async () => {
  world = await makeWorld('sec-store');
  await writeOld(path.join(world.ws, 'f'), 'zero\n', 0o640);
  // A first turn, so the store holds a manifest and a blob to go after.
  const first = await run(world, 'echo one > f', { session: SESSION });
  if (first.status !== 0) throw new Error(describeRun(first));
  storeFiles = [];
  for (const entry of await fs.readdir(world.home, { recursive: true, withFileTypes: true })) {
    if (entry.isFile()) storeFiles.push(path.join(entry.parentPath, entry.name));
  }
  const found = storeFiles.find((file) => file.includes(`${path.sep}blobs${path.sep}`)) ?? storeFiles.find((file) => !file.endsWith('.json'));
  if (!found) throw new Error(`no blob in the store: ${storeFiles.join(', ')}`);
  blob = found;
  routes = buildRoutes();
  for (const route of routes.filter((r) => r.name.endsWith('-unreadable'))) {
    await writeOld(secret(route.name), `SECRET ${route.name}\n`, 0o600);
    await fs.chown(secret(route.name), 1234, 1234);
  }
  result = await attack(world, routes, { session: SESSION, inside: ['"$SOCKDIR"', '"$SOCK"'], flags: ['--no', '--message', 'store attempts'] });
}, 120_000);

afterAll(async () => {
  if (result) summarise('socket-store.test.ts', result.verdicts);
  await removeWorld(world);
});

describe("the broker's socket directory and backup store, from inside the sandbox", () => {
  it('the run ends normally and its turn is committed', async () => {
    expect(result.run.status, describeRun(result.run)).toBe(0);
    expect((await turnsOf(world, SESSION)).map((t) => t.message)).toEqual(['echo one > f', 'store attempts']);
  });

  it('the socket directory was seen from inside, with the socket in it', () => {
    const [dir, sock] = Object.values(result.inside.before ?? {}) as Array<{ mode: number; entries?: Record<string, unknown> } | null>;
    expect(dir?.mode).toBe(0o040700);
    expect(Object.keys(dir?.entries ?? {})).toEqual(['broker.sock']);
    expect(sock?.mode).toBe(0o140600);
  });

  it('every route is refused, leaves its target as it was and is audited as a denial', () => {
    const failures = [...result.verdicts].filter(([, v]) => !v.refused || !v.unchanged || !v.audited);
    expect(failures, describeRun(result.run)).toEqual([]);
    expect(result.verdicts.size).toBe(routes.length);
  });

  it('no secret reached the store or the workspace, and the command could not read them itself', async () => {
    for (const file of await fs.readdir(world.home, { recursive: true, withFileTypes: true })) {
      if (!file.isFile()) continue;
      expect((await fs.readFile(path.join(file.parentPath, file.name), 'utf8')).includes('SECRET'), file.name).toBe(false);
    }
    await expect(fs.lstat(path.join(world.ws, 'stolen'))).rejects.toThrow();
    expect(result.run.out).not.toContain('SECRET');
  });

  it('nothing was added beside the store or the socket directory', async () => {
    await expect(fs.stat(`${world.home}.gone`)).rejects.toThrow();
    await expect(fs.lstat(path.join(world.home, 'evil'))).rejects.toThrow();
    await expect(fs.lstat(path.join(world.home, 'link'))).rejects.toThrow();
  });
});
