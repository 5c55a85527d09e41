import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { childrenOf, signalTree } from '../../src/agent/process-tree.js';

/** A process's state letter from /proc (Z: dead, not yet reaped), or 'gone'. */
function stateOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /s, '').charAt(0);
  } catch {
    return 'gone';
  }
}

async function until(done: () => boolean): Promise<void> {
  while (!done()) await new Promise((resolve) => setTimeout(resolve, 10));
}

/** bash with two children of its own, started once both are running. */
async function shellWithTwoChildren() {
  const shell = spawn('bash', ['-c', 'sleep 600 & a=$!; sleep 600 & b=$!; echo started; wait $a $b'], { stdio: ['ignore', 'pipe', 'inherit'] });
  await once(shell.stdout, 'data');
  await until(() => childrenOf(shell.pid ?? -1).length === 2);
  return shell;
}

describe('signalTree', () => {
  it('signals every descendant and leaves the root alone unless asked', async () => {
    const shell = await shellWithTwoChildren();
    const children = childrenOf(shell.pid ?? -1).sort();
    const exited = once(shell, 'exit');
    expect(signalTree(shell.pid ?? -1, 'SIGTERM').sort()).toEqual(children);
    // The shell was not signalled: its `wait` returned and it exited with the children's status.
    expect(await exited).toEqual([128 + 15, null]);
  });

  it('with includeRoot, the root gets it too', async () => {
    const shell = await shellWithTwoChildren();
    const children = childrenOf(shell.pid ?? -1);
    const exited = once(shell, 'exit');
    expect(signalTree(shell.pid ?? -1, 'SIGKILL', { includeRoot: true }).sort()).toEqual([shell.pid, ...children].sort());
    expect(await exited).toEqual([null, 'SIGKILL']);
    // SIGKILL takes effect as the process is next scheduled: wait for each to be dead.
    for (const pid of children) await until(() => ['Z', 'gone'].includes(stateOf(pid)));
  });
});
