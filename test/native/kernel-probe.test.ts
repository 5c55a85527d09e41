import fs from 'node:fs';
import os from 'node:os';
import { describe, expect, it } from 'vitest';
import { kernelProbeSchema, native } from '../../src/native/index.js';

/** States ('R', 'S', 'Z', …) of this process's direct children, read from /proc. */
function childStates(): string[] {
  const states: string[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // exited while we looked
    }
    // "pid (comm) state ppid …": comm may hold spaces, so split after the last ')'.
    const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (state !== undefined && Number(ppid) === process.pid) states.push(state);
  }
  return states;
}

describe('probeKernel', () => {
  it('finds every feature the runtime needs on this machine class', () => {
    const probe = kernelProbeSchema.parse(native().probeKernel());
    expect(probe.release).toBe(os.release());
    expect(probe.machine).toBe(os.machine());
    expect(probe.landlockAbi).toBeGreaterThanOrEqual(6);
    expect(probe).toMatchObject({
      seccompUserNotif: true,
      seccompAddfdSend: true,
      seccompWaitKillableRecv: true,
      seccompSyncWakeUp: true,
      openat2: true,
      pidfdGetfd: true,
      fchmodat2: true,
      notes: [],
    });
  });

  it('answers the same when asked again and leaves no probe child behind', () => {
    const first = native().probeKernel();
    const second = native().probeKernel();
    expect(second).toEqual(first);
    expect(childStates().filter((state) => state === 'Z')).toEqual([]);
  });
});
