/**
 * Orphans of a command stay its tool call's, in both runtimes, with the real sandbox:
 * `(cmd &)` leaves `cmd` without its parent, and the kernel hands it to the nearest
 * child subreaper, which is the launcher (the seccomp supervisor, or the preload
 * launcher) bound to the tool call: its writes are asked about, backed up and undone as
 * the call's. A process outside the call naming the call's id is still refused, and what
 * the command leaves running ends with it.
 */
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { blobOf, brokeredShell, describeRun, entryFor, makeWorld, onlyTurn, removeWorld, type CliOptions, type World } from './run-helpers.js';
import { runtimeArgs } from './preload-helpers.js';

const RUNTIMES = ['seccomp', 'preload'] as const;

function runIn(world: World, runtime: string, session: string, command: string, options: CliOptions = {}) {
  return brokeredShell(world, ['run', ...runtimeArgs(world, runtime), '--workspace', world.ws, '--session', session, '--', command], options);
}

/** One line, answered, on the broker's socket, from this (the test's) process. */
function askFromOutside(socket: string, line: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let received = '';
    const client = net.createConnection(socket, () => client.write(`${line}\n`));
    client.on('data', (chunk) => {
      received += String(chunk);
      if (received.includes('\n')) {
        client.destroy();
        resolve(received.trim());
      }
    });
    client.on('error', reject);
  });
}

describe.each(RUNTIMES)('run --runtime %s: orphans of the command', (runtime) => {
  let world: World;
  beforeAll(async () => {
    world = await makeWorld(`orphans-${runtime}`);
  });
  afterAll(() => removeWorld(world));

  it('an orphan writes as the tool call: asked, backed up, and the turn undoes it', async () => {
    const file = path.join(world.ws, 'f.txt');
    await fs.writeFile(file, 'before\n');
    // The inner subshell is orphaned at once; the command waits for it through a FIFO.
    const command = 'mkfifo "$TMPDIR/p"; ( (echo bg > f.txt; echo done > "$TMPDIR/p") & ); read x < "$TMPDIR/p"; cat f.txt';
    const result = await runIn(world, runtime, `orphan-${runtime}`, command);
    expect(result.status, describeRun(result)).toBe(0);
    expect(result.stderr).not.toMatch(/denied/);
    expect(await fs.readFile(file, 'utf8')).toBe('bg\n');
    const turn = await onlyTurn(world, `orphan-${runtime}`);
    const entry = entryFor(turn, file);
    expect(entry).toBeDefined();
    expect((await blobOf(world, turn, entry as NonNullable<typeof entry>)).toString()).toBe('before\n');
    const restored = await brokeredShell(world, ['backups', 'restore', turn.id]);
    expect(restored.status, describeRun(restored)).toBe(0);
    expect(await fs.readFile(file, 'utf8')).toBe('before\n');
  }, 60_000);

  it('a process outside the tool call naming its id is refused while the call and its orphan run', async () => {
    const claimed = path.join(world.ws, 'claimed.txt');
    const go = path.join(world.outside, `go-${runtime}`);
    // Announce the socket and the call's id, keep an orphan alive, and wait for the test.
    const command = [
      '( (sleep 60) & )',
      'echo "@@ask $BROKERED_SHELL_SOCKET $BROKERED_SHELL_SESSION_ID $BROKERED_SHELL_TOOL_CALL_ID"',
      `while [ ! -e ${go} ]; do sleep 0.02; done`,
    ].join('; ');
    let asked: Promise<string> | undefined;
    const result = await runIn(world, runtime, `outside-${runtime}`, command, {
      onStdout: (text) => {
        const match = /^@@ask (\S+) (\S+) (\S+)$/m.exec(text);
        if (!match || asked) return;
        const [, socket = '', session = '', toolCall = ''] = match;
        asked = askFromOutside(socket, `x.read-write\t${claimed}\t${session}\t${toolCall}`).finally(() => fs.writeFile(go, ''));
      },
    });
    expect(result.status, describeRun(result)).toBe(0);
    expect(await asked).toBe('DENY');
    expect(existsSync(claimed)).toBe(false);
  }, 60_000);

  it('what the command leaves running ends with it', async () => {
    const result = await runIn(world, runtime, `leftover-${runtime}`, '(sleep 60 & echo "@@pid $!"); sleep 60 & echo "@@pid $!"');
    expect(result.status, describeRun(result)).toBe(0);
    const pids = [...result.out.matchAll(/^@@pid (\d+)$/gm)].map((match) => Number(match[1]));
    expect(pids).toHaveLength(2);
    for (const pid of pids) expect(existsSync(`/proc/${pid}`)).toBe(false);
  }, 60_000);
});
