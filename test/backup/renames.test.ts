/**
 * Where paths are in a turn that renamed directories whole (src/backup/renames.ts): the
 * name before the turn of what stands somewhere now, where an entry's file is now, and
 * which rename records still go back whole.
 */
import { describe, expect, it } from 'vitest';
import type { RenamedEntry } from '../../src/backup/manifest-schema.js';
import { liveRenames, pathAfterRenames, pathBeforeRenames } from '../../src/backup/renames.js';

const rename = (from: string, to: string, expanded = false): RenamedEntry =>
  ({ path: from, to, kind: 'renamed', tree: [], ...(expanded ? { expanded: true } : {}) }) as unknown as RenamedEntry;

describe('paths through renames', () => {
  const renames = [rename('/w/a', '/w/b'), rename('/w/b', '/w/c'), rename('/w/x', '/w/c/x')];

  it.each([
    ['/w/c/f', '/w/a/f'],
    ['/w/c', '/w/a'],
    ['/w/c/x/g', '/w/x/g'],
    ['/w/other', '/w/other'],
    ['/w/ab', '/w/ab'],
  ])('%s was %s before the turn', (now, before) => {
    expect(pathBeforeRenames(now, renames)).toBe(before);
  });

  it.each(['/w/a', '/w/a/new', '/w/b/f', '/w/x'])('%s lies where a rename left a name empty: nothing there has a name from before', (now) => {
    expect(pathBeforeRenames(now, renames)).toBeUndefined();
  });

  it('an entry\'s file is wherever the renames took it, both ways round', () => {
    expect(pathAfterRenames('/w/a/f', renames)).toBe('/w/c/f');
    expect(pathAfterRenames('/w/x/g', renames)).toBe('/w/c/x/g');
    for (const now of ['/w/c/f', '/w/c/x/g', '/w/c']) expect(pathAfterRenames(pathBeforeRenames(now, renames) ?? '', renames)).toBe(now);
  });

  it('an expanded line takes back the rename it marks, not a later one of the same names', () => {
    const first = rename('/w/a', '/w/b');
    const later = rename('/w/a', '/w/b');
    expect(liveRenames([first, rename('/w/a', '/w/b', true), later])).toEqual([later]);
    expect(liveRenames([first, later])).toEqual([first, later]);
  });
});
