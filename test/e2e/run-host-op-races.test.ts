/**
 * The broker answers the supervisor, and the supervisor then performs the operation.
 * A command can also ask the broker for host operations over its socket; one that ran
 * between that answer and the operation could change what the answer was about. Here a
 * command opens a new name `held-target` for writing while another of its threads asks
 * the broker, over the socket, to hard-link an existing file `W` onto that name. An
 * LD_PRELOAD shim in the supervisor (test/fixtures/sandbox/hold-open-on-behalf.c)
 * holds the open right after the broker's answer, for up to two seconds, until the link
 * is there: without the broker keeping its other changes back until the supervisor is
 * done, the open then truncated W, which nobody had backed up.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT, brokeredShell, describeRun, makeWorld, removeWorld, type CliRun, type World } from './run-helpers.js';

const RACER = `
import json, os, socket, threading, time
marker = os.environ['BSH_HOLD_MARKER']
answers = []
def racer():
    deadline = time.monotonic() + 10
    while not os.path.exists(marker):
        if time.monotonic() > deadline:
            answers.append('the supervisor never reached the held open')
            return
        time.sleep(0.002)
    s = socket.socket(socket.AF_UNIX)
    s.connect(os.environ['BROKERED_SHELL_SOCKET'])
    op = {'command': 'HostFileOperation', 'operation': 'link', 'from': os.path.abspath('W'),
          'to': os.path.abspath('held-target'), 'sessionId': os.environ['BROKERED_SHELL_SESSION_ID']}
    s.sendall((json.dumps(op) + '\\n').encode())
    answers.append(s.makefile().readline().strip())
t = threading.Thread(target=racer)
t.start()
fd = os.open('held-target', os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b'written through the new name\\n')
os.close(fd)
t.join()
print(answers[0])
`;

let world: World;
let shim: string;
let result: CliRun;

beforeAll(async () => {
  world = await makeWorld('host-op-races');
  shim = path.join(world.tools, 'hold-open-on-behalf.so');
  execFileSync('gcc', ['-O2', '-Wall', '-Werror', '-shared', '-fPIC', '-o', shim, path.join(REPO_ROOT, 'test', 'fixtures', 'sandbox', 'hold-open-on-behalf.c'), '-ldl']);
  await fs.writeFile(path.join(world.ws, 'W'), 'W before the turn\n');
  await fs.writeFile(path.join(world.tools, 'racer.py'), RACER);
  result = await brokeredShell(world, ['run', '--session', 'host-op-race', '--', `python3 ${path.join(world.tools, 'racer.py')}`], {
    env: {
      LD_PRELOAD: shim,
      BSH_HOLD_NAME: 'held-target',
      BSH_HOLD_MARKER: path.join(world.outside, 'answered'),
      BSH_HOLD_WATCH: path.join(world.ws, 'held-target'),
      BSH_HOLD_MS: '2000',
    },
  });
}, 60_000);
afterAll(() => removeWorld(world));

describe('a socket host operation racing an operation the supervisor was allowed', () => {
  it('waits until the supervisor is done: W keeps its bytes, and the link finds the name taken', async () => {
    expect(result.out, describeRun(result)).not.toContain('never reached');
    expect(await fs.readFile(path.join(world.ws, 'W'), 'utf8')).toBe('W before the turn\n');
    expect(await fs.readFile(path.join(world.ws, 'held-target'), 'utf8')).toBe('written through the new name\n');
    expect((await fs.stat(path.join(world.ws, 'W'))).nlink).toBe(1);
    expect(JSON.parse(result.out.trim().split('\n').at(-1) ?? '{}')).toMatchObject({ ok: false });
    expect(result.out).toMatch(/EEXIST/);
  });
});
