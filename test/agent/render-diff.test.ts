/**
 * How file content appears in a diff: escaped where a terminal or the viewer shows it
 * (a model-written file cannot forge what the diff looks like), exact bytes for a pipe.
 */
import { describe, expect, it } from 'vitest';
import { MAX_EDIT_LENGTH, escapeContent, renderDiff, renderDiffBytes } from '../../src/agent/render-diff.js';

describe('escapeContent', () => {
  it('keeps valid UTF-8 text, tabs and newlines as they are', () => {
    expect(escapeContent(Buffer.from('café\tnaïve ✓ 𝄞\nnext\n'))).toBe('café\tnaïve ✓ 𝄞\nnext\n');
  });

  it('escapes what a terminal would act on: escape sequences, carriage returns, C1 controls', () => {
    expect(escapeContent(Buffer.from('ok\u001b[1A\u001b[2Kforged\r\n\u0007\u009b'))).toBe('ok\\x1b[1A\\x1b[2Kforged\\r\n\\x07\\x9b');
  });

  it('escapes the bidirectional overrides and isolates that would show a line reordered', () => {
    expect(escapeContent(Buffer.from('if (admin) {\u202e } \u2066// x\u2069 \u200f\n'))).toBe('if (admin) {\\u202e } \\u2066// x\\u2069 \\u200f\n');
  });

  it('shows each byte that is not UTF-8 as \\xNN and decodes the valid text around it', () => {
    const latin1 = Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x20, 0xc3, 0xa9, 0x0a]);
    expect(escapeContent(latin1)).toBe('caf\\xe9 é\n');
    // An overlong form, a lone continuation byte, a surrogate and a truncated sequence are all refused byte by byte.
    expect(escapeContent(Buffer.from([0xc0, 0xaf, 0x80, 0xed, 0xa0, 0x80, 0xe2, 0x82]))).toBe('\\xc0\\xaf\\x80\\xed\\xa0\\x80\\xe2\\x82');
  });
});

describe('a rewrite too large to diff', () => {
  it('says so instead of diffing for minutes, in both forms', () => {
    const lines = (prefix: string) => Buffer.from(Array.from({ length: 20_000 }, (_, i) => `${prefix}${i}\n`).join(''));
    const verdict = `/w/f: over ${MAX_EDIT_LENGTH} lines changed, too many to diff line by line (20000 lines in the backup, 20000 now)`;
    expect(renderDiff('/w/f', lines('a'), lines('b'), { color: false })).toBe(verdict);
    expect(renderDiffBytes('/w/f', lines('a'), lines('b'), {}).toString()).toBe(verdict);
    // A long file with a few changed lines is still diffed.
    const edited = Buffer.from(lines('a').toString().replace('a100\n', 'changed\n'));
    expect(renderDiff('/w/f', lines('a'), edited, { color: false })).toContain('-a100\n+changed');
  });
});

describe('renderDiff and renderDiffBytes', () => {
  const before = Buffer.from([...Buffer.from('caf'), 0xe9, ...Buffer.from(' one\r\nsame\n')]);
  const now = Buffer.from([...Buffer.from('caf'), 0xe9, ...Buffer.from(' two\r\nsame\n\u001b[2Kend\r\n')]);

  it('escaped: the lines say what the bytes are', () => {
    const text = renderDiff('/w/f', before, now, { color: false });
    expect(text.split('\n')).toEqual(['--- /w/f (backup)', '+++ /w/f (now)', '@@ -1,2 +1,3 @@', '-caf\\xe9 one\\r', '+caf\\xe9 two\\r', ' same', '+\\x1b[2Kend\\r']);
  });

  it('raw: every byte of both files is in the patch, the names as the escaped diff has them, the last line keeps its \\r', () => {
    const bytes = renderDiffBytes('/w/ü', before, now, {});
    const lines = [
      // A name that is not ASCII is quoted git-style by the diff library, in both forms.
      Buffer.from('--- "/w/\\303\\274 (backup)"\n+++ "/w/\\303\\274 (now)"\n@@ -1,2 +1,3 @@\n-caf'),
      Buffer.from([0xe9]),
      Buffer.from(' one\r\n+caf'),
      Buffer.from([0xe9]),
      Buffer.from(' two\r\n same\n+\u001b[2Kend\r'),
    ];
    expect(bytes.equals(Buffer.concat(lines))).toBe(true);
    expect(bytes.subarray(0, bytes.indexOf('@@')).toString()).toBe(renderDiff('/w/ü', before, now, { color: false }).split('@@')[0]);
  });
});
