import { describe, expect, it } from 'vitest';
import type { EndTurnResult } from '../../src/agent/types.js';
import { turnSummary, turnSummaryLine, withConfigFile } from '../../src/agent/turn-summary.js';

const ended = (extra: Partial<EndTurnResult>): EndTurnResult => ({ ok: true, turnId: 'T1', files: 0, message: 'm', ...extra });

describe("run's turn summary", () => {
  it.each<[string, Partial<EndTurnResult>, string | undefined]>([
    ['backups only', { files: 2 }, 'brokered-shell: turn T1 backed up 2 files (brokered-shell backups show T1)'],
    ['one backup', { files: 1 }, 'brokered-shell: turn T1 backed up 1 file (brokered-shell backups show T1)'],
    [
      'backups and cache paths, as a count',
      { files: 1, exempted: { 'cache-roots': 213 } },
      'brokered-shell: turn T1 backed up 1 file (brokered-shell backups show T1); 213 paths in cache roots changed without a backup (a restore leaves them as they are)',
    ],
    ['cache paths only', { exempted: { 'cache-roots': 1 } }, 'brokered-shell: turn T1: 1 path in cache roots changed without a backup (a restore leaves them as they are)'],
    ["another plugin's exemption, by its name", { exempted: { 'build-output': 3 } }, 'brokered-shell: turn T1: 3 paths kept out by build-output changed without a backup (a restore leaves them as they are)'],
    ['nothing', {}, undefined],
    ['a turn that did not commit', { ok: false, files: 3, exempted: { 'cache-roots': 3 } }, undefined],
  ])('%s', (_what, extra, line) => {
    expect(turnSummaryLine(ended(extra))).toBe(line);
  });
});

describe('turnSummary: the same for a program', () => {
  it('counts, lists and the line without its prefix', () => {
    expect(turnSummary(ended({ files: 1, exempted: { 'cache-roots': 2 }, unsaved: ['/ws/big'], notices: ['a rebase stopped'] }))).toEqual({
      committed: true,
      turnId: 'T1',
      files: 1,
      exempted: { 'cache-roots': 2 },
      unsaved: ['/ws/big'],
      notices: ['a rebase stopped'],
      text: 'turn T1 backed up 1 file (brokered-shell backups show T1); 2 paths in cache roots changed without a backup (a restore leaves them as they are)',
    });
  });

  it('a turn that did not commit says why, and has no line', () => {
    expect(turnSummary({ ok: false, turnId: 'T2', files: 0, message: 'm', error: 'store full' })).toEqual({
      committed: false,
      turnId: 'T2',
      files: 0,
      exempted: {},
      unsaved: [],
      notices: [],
      text: null,
      error: 'store full',
    });
  });
});

describe('a denial outside the roots, as run prints it', () => {
  it('names the real home config file', () => {
    const reason = "/x is outside the writable roots; writableRoots, or cacheRoots.add for a tool's cache, in <home>/config.json would allow it";
    expect(withConfigFile(reason, '/h/config.json')).toBe("/x is outside the writable roots; writableRoots, or cacheRoots.add for a tool's cache, in /h/config.json would allow it");
  });

  it('names it for a folder kept out of the cache roots too', () => {
    expect(withConfigFile('/c/_npx/a is in /c/_npx, kept out of the cache roots (…); cacheRoots.add in <home>/config.json would let it in', '/h/config.json')).toBe(
      '/c/_npx/a is in /c/_npx, kept out of the cache roots (…); cacheRoots.add in /h/config.json would let it in',
    );
  });

  it('leaves any other reason as it is, even one that names <home>', () => {
    expect(withConfigFile('a rule says <home>/config.json', '/h/config.json')).toBe('a rule says <home>/config.json');
  });
});
