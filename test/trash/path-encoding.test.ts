import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ErrorCodes } from '../../src/core/errors.js';
import { decodeTrashPath, encodeTrashPath } from '../../src/trash/index.js';

describe('encodeTrashPath', () => {
  it.each([
    ['/home/u/plain.txt', '/home/u/plain.txt'],
    ['/a b/c d.txt', '/a%20b/c%20d.txt'],
    ['/100%/x', '/100%25/x'],
    ['/café', '/caf%C3%A9'],
    ['/日本/語.md', '/%E6%97%A5%E6%9C%AC/%E8%AA%9E.md'],
    ['/a+b=c&d#e?f;g', '/a%2Bb%3Dc%26d%23e%3Ff%3Bg'],
    ["/keep-_.!~*'()", "/keep-_.!~*'()"],
    ['/line\nbreak\ttab', '/line%0Abreak%09tab'],
    ['relative/dir/file', 'relative/dir/file'],
    ['/emoji-😀', '/emoji-%F0%9F%98%80'],
  ])('%j → %s', (input, expected) => {
    expect(encodeTrashPath(input)).toBe(expected);
    expect(decodeTrashPath(expected)).toBe(input);
  });

  it('refuses a NUL byte and a lone surrogate', () => {
    expect(() => encodeTrashPath('/a\0b')).toThrow(expect.objectContaining({ code: ErrorCodes.BAD_REQUEST }));
    expect(() => encodeTrashPath('/a\uD800b')).toThrow(expect.objectContaining({ code: ErrorCodes.BAD_REQUEST }));
  });

  it('round-trips any well-formed path', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 40 }), (s) => {
        const path = `/${s.replaceAll('\0', '')}`;
        const encoded = encodeTrashPath(path);
        expect(encoded).toMatch(/^[A-Za-z0-9\-_.!~*'()/%]*$/);
        expect(decodeTrashPath(encoded)).toBe(path);
      }),
    );
  });
});

describe('decodeTrashPath', () => {
  it('accepts lower-case escapes and characters other writers leave literal', () => {
    expect(decodeTrashPath('/a%c3%a9%20b')).toBe('/aé b');
    expect(decodeTrashPath('/a:b@c,d$e')).toBe('/a:b@c,d$e');
    expect(decodeTrashPath('/raw é')).toBe('/raw é');
  });

  it('keeps + as a plus (URI escaping, not form encoding)', () => {
    expect(decodeTrashPath('/a+b')).toBe('/a+b');
  });

  it.each([['/bad%G1'], ['/trailing%2'], ['/not-utf8%FF'], ['/nul%00']])('refuses %s', (encoded) => {
    expect(() => decodeTrashPath(encoded)).toThrow(expect.objectContaining({ code: ErrorCodes.BAD_REQUEST }));
  });
});
