import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { once } from 'node:events';
import { readdirSync, readlinkSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { Broker, type BrokerRequestInput } from '../../src/core/index.js';
import { ProcStatusReader } from '../../src/plugins/proc-status.js';
import { RequesterAccessPlugin } from '../../src/plugins/requester-access.js';
import { allowAll, identityResolver } from '../helpers/bare-broker.js';

/** A process that renames itself (its `Name:` line) when told to, and exits when its input ends. */
const RENAMER = `
import sys
for line in sys.stdin:
    if line.strip() == 'rename':
        with open('/proc/self/comm', 'w') as comm:
            comm.write('renamed-now')
    print('done', flush=True)
`;

const children: ChildProcessWithoutNullStreams[] = [];
afterEach(() => {
  for (const child of children.splice(0)) child.kill();
});

function startChild(): ChildProcessWithoutNullStreams {
  const child = spawn('python3', ['-c', RENAMER]);
  children.push(child);
  return child;
}

async function tell(child: ChildProcessWithoutNullStreams, command: string): Promise<void> {
  child.stdin.write(`${command}\n`);
  await once(child.stdout, 'data');
}

const nameLine = (status: string | undefined) => /^Name:\s*(.*)$/m.exec(status ?? '')?.[1];
/** This process's descriptors open on its own status file. */
const ownStatusFds = () =>
  readdirSync('/proc/self/fd').filter((fd) => {
    try {
      return readlinkSync(`/proc/self/fd/${fd}`) === `/proc/${process.pid}/status`;
    } catch {
      return false; // the listing's own descriptor, closed by now
    }
  }).length;

describe('ProcStatusReader', () => {
  it('reads the status as it is now through the descriptor it keeps', async () => {
    const child = startChild();
    await tell(child, 'hello');
    const reader = new ProcStatusReader();
    expect(nameLine(reader.read(child.pid!))).toBe('python3');
    expect(reader.keptCount).toBe(1);
    await tell(child, 'rename');
    expect(nameLine(reader.read(child.pid!))).toBe('renamed-now');
    expect(reader.keptCount).toBe(1);
    reader.close();
  });

  it('answers nothing for a process that is gone, and lets its descriptor go', async () => {
    const child = startChild();
    await tell(child, 'hello');
    const reader = new ProcStatusReader();
    expect(reader.read(child.pid!)).toContain('Pid:');
    child.stdin.end();
    await once(child, 'exit');
    // Node reaps it on exit: the kept descriptor reads ESRCH, and the pid names no process.
    expect(reader.read(child.pid!)).toBeUndefined();
    expect(reader.keptCount).toBe(0);
    expect(reader.read(2 ** 30)).toBeUndefined();
  });

  it('keeps at most the descriptors it was given, and still reads every process', async () => {
    const [a, b] = [startChild(), startChild()];
    await Promise.all([tell(a, 'hello'), tell(b, 'hello')]);
    const reader = new ProcStatusReader(2);
    for (const pid of [process.pid, a.pid!, b.pid!, process.pid]) {
      expect(reader.read(pid)).toMatch(new RegExp(`^Pid:\\s*${pid}$`, 'm'));
      expect(reader.keptCount).toBeLessThanOrEqual(2);
    }
    reader.close();
  });

  it('reads a status longer than its buffer whole', () => {
    const reader = new ProcStatusReader(4, 64);
    const status = reader.read(process.pid);
    expect(status).toMatch(/^Pid:/m);
    expect(status).toMatch(/^CapEff:/m);
    expect(status?.endsWith('\n')).toBe(true);
    reader.close();
  });
});

describe('RequesterAccessPlugin with the status files of real peers', () => {
  // This process owns /d and /d/f; /d/copy is not there yet.
  const uid = process.getuid?.() ?? 0;
  const stat = (file: string) =>
    file === '/d/copy' ? undefined : { uid, gid: 0, mode: file === '/d/f' ? 0o644 : 0o755, isFile: () => file === '/d/f' };
  const peer = { pid: process.pid, uid, gid: process.getgid?.() ?? 0 };
  const request: BrokerRequestInput = {
    origin: 'host-op',
    action: 'host-op',
    operation: 'copy',
    targets: [
      { role: 'from', path: '/d/f', access: 'read' },
      { role: 'to', path: '/d/copy', access: 'write' },
    ],
    sessionId: 's1',
    peer,
  };

  it('judges a socket peer by its live status and closes what it kept with the broker', async () => {
    const broker = new Broker({ sessionId: 's1' }).use(identityResolver('file'), allowAll(), new RequesterAccessPlugin({ stat }));
    expect(ownStatusFds()).toBe(0);
    expect((await broker.handle(request)).decision.verdict).toBe('sandbox');
    expect((await broker.handle(request)).decision.verdict).toBe('sandbox');
    expect(ownStatusFds()).toBe(1);
    await broker.close();
    expect(ownStatusFds()).toBe(0);
  });

  it('refuses a peer whose process is gone', async () => {
    const broker = new Broker({ sessionId: 's1' }).use(identityResolver('file'), allowAll(), new RequesterAccessPlugin({ stat }));
    const gone = await broker.handle({ ...request, peer: { ...peer, pid: 2 ** 30 } });
    expect(gone.decision).toMatchObject({ verdict: 'deny', source: 'requester-access' });
  });
});
