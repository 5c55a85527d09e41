/**
 * `brokered-shell run --runtime preload` end to end: the shared undo cases of
 * undo-suite.ts, each run by a dynamically linked program that loads the brokered-preload
 * library, plus the ways into the library the seccomp list does not need. What the library
 * cannot see (a static busybox) is in preload-limits.test.ts.
 */
import { expect } from 'vitest';
import { PRELOAD_MARK, SHOW_RUNTIME, runPreload } from './preload-helpers.js';
import { ORIG, defineUndoSuite, read } from './undo-suite.js';

defineUndoSuite({
  title: 'run --runtime preload: changes to existing files',
  firstTest: 'runs every case in one turn, in the preload runtime, and exits with the command status',
  worldName: 'preload-undo',
  session: 'preload-undo-session',
  run: runPreload,
  preamble: [SHOW_RUNTIME],
  checkRun: (result) => expect(result.out.split('\n')[0]).toBe(PRELOAD_MARK),
  extraCases: [
    // Beyond the seccomp list: the other ways into the library.
    {
      // fopen(3) opens inside libc, not through open(2): its own hook.
      name: 'sort-fopen',
      command: 'sort -r -o f f',
      backedUp: ['f'],
      changed: async (d) => expect(await read(d, 'f')).toBe('second line\noriginal a content\n'),
    },
    {
      // truncate(2) by path, not through an open fd.
      name: 'perl-truncate',
      command: `perl -e 'truncate("f", 3) or die "$!"'`,
      backedUp: ['f'],
      changed: async (d) => expect(await read(d, 'f')).toBe(ORIG.slice(0, 3)),
    },
    {
      // posix_spawn's file actions open the file in the child, inside libc: asked when added.
      name: 'posix-spawn',
      command: `python3 -c "
import os
pid = os.posix_spawn('/bin/echo', ['echo', 'spawned'], os.environ, file_actions=[(os.POSIX_SPAWN_OPEN, 1, 'f', os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)])
_, status = os.waitpid(pid, 0)
raise SystemExit(os.waitstatus_to_exitcode(status))
"`,
      backedUp: ['f'],
      changed: async (d) => expect(await read(d, 'f')).toBe('spawned\n'),
    },
  ],
});
