import { badRequest } from './fs-failure.js';

/**
 * Percent-encoding of `Path=` values (trash spec 1.0: "escaped as in URLs, RFC 2396").
 * The path is taken as UTF-8 bytes; only RFC 2396 "unreserved" bytes and `/` stay
 * literal, everything else becomes `%XX`. Decoding accepts any `%XX`, so files written
 * by GLib or KDE (which keep a few more characters literal) read back correctly.
 */

const UNRESERVED_MARKS = "-_.!~*'()";

const KEEP: readonly boolean[] = Array.from({ length: 128 }, (_, byte) => {
  const ch = String.fromCharCode(byte);
  return /[A-Za-z0-9]/.test(ch) || UNRESERVED_MARKS.includes(ch) || ch === '/';
});

// A lone UTF-16 surrogate cannot be written as UTF-8; encoding it would silently
// record a different name (U+FFFD), so it is refused instead.
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

export function encodeTrashPath(path: string): string {
  if (path.includes('\0')) throw badRequest('a trash path cannot contain a NUL byte');
  if (LONE_SURROGATE.test(path)) {
    throw badRequest('a trash path must be valid Unicode (it contains a lone surrogate)');
  }
  let out = '';
  for (const byte of Buffer.from(path, 'utf8')) {
    out += byte < 128 && KEEP[byte] === true ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

export function decodeTrashPath(encoded: string): string {
  const bytes: number[] = [];
  for (let i = 0; i < encoded.length; ) {
    const ch = encoded[i];
    if (ch === '%') {
      const hex = encoded.slice(i + 1, i + 3);
      if (!/^[0-9A-Fa-f]{2}$/.test(hex)) {
        throw badRequest(`bad percent-escape at offset ${i} in trash path`, { encoded });
      }
      bytes.push(Number.parseInt(hex, 16));
      i += 3;
      continue;
    }
    // Tolerate raw (unescaped) characters, non-ASCII included, as other writers may leave them.
    const codePoint = encoded.codePointAt(i) ?? 0;
    const char = String.fromCodePoint(codePoint);
    bytes.push(...Buffer.from(char, 'utf8'));
    i += char.length;
  }
  let decoded: string;
  try {
    decoded = utf8.decode(Uint8Array.from(bytes));
  } catch (cause) {
    // Node paths are strings; a non-UTF-8 name would be restored under a different name.
    throw badRequest('trash path is not valid UTF-8 once decoded', { encoded, cause: String(cause) });
  }
  if (decoded.includes('\0')) throw badRequest('decoded trash path contains a NUL byte', { encoded });
  return decoded;
}
