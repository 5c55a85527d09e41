import { closeSync, constants, mkdirSync, mkdtempSync, openSync, readlinkSync, realpathSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { BrokerError } from '../../../src/core/index.js';
import { isWithin } from '../../../src/plugins/file-safety/index.js';
import { resolveWith, type ResolveStrategy } from '../../../src/plugins/path-resolution/index.js';
import { native } from '../../../src/native/loader.js';
import { describeStats } from '../../../src/plugins/path-resolution/resolve.js';
import { walkByComponents, walkPlain } from '../../../src/plugins/path-resolution/walk.js';

/**
 * The resolving walk of src/plugins/path-resolution (resolve.ts, walk.ts) on real,
 * random trees of files, directories and symlinks (relative, absolute, dangling, loops,
 * out of the workspace). Every strategy answers any path with a path or a BrokerError;
 * where the kernel itself can say where a path leads (open + /proc/self/fd), the walk
 * says the same, so a path the kernel resolves outside the workspace is never judged
 * inside it, and a path that resolves is a fixed point of its own resolution.
 */
/** Made on first use: the test file imports this module too, only for the names. */
let parentDir: string | undefined;
/** Called by the worker once every property has run. */
export const cleanup = () => parentDir && rmSync(parentDir, { recursive: true, force: true });

const names = ['a', 'b', 'l1', 'l2'] as const;
const dirs = ['ws', 'ws/d', 'out'] as const;
type Entry = { at: string; kind: 'file' | 'dir' | 'link'; target: string };
const linkTarget = fc.constantFrom('a', 'b', 'l1', 'l2', 'd', '../out', '../out/a', '..', '.', 'missing', 'd/../a', '../ws/l1', '/', '@/out', '@/ws/d', '@/ws/l2', 'a/', 'a/.');
const entry: fc.Arbitrary<Entry> = fc.record({
  at: fc.tuple(fc.constantFrom(...dirs), fc.constantFrom(...names)).map(([d, n]) => `${d}/${n}`),
  kind: fc.constantFrom('file', 'dir', 'link', 'link'),
  target: linkTarget,
});
const component = fc.constantFrom('ws', 'out', 'd', 'a', 'b', 'l1', 'l2', '.', '..', 'missing', '');
const request = fc.tuple(fc.array(component, { minLength: 1, maxLength: 6 }), fc.boolean());

let counter = 0;
/** A fresh tree: `<base>/ws/d`, `<base>/out`, then the entries (first one at a name wins). */
function makeTree(entries: Entry[]): string {
  parentDir ??= realpathSync(mkdtempSync(path.join(os.tmpdir(), 'bsh-fuzz-walk-')));
  const base = path.join(parentDir, String(++counter));
  for (const d of dirs) mkdirSync(path.join(base, d), { recursive: true });
  const taken = new Set<string>();
  for (const e of entries) {
    if (taken.has(e.at)) continue;
    taken.add(e.at);
    const full = path.join(base, e.at);
    if (e.kind === 'file') writeFileSync(full, e.at);
    else if (e.kind === 'dir') mkdirSync(full);
    else symlinkSync(e.target.replace(/^@/, base), full);
  }
  return base;
}

/** Where the kernel says the path leads (following every link), or its errno. */
function kernelReal(p: string): { path: string } | { errno: string } {
  let fd: number;
  try {
    fd = openSync(p, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (error) {
    return { errno: (error as NodeJS.ErrnoException).code ?? 'E?' };
  }
  try {
    return { path: readlinkSync(`/proc/self/fd/${fd}`) };
  } finally {
    closeSync(fd);
  }
}

/** Where an O_CREAT open lands (through a dangling final link too), or its errno; undone after. */
function kernelCreate(p: string): { path: string } | { errno: string } {
  const existing = kernelReal(p);
  if ('path' in existing || existing.errno !== 'ENOENT') return existing;
  let fd: number;
  try {
    fd = openSync(p, constants.O_WRONLY | constants.O_CREAT | constants.O_NONBLOCK, 0o600);
  } catch (error) {
    return { errno: (error as NodeJS.ErrnoException).code ?? 'E?' };
  }
  const where = readlinkSync(`/proc/self/fd/${fd}`);
  closeSync(fd);
  unlinkSync(where);
  return { path: where };
}

function walkResult(strategy: ResolveStrategy, p: string): Promise<{ path: string } | { error: BrokerError }> {
  return resolveWith(strategy, p).then(
    (resolved) => ({ path: resolved }),
    (error: unknown) => {
      if (!(error instanceof BrokerError)) throw error;
      return { error };
    },
  );
}

/** Lexical, absolute, and where the kernel says (when the kernel can tell). */
function agree(p: string, got: { path: string } | { error: BrokerError }, want: { path: string } | { errno: string }, base: string): void {
  const ws = path.join(base, 'ws');
  if ('path' in got) {
    const out = got.path;
    if (!out.startsWith('/') || (out !== '/' && (out.endsWith('/') || out.includes('//') || /\/\.\.?(\/|$)/.test(out)))) throw new Error(`${p} → ${out}: not lexical`);
  }
  if ('path' in want !== 'path' in got) {
    throw new Error(`${p}: walk ${'path' in got ? got.path : got.error.message}, kernel ${'path' in want ? want.path : want.errno}`);
  }
  if ('path' in want && 'path' in got) {
    if (got.path !== want.path) throw new Error(`${p}: walk ${got.path}, kernel ${want.path}`);
    if (isWithin(got.path, ws) !== isWithin(want.path, ws)) throw new Error('inside/outside differ');
  }
}

/** A trailing slash or a final `.`/`..` asks for a directory; the walk's forms differ there by design. */
const plainFinal = (parts: string[]) => !['', '.', '..'].includes(parts[parts.length - 1] as string);

export const properties = {
  'existing: where the kernel resolves, or an error where the kernel fails': () =>
    fc.asyncProperty(fc.array(entry, { maxLength: 8 }), request, async (entries, [parts, fromWs]) => {
      const base = makeTree(entries);
      const p = `${fromWs ? `${base}/ws` : base}/${parts.join('/')}`;
      const got = await walkResult('existing', p);
      if (plainFinal(parts)) agree(p, got, kernelReal(p), base);
      if ('path' in got) {
        const again = await walkResult('existing', got.path);
        if (!('path' in again) || again.path !== got.path) throw new Error(`${p} → ${got.path} is not a fixed point`);
      }
    }),

  'existing-or-creatable: where an O_CREAT open lands, or an error where it fails': () =>
    fc.asyncProperty(fc.array(entry, { maxLength: 8 }), request, async (entries, [parts, fromWs]) => {
      const base = makeTree(entries);
      const p = `${fromWs ? `${base}/ws` : base}/${parts.join('/')}`;
      const got = await walkResult('existing-or-creatable', p);
      if (!plainFinal(parts)) return;
      const want = kernelCreate(p);
      if ('errno' in want && want.errno === 'EISDIR') {
        // An existing directory: the kernel's write open fails, the walk names it.
        const existing = kernelReal(p);
        if ('path' in existing) return agree(p, got, existing, base);
        // Known deviation (bench/fuzz/README.md): a dangling link whose text ends in `/`
        // ("must be a directory"): the kernel refuses to create a file through it, the
        // walk names where it leads. Never anywhere the link does not point: inside the tree.
        if ('path' in got && !isWithin(got.path, base)) throw new Error(`${p} → ${got.path}: outside the tree`);
        return;
      }
      agree(p, got, want, base);
    }),

  'through-parent: the parent as the kernel resolves it, plus the name as given': () =>
    fc.asyncProperty(fc.array(entry, { maxLength: 8 }), request, async (entries, [parts, fromWs]) => {
      const base = makeTree(entries);
      const p = `${fromWs ? `${base}/ws` : base}/${parts.join('/')}`;
      const got = await walkResult('through-parent', p);
      if (!plainFinal(parts)) return;
      // `/.` so the kernel too insists on a directory.
      const parent = kernelReal(`${path.posix.dirname(p)}/.`);
      const name = path.posix.basename(p);
      const want = 'path' in parent ? { path: parent.path === '/' ? `/${name}` : `${parent.path}/${name}` } : parent;
      agree(p, got, want, base);
    }),

  'nearest-ancestor and any strategy on any string: a lexical path or a BrokerError': () =>
    fc.asyncProperty(
      fc.array(entry, { maxLength: 6 }),
      fc.constantFrom<ResolveStrategy>('existing', 'through-parent', 'existing-or-creatable', 'nearest-ancestor'),
      fc.oneof(request.map(([parts]) => parts.join('/')), fc.string({ maxLength: 30 })),
      async (entries, strategy, tail) => {
        const base = makeTree(entries);
        for (const p of [`${base}/ws/${tail}`, tail]) {
          const got = await walkResult(strategy, p);
          if ('path' in got && (!got.path.startsWith('/') || (got.path !== '/' && got.path.endsWith('/')) || got.path.includes('//'))) {
            throw new Error(`${strategy} ${p} → ${got.path}`);
          }
        }
      },
    ),

  "the addon's shortcut: where it answers, the walk by components gives the same": () =>
    fc.asyncProperty(fc.array(entry, { maxLength: 8 }), request, fc.boolean(), async (entries, [parts, fromWs], allowMissingFinal) => {
      const base = makeTree(entries);
      const p = `${fromWs ? `${base}/ws` : base}/${parts.join('/')}`;
      // The walk kernels without openat2 get (an lstat per component) answers as the openat2 one does.
      const addon = native();
      if (addon.walkPlainByLstat(p, allowMissingFinal) !== addon.walkPlain(p, allowMissingFinal)) throw new Error(`${p}: the two addon walks differ`);
      const fast = walkPlain(p, allowMissingFinal);
      if (!fast) return;
      const slow = walkByComponents(p, { followFinal: true, allowMissingFinal });
      const [a, b] = [fast, slow].map((r) => JSON.stringify({ path: r.path, ...describeStats(r.stats) }));
      if (a !== b) throw new Error(`${p}: addon ${a}, by components ${b}`);
    }),
} satisfies Record<string, () => fc.IAsyncPropertyWithHooks<unknown[]>>;
