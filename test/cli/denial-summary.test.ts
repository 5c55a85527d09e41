import { describe, expect, it } from 'vitest';
import { DenialSummary, LISTED_DENIALS } from '../../src/cli/denial-summary.js';

describe('DenialSummary', () => {
  it('lists each refused path once, in order', () => {
    const summary = new DenialSummary();
    summary.add('write', '/ws/a', 'protected');
    summary.add('write', '/ws/a', 'protected');
    summary.add('delete', '/ws/b', 'outside the workspace');
    expect(summary.lines()).toEqual(['brokered-shell: denied write /ws/a: protected', 'brokered-shell: denied delete /ws/b: outside the workspace']);
  });

  it('past the limit, still names the first refusal of each kind not listed yet, and counts the rest', () => {
    const summary = new DenialSummary();
    for (let i = 0; i < LISTED_DENIALS + 5; i++) summary.add('write', `/store/f${i}`, 'the store');
    summary.add('delete', '/store', 'the store');
    summary.add('delete', '/store/again', 'the store');
    const lines = summary.lines();
    expect(lines).toHaveLength(LISTED_DENIALS + 2);
    expect(lines.filter((line) => line.startsWith('brokered-shell: denied write '))).toHaveLength(LISTED_DENIALS);
    expect(lines).toContain('brokered-shell: denied delete /store: the store');
    expect(lines.at(-1)).toBe('brokered-shell: … and 6 more refused requests (each is in the audit log)');
  });

  it('shows control characters in a path or reason escaped, one line per refusal', () => {
    const summary = new DenialSummary();
    summary.add('write', '/ws/a\nbrokered-shell: approved', 'why\u001b[2J');
    expect(summary.lines()).toEqual(['brokered-shell: denied write /ws/a\\nbrokered-shell: approved: why\\x1b[2J']);
  });

  it('says nothing when nothing was refused', () => {
    expect(new DenialSummary().lines()).toEqual([]);
  });
});
