import { describe, expect, it } from 'vitest';
import { firstLine, printable } from '../../src/core/printable.js';

describe('printable', () => {
  it('shows control characters as escapes and keeps the rest', () => {
    expect(printable('a\tb\nc\u001b[2J\u0007 é ✓')).toBe('a\\tb\\nc\\x1b[2J\\x07 é ✓');
  });

  it('shows bidi overrides and isolates as escapes, so a name reads in the order it is stored', () => {
    expect(printable('invoice\u202etxt.exe')).toBe('invoice\\u202etxt.exe');
    expect(printable('\u2066a\u2069 \u200f\u061c')).toBe('\\u2066a\\u2069 \\u200f\\u061c');
  });
});

describe('firstLine', () => {
  it('marks a message that goes on past its first line', () => {
    expect(firstLine('one\ntwo')).toBe('one …');
    expect(firstLine('one\n\n')).toBe('one');
    expect(firstLine(null)).toBe('');
  });
});
