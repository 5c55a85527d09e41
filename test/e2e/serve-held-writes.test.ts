/**
 * `serve` with clients that live across turns: a preload client (a real bash with the
 * brokered-preload library) opens a file for writing in turn 1 and writes through the
 * same descriptor in turn 2, with no request in between; a Python client does the same
 * through a shared writable mapping it made in turn 1 and keeps after closing the file.
 * Each file is in turn 2's backups as it was when turn 2 began, so undoing turn 2 takes
 * its writes back and leaves turn 1's.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BackupHome } from '../../src/backup/index.js';
import { locatePreloadLibrary } from '../../src/sandbox/preload.js';
import { CLI, startServe, type ServeHandle } from '../helpers/serve-process.js';

let serve: ServeHandle;

beforeAll(async () => {
  serve = await startServe({ session: 'held-1' });
});
afterAll(() => serve.cleanup());

/** A client process of the session; `step()` sends it a line and waits for its next `ready` line. */
function client(argv: string[], env: NodeJS.ProcessEnv = {}) {
  const child: ChildProcessWithoutNullStreams = spawn(argv[0] ?? '', argv.slice(1), {
    cwd: serve.workspace,
    env: { ...process.env, BROKERED_SHELL_SOCKET: serve.socket, BROKERED_SHELL_SESSION_ID: 'held-1', BROKERED_SHELL_TOOL_CALL_ID: 'client', ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk) => (stderr += String(chunk)));
  const lines = createInterface({ input: child.stdout });
  const waiting: Array<(line: string) => void> = [];
  lines.on('line', (line) => waiting.shift()?.(line));
  const next = () =>
    new Promise<string>((resolve, reject) => {
      waiting.push(resolve);
      child.once('exit', (code) => reject(new Error(`client exited ${String(code)}: ${stderr}`)));
    });
  return {
    ready: next(),
    step: (line = 'go') => {
      const answered = next();
      child.stdin.write(`${line}\n`);
      return answered;
    },
    stop: () => child.kill('SIGKILL'),
  };
}

async function commit(message: string): Promise<string> {
  const answer = await serve.control({ command: 'CommitModifyBackup', commitMsg: message });
  expect(answer).toMatchObject({ ok: true });
  return answer.turnId as string;
}

async function backupOf(turnId: string, file: string): Promise<string | undefined> {
  const store = await new BackupHome({ home: serve.home }).session('held-1');
  const turn = await store.readTurn(turnId);
  const entry = turn.files.find((f) => f.path === file);
  return entry?.sha256 ? (await store.readBlob(entry.sha256)).toString() : undefined;
}

describe('serve: a descriptor kept from one turn to the next', () => {
  it.each([
    [
      'a preload client writing through a descriptor',
      (file: string) => ['/bin/bash', '-c', `exec 3>>"${file}"; echo one >&3; echo ready; read _; echo two >&3; echo ready; read _`],
      { LD_PRELOAD: locatePreloadLibrary() },
    ],
    [
      'a client writing through a shared mapping of a file it closed',
      (file: string) => [
        'python3',
        '-c',
        [
          'import mmap, os, sys',
          `fd = os.open(${JSON.stringify(file)}, os.O_RDWR)`,
          'os.ftruncate(fd, 16)',
          'm = mmap.mmap(fd, 16, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)',
          'os.close(fd)',
          "m[0:4] = b'one\\n'",
          "print('ready', flush=True)",
          'sys.stdin.readline()',
          "m[4:8] = b'two\\n'",
          'm.flush()',
          "print('ready', flush=True)",
          'sys.stdin.readline()',
        ].join('\n'),
      ],
      {},
    ],
  ])('%s: turn 2 backs the file up as turn 2 found it, and undoing turn 2 takes its writes back', async (_label, argv, env) => {
    const name = `held-${Math.random().toString(16).slice(2)}.txt`;
    const file = path.join(serve.workspace, name);
    await fs.writeFile(file, 'zero\n');
    // The Python client opens its file itself: the broker must have been asked about it.
    if (!('LD_PRELOAD' in env)) {
      const answer = await new Promise<string>((resolve) => {
        const asker = spawn('python3', ['-c', 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(sys.argv[2].encode()); print(s.recv(100).decode().strip())', serve.socket, `x.read-write\t${file}\theld-1\tclient\n`]);
        let out = '';
        asker.stdout.on('data', (chunk) => (out += String(chunk)));
        asker.on('exit', () => resolve(out.trim()));
      });
      expect(answer).toBe('SANDBOX');
    }
    const holder = client(argv(file), env);
    try {
      await holder.ready;
      const turn1 = await commit('turn 1');
      const afterTurn1 = await fs.readFile(file);
      await holder.step();
      const turn2 = await commit('turn 2');
      expect(await backupOf(turn1, file)).toBe('zero\n');
      expect(await backupOf(turn2, file)).toBe(afterTurn1.toString());
      const restored = spawn(process.execPath, [CLI, 'backups', 'restore', turn2], { env: serve.env });
      expect(await new Promise((resolve) => restored.on('exit', resolve))).toBe(0);
      expect(await fs.readFile(file)).toEqual(afterTurn1);
    } finally {
      holder.stop();
    }
  }, 60_000);

  it('no turn is opened when nothing is held', async () => {
    // The turn the last case's client was still holding its file into.
    await commit('after the clients');
    const before = (await new BackupHome({ home: serve.home }).listTurns({ sessionId: 'held-1' })).length;
    await commit('nothing held');
    const turns = await new BackupHome({ home: serve.home }).listTurns({ sessionId: 'held-1' });
    expect(turns).toHaveLength(before + 1);
    expect(turns.every((turn) => turn.committedAt !== null)).toBe(true);
  });
});
