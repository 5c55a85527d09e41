import path from 'node:path';
import fc from 'fast-check';
import { BrokerError } from '../../../src/core/index.js';
import { formsOf, isWithin } from '../../../src/plugins/file-safety/index.js';
import { expandHome, lexicalPath, normaliseForRuleMatch } from '../../../src/plugins/path-resolution/index.js';

/**
 * The pure path forms of src/plugins/path-resolution: the lexical form every request
 * path gets (resolve.ts lexicalPath) and the rule-matching form (rule-form.ts), as
 * file-safety then uses it (formsOf). Roots are directories; the directory oracle here
 * says which, so no file system is needed.
 */
const piece = fc.constantFrom('', '.', '..', 'a', 'b', 'ws', 'home', 'alice', 'alice2', '~', '\\', '\\..', '.!1!', '.!12!.!3!', 'é', ' ', '\0');
const anyText = fc.oneof(fc.string({ unit: 'grapheme', maxLength: 40 }), fc.array(piece, { maxLength: 10 }).map((p) => p.join('')));
/** Absolute paths built from components that collide with the roots below. */
const component = fc.array(piece, { maxLength: 3 }).map((p) => p.join(''));
const rawAbsolute = fc.array(component, { maxLength: 6 }).map((parts) => `/${parts.join('/')}`);
/** What rule forms are made from: resolved paths, i.e. lexical ones. */
const resolvedPath = rawAbsolute.map((p) => lexicalPath(p));
const home = fc.constantFrom('/home/alice', '/home/alice/', '/ws', '/', '/home');
/** Directories: the roots and everything above them (a root is always a directory). */
const roots = ['/', '/home', '/home/alice', '/ws', '/ws/a', '/home/alice/ws'];
const isDirectory = (p: string) => roots.includes(p);

/** Reference lexical normaliser: a component stack, `..` at the root stays at the root. */
function refLexical(p: string): string {
  const stack: string[] = [];
  for (const part of p.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') stack.pop();
    else stack.push(part);
  }
  return `/${stack.join('/')}`;
}

export const properties = {
  'lexicalPath: any string is refused with a BrokerError or normalised like a component stack': () =>
    fc.property(fc.oneof(anyText, rawAbsolute), (p) => {
      let out: string;
      try {
        out = lexicalPath(p);
      } catch (error) {
        if (!(error instanceof BrokerError) || p.startsWith('/')) throw error;
        return;
      }
      if (out !== refLexical(p)) throw new Error(`${JSON.stringify(p)} → ${out}, want ${refLexical(p)}`);
      if (lexicalPath(out) !== out) throw new Error('not idempotent');
      if (out !== '/' && (out.endsWith('/') || out.includes('//') || out.split('/').some((c) => c === '.' || c === '..'))) throw new Error(`not lexical: ${out}`);
    }),

  'lexicalPath: a path is inside a root exactly when its components, read in order, end inside it': () =>
    fc.property(rawAbsolute, fc.constantFrom(...roots), (p, root) => {
      if (isWithin(lexicalPath(p), root) !== isWithin(refLexical(p), root)) throw new Error(`${p} vs root ${root}`);
      // `/ws2` is never inside `/ws`.
      if (isWithin(lexicalPath(p), root) && root !== '/' && !(lexicalPath(p) === root || lexicalPath(p).startsWith(`${root}/`))) throw new Error('prefix');
    }),

  'rule form: idempotent for any input and home': () =>
    fc.property(fc.oneof(anyText, rawAbsolute), home, (p, h) => {
      const once = normaliseForRuleMatch(p, { home: h, isDirectory });
      const twice = normaliseForRuleMatch(once, { home: h, isDirectory });
      if (once !== twice) throw new Error(`${JSON.stringify(p)} → ${once} → ${twice}`);
    }),

  'rule form: names the same directory, and never a `.`/`..` or a directory the path is not': () =>
    fc.property(resolvedPath, home, (p, h) => {
      const form = normaliseForRuleMatch(p, { home: h, isDirectory });
      const [expanded] = [expandHome(form, h.length > 1 ? h.replace(/\/+$/, '') : h)];
      if (p.includes('\\')) return; // backslash names: see the next property (only restrictive rules see them)
      if (path.posix.dirname(expanded) !== path.posix.dirname(p)) throw new Error(`${p} → ${form}: another directory`);
      const name = path.posix.basename(expanded);
      if (expanded !== p && (name === '.' || name === '..' || isDirectory(expanded))) throw new Error(`${p} → ${form}`);
    }),

  'rule form as policy sees it: a form permissive rules match is never inside a root the path is outside': () =>
    fc.property(resolvedPath, home, fc.constantFrom(...roots), (p, h, root) => {
      const homes = [h.length > 1 ? h.replace(/\/+$/, '') : h];
      const ruleForm = normaliseForRuleMatch(p, { home: h, isDirectory });
      const forms = formsOf({ access: 'write', lexical: p, resolved: p, ruleForm }, homes);
      for (const form of forms.touched) {
        // A root is a directory: being inside it by a form means the path itself is.
        if (isWithin(refLexical(form), root) && !isWithin(p, root)) throw new Error(`${p} (rule form ${ruleForm}) borrows root ${root} via ${form}`);
        if (form !== p && refLexical(form) !== form) throw new Error(`a non-lexical touched form ${form}`);
      }
      // Restrictive rules always see the real path.
      if (!forms.all.includes(p)) throw new Error('the resolved path is missing from the restrictive forms');
    }),
} satisfies Record<string, () => fc.IRawProperty<unknown[]>>;
