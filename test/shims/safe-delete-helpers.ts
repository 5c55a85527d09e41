import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { expect } from 'vitest';
import { BackupHome, sessionBackupDir, type BackupEntry } from '../../src/backup/index.js';
import { REPO_ROOT, startServe, tempDir, type ServeHandle } from '../helpers/serve-process.js';

/** The safe-delete shims under test, as the project ships them. */
export const SHIMS = path.join(REPO_ROOT, 'shims', 'safe-delete');
export const CLIENT = path.join(SHIMS, 'broker-delete.cjs');
export const BASH_SHIM = path.join(SHIMS, 'safe-delete.sh');
export const NODE_SHIM = path.join(SHIMS, 'node-safe-delete.cjs');
export const PYTHON_DIR = path.join(SHIMS, 'python');
export const SESSION = 's1';
export const TOOL_CALL = 'tool-call-7';

export interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Run a program to its end without blocking this process (a test server may need to accept). */
export function runProcess(command: string, args: string[], options: { env: NodeJS.ProcessEnv; cwd?: string }): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env: options.env, cwd: options.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += String(chunk)));
    child.stderr.on('data', (chunk) => (stderr += String(chunk)));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** The env a command inside the broker's turn has; no shim is preloaded unless asked. */
export function brokerEnv(serve: ServeHandle, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...serve.env,
    BROKERED_SHELL_SOCKET: serve.socket,
    BROKERED_SHELL_SESSION_ID: SESSION,
    BROKERED_SHELL_TOOL_CALL_ID: TOOL_CALL,
    BROKERED_SHELL_TRACE_ID: 'trace-1',
    BROKERED_SHELL_NODE: process.execPath,
  };
  for (const name of ['NODE_OPTIONS', 'PYTHONPATH', 'BASH_ENV', 'BROKERED_SHELL_SAFE_DELETE_IN_CLIENT', 'BROKERED_SHELL_CLIENT_TIMEOUT_MS']) delete env[name];
  return { ...env, ...extra };
}

/** A broker that is not there: the socket variable names a path nobody listens on. */
export function downEnv(serve: ServeHandle, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  return brokerEnv(serve, { BROKERED_SHELL_SOCKET: path.join(path.dirname(serve.workspace), 'nobody-here.sock'), ...extra });
}

/** The policy every shim test runs under: keep.txt may never be deleted. */
export async function startPolicyServe(): Promise<ServeHandle> {
  const dir = tempDir('bsh-sd-policy-');
  const policy = path.join(dir, 'policy.json');
  writeFileSync(policy, JSON.stringify({ rules: [{ pattern: 'keep.txt', decision: 'deny' }] }));
  return startServe({ session: SESSION, extraArgs: ['--policy', policy] });
}

let counter = 0;
/** A new file with unique content (and a unique name unless given) in `dir`. */
export function makeFile(dir: string, name?: string): { path: string; bytes: Buffer } {
  counter += 1;
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, name ?? `file-${process.pid}-${counter}.txt`);
  const bytes = Buffer.from(`content ${counter} of ${file}\n\u00e9\u0000\u00ff`, 'utf8');
  writeFileSync(file, bytes);
  return { path: file, bytes };
}

/** A directory outside the serve's workspace (inside its temp dir, cleaned up with it). */
export function outsideDir(serve: ServeHandle): string {
  const dir = path.join(path.dirname(serve.workspace), 'outside');
  mkdirSync(dir, { recursive: true });
  return dir;
}

export function trashDir(serve: ServeHandle): string {
  return path.join(serve.trashHome, 'Trash');
}

/** The file is gone from where it was and sits in the freedesktop trash with the same bytes. */
export function expectTrashed(serve: ServeHandle, file: { path: string; bytes: Buffer }): string {
  expect(existsSync(file.path)).toBe(false);
  const trashed = path.join(trashDir(serve), 'files', path.basename(file.path));
  expect(readFileSync(trashed)).toEqual(file.bytes);
  const info = readFileSync(path.join(trashDir(serve), 'info', `${path.basename(file.path)}.trashinfo`), 'utf8');
  expect(info).toMatch(/^\[Trash Info\]\nPath=/);
  return trashed;
}

/** Untouched: still there, same bytes, and not in the trash. */
export function expectUntouched(serve: ServeHandle, file: { path: string; bytes: Buffer }): void {
  expect(readFileSync(file.path)).toEqual(file.bytes);
  const files = path.join(trashDir(serve), 'files');
  const names = existsSync(files) ? readdirSync(files) : [];
  expect(names).not.toContain(path.basename(file.path));
}

export function sha256(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** Commit the open turn and return what its manifest recorded, by path. */
export async function commitTurn(serve: ServeHandle, message: string): Promise<Map<string, BackupEntry>> {
  const answer = await serve.control({ command: 'CommitModifyBackup', commitMsg: message });
  expect(answer).toMatchObject({ ok: true });
  const { manifest } = await new BackupHome({ home: serve.home }).findTurn(String(answer.turnId));
  expect(manifest.message).toBe(message);
  return new Map(manifest.files.map((entry) => [entry.path, entry]));
}

/** After a commit: the manifest has a delete backup of the file whose blob holds its bytes. */
export async function expectBackedUp(serve: ServeHandle, files: Array<{ path: string; bytes: Buffer }>, message: string): Promise<void> {
  const entries = await commitTurn(serve, message);
  for (const file of files) {
    const entry = entries.get(file.path);
    expect(entry, `backup of ${file.path}`).toMatchObject({ operation: 'delete', size: file.bytes.length, sha256: sha256(file.bytes), toolCallId: TOOL_CALL });
    expect(entry?.blob).toBeTruthy();
    expect(readFileSync(path.join(sessionBackupDir(serve.home, SESSION), String(entry?.blob)))).toEqual(file.bytes);
  }
}

/** Commit and check that none of these files was backed up (a denied or local delete). */
export async function expectNoBackup(serve: ServeHandle, files: Array<{ path: string }>, message: string): Promise<void> {
  const entries = await commitTurn(serve, message);
  for (const file of files) expect(entries.has(file.path), `no backup of ${file.path}`).toBe(false);
}

/** A "broker" that accepts connections and never answers. */
export async function silentBroker(dir: string): Promise<{ socket: string; connections: () => number; close: () => Promise<void> }> {
  const socket = path.join(dir, 'silent.sock');
  let connections = 0;
  const open = new Set<net.Socket>();
  const server = net.createServer((connection) => {
    connections += 1;
    open.add(connection);
    connection.on('close', () => open.delete(connection));
    connection.on('error', () => undefined);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socket, resolve);
  });
  return {
    socket,
    connections: () => connections,
    close: () =>
      new Promise<void>((resolve) => {
        for (const connection of open) connection.destroy();
        server.close(() => resolve());
      }),
  };
}

/** A socket file whose listener is gone: connecting is refused (ECONNREFUSED). */
export async function staleSocket(dir: string): Promise<string> {
  const socket = path.join(dir, 'stale.sock');
  const made = await runProcess('python3', ['-c', 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])', socket], { env: process.env });
  expect(made.code).toBe(0);
  return socket;
}
