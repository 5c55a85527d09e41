/*
 * A git config file read the way git's own reader (config.c) reads it, with no git run:
 * running git would mean trusting whichever `git` the broker's PATH finds (PATH may name
 * folders the command writes), and git reads the config of the repository it starts in
 * even for `git config --file`, failing on a broken one. Reading here is synchronous and
 * takes microseconds, so a repository first met in the middle of a turn is read on the
 * spot. The grammar is small; anything outside it is an error, and the caller treats an
 * error as "what git runs here is unknown" (it asks), never as an empty file. A test
 * compares the entries with `git config --list` on random files.
 */

export interface GitConfigEntry {
  /** `section.key` or `section.subsection.key`: section and key lower-cased (git's), the subsection as written. */
  readonly key: string;
  /** The value as git takes it; null for a key given without `=` (a true boolean). */
  readonly value: string | null;
  readonly line: number;
}

export type ParsedGitConfig = { readonly entries: GitConfigEntry[] } | { readonly error: string };

/** Whitespace as git's `isspace` has it. */
const isSpace = (c: string) => c === ' ' || c === '\t' || c === '\n' || c === '\r';
const isAlpha = (c: string) => (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
const isKeyChar = (c: string) => isAlpha(c) || (c >= '0' && c <= '9') || c === '-';
const UTF8_BOM = '\xef\xbb\xbf';

/**
 * Parse a config file's bytes. Text is taken byte for byte (latin1), as git does, and
 * each value given back as UTF-8, as paths are.
 */
export function parseGitConfig(bytes: Buffer): ParsedGitConfig {
  const text = bytes.toString('latin1');
  if (text.includes('\0')) return { error: 'it holds a NUL byte' };
  let at = text.startsWith(UTF8_BOM) ? UTF8_BOM.length : 0;
  let line = 1;
  let eof = false;
  /** The next character, `\r\n` as `\n`; `\n` at the end, which is then noted. */
  const next = (): string => {
    if (at >= text.length) {
      eof = true;
      return '\n';
    }
    let c = text[at++] as string;
    if (c === '\r' && text[at] === '\n') c = text[at++] as string;
    if (c === '\n') line += 1;
    return c;
  };
  const entries: GitConfigEntry[] = [];
  const fail = (why: string): ParsedGitConfig => ({ error: `line ${line}: ${why}` });
  let section: string | undefined;
  let comment = false;
  for (;;) {
    const c = next();
    if (c === '\n') {
      if (eof) return { entries };
      comment = false;
      continue;
    }
    if (comment || isSpace(c)) continue;
    if (c === '#' || c === ';') {
      comment = true;
      continue;
    }
    if (c === '[') {
      section = sectionName();
      if (section === undefined) return fail('a section header git does not read');
      continue;
    }
    if (!isAlpha(c)) return fail(`${JSON.stringify(c)} where a key or section should start`);
    const entryLine = line;
    let name = c.toLowerCase();
    let d = next();
    for (; !eof && isKeyChar(d); d = next()) name += d.toLowerCase();
    while (d === ' ' || d === '\t') d = next();
    let value: string | null = null;
    if (d !== '\n') {
      if (d !== '=') return fail(`the key ${name} is followed by ${JSON.stringify(d)}, not =`);
      const parsed = parseValue();
      if (parsed === undefined) return fail(`the value of ${name} is not one git reads (an open quote or an unknown escape)`);
      value = Buffer.from(parsed, 'latin1').toString('utf8');
    }
    // Git takes a key before any section too, by its name alone.
    entries.push({ key: section === undefined ? name : `${section}.${name}`, value, line: entryLine });
    // A key ending at the end of the file ends the file too.
    if (eof) return { entries };
  }

  /** After `[`: `name]`, `name "sub"]` or the older `name.sub]`; undefined when git would refuse it. */
  function sectionName(): string | undefined {
    let name = '';
    for (;;) {
      const c = next();
      if (eof) return undefined;
      if (c === ']') return name === '' ? undefined : name;
      if (isSpace(c)) return extended(name, c);
      if (!isKeyChar(c) && c !== '.') return undefined;
      name += c.toLowerCase();
    }
  }

  /** `name "sub"]`: the subsection keeps its case; `\` takes the next character as it is. */
  function extended(name: string, after: string): string | undefined {
    let c = after;
    do {
      if (c === '\n') return undefined;
      c = next();
    } while (isSpace(c));
    if (c !== '"') return undefined;
    let sub = '';
    for (;;) {
      c = next();
      if (c === '\n') return undefined;
      if (c === '"') break;
      if (c === '\\') {
        c = next();
        if (c === '\n') return undefined;
      }
      sub += c;
    }
    if (next() !== ']') return undefined;
    return `${name}.${Buffer.from(sub, 'latin1').toString('utf8')}`;
  }

  /** After `=`: whitespace trimmed at both ends (inner runs kept, one space per character), quotes, escapes, comments, `\` continuing a line. */
  function parseValue(): string | undefined {
    let value = '';
    let quoted = false;
    let inComment = false;
    let spaces = 0;
    for (;;) {
      let c = next();
      if (c === '\n') return quoted ? undefined : value;
      if (inComment) continue;
      if (isSpace(c) && !quoted) {
        if (value !== '') spaces += 1;
        continue;
      }
      if (!quoted && (c === ';' || c === '#')) {
        inComment = true;
        continue;
      }
      value += ' '.repeat(spaces);
      spaces = 0;
      if (c === '\\') {
        c = next();
        if (c === '\n') {
          // At the very end this is no continuation: the value ends there.
          if (eof) return quoted ? undefined : value;
          continue;
        }
        const escaped = ESCAPES.get(c);
        if (escaped === undefined) return undefined;
        value += escaped;
        continue;
      }
      if (c === '"') {
        quoted = !quoted;
        continue;
      }
      value += c;
    }
  }
}

const ESCAPES: ReadonlyMap<string, string> = new Map([
  ['t', '\t'],
  ['b', '\b'],
  ['n', '\n'],
  ['\\', '\\'],
  ['"', '"'],
]);
