/**
 * `brokered-shell run` (seccomp runtime) end to end: the shared undo cases of
 * undo-suite.ts (shell redirections, coreutils, interpreters, absolute paths, toybox, C
 * programs using ftruncate and a shared mmap, tar, ln, O_TMPFILE), plus a static busybox,
 * which only the kernel runtime can see.
 */
import { expect } from 'vitest';
import { run } from './run-helpers.js';
import { defineUndoSuite, read } from './undo-suite.js';

defineUndoSuite({
  title: 'run: changes to existing files',
  firstTest: 'runs every case in one turn and exits with the command status',
  worldName: 'undo',
  session: 'undo-session',
  run,
  extraCases: [
    {
      name: 'static-busybox',
      command: `busybox sh -c 'echo x > f'`,
      backedUp: ['f'],
      changed: async (d) => expect(await read(d, 'f')).toBe('x\n'),
    },
  ],
});
