/** The page's text helpers: what a model wrote is shown as it is stored, never reordered or hidden. */
import { describe, expect, it } from 'vitest';

// The page's modules are JavaScript checked by their own tsconfig (src/ui/public); typed here by hand.
const FORMAT = '../../src/ui/public/format.js';
const { firstLine, visible } = (await import(FORMAT)) as { firstLine: (message: string) => string; visible: (text: string, oneLine?: boolean) => string };

describe('visible', () => {
  it('shows bidi overrides, escape sequences and tabs as escapes', () => {
    expect(visible('x/invoice\u202etxt.exe')).toBe('x/invoice\\u202etxt.exe');
    expect(visible('/etc/\u202edwssap')).toBe('/etc/\\u202edwssap');
    expect(visible('a\u001b[2Kb\tc \u2066d\u2069')).toBe('a\\x1b[2Kb\\tc \\u2066d\\u2069');
  });

  it('keeps newlines only when asked, and leaves other text alone', () => {
    expect(visible('new\nline')).toBe('new\\nline');
    expect(visible('one\ntwo é ✓', false)).toBe('one\ntwo é ✓');
  });
});

describe('firstLine', () => {
  it('is visible text too', () => {
    expect(firstLine('\u202egnp.exe\nmore')).toBe('\\u202egnp.exe …');
  });
});
