#!/usr/bin/env node
// Bundles the compiled CLI (dist/cli/main.js and everything it imports, zod included) into
// one CommonJS file that bin/brokered-shell.js compiles with a V8 code cache: loading 200+
// ESM files costs ~0.3 s of CPU per command, the bundle a fraction of that (bench/PROFILE.md).
// Run it after every `tsc -p tsconfig.build.json` (npm run build / test / prepare do); when
// it is not, the bin sees the changed stamps (toolchain/bundle-stamps.mjs) and loads dist/.
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { BUNDLE, MANIFEST, STAMP_FILES, fingerprint } from './bundle-stamps.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
// dist/bundle/ is two levels below the root like dist/ui/assets.js and dist/native/loader.js,
// so the `import.meta.url`-relative paths in src/ (../../src/ui/public, the package root
// walk, createRequire) resolve as they do unbundled.
const outDir = path.join(root, path.dirname(BUNDLE));

// `import.meta.url` becomes the bundle's own URL. pino starts its pretty transport in a
// worker from files next to its own modules, which are gone once bundled: point it (lazily:
// only pretty output pays for the lookup) at the installed ones.
const banner = `const __importMetaUrl = require('node:url').pathToFileURL(__filename).href;
if (!Object.prototype.hasOwnProperty.call(globalThis, '__bundlerPathsOverrides')) {
  globalThis.__bundlerPathsOverrides = {
    get 'thread-stream-worker'() { return require.resolve('thread-stream/lib/worker.js'); },
    get 'pino-worker'() { return require.resolve('pino/lib/worker.js'); },
  };
}`;

function fingerprints(dir, into = new Map()) {
  for (const entry of readdirSync(path.join(root, dir), { withFileTypes: true })) {
    const file = `${dir}/${entry.name}`;
    if (entry.isDirectory()) fingerprints(file, into);
    else if (file.endsWith('.js')) into.set(file, fingerprint(root, file));
  }
  return into;
}

// No manifest, no bundle the bin trusts: a failed build leaves the bin on dist/.
rmSync(path.join(root, MANIFEST), { force: true });
mkdirSync(outDir, { recursive: true });
const stamps = Object.fromEntries(STAMP_FILES.map((file) => [file, fingerprint(root, file)]));
const before = fingerprints('dist');
const result = await build({
  entryPoints: [path.join(root, 'dist', 'cli', 'main.js')],
  absWorkingDir: root,
  outfile: path.join(root, BUNDLE),
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: 'node20',
  // Native addons are loaded at run time from build/; pino-pretty runs in pino's worker.
  // The MCP SDK (a third of the bundle's size) is required from node_modules by `mcp`
  // alone: every other command would read it at each start for nothing.
  external: ['pino-pretty', '*.node', '@modelcontextprotocol/sdk', '@modelcontextprotocol/sdk/*'],
  define: { 'import.meta.url': '__importMetaUrl' },
  banner: { js: banner },
  // Comments and whitespace out (identifiers kept, for readable stacks; the source map maps
  // back to dist/): a smaller file to read and hash, and an ASCII one, which the bin reads
  // as latin1, skipping UTF-8 decoding. esbuild escapes non-ASCII characters in strings.
  minifyWhitespace: true,
  minifySyntax: true,
  sourcemap: 'linked',
  metafile: true,
  logLevel: 'warning',
  write: false,
});

// A tsc rewriting dist/ while esbuild read it would leave a mixed bundle whose stamps look
// current: every input from dist/ must be as it was before the build.
const inputs = Object.keys(result.metafile.inputs);
const moved = inputs.filter((file) => before.has(file) && String(before.get(file)) !== String(fingerprint(root, file)));
const restamped = STAMP_FILES.filter((file) => String(stamps[file]) !== String(fingerprint(root, file)));
if (moved.length > 0 || restamped.length > 0) {
  console.error(`bundle-cli: ${[...moved, ...restamped].join(', ')} changed during the build; run it again`);
  process.exit(1);
}

// Replaced by rename: a CLI starting meanwhile reads the old file or the new one, never half.
function replace(file, contents) {
  const temp = `${file}.${process.pid}.tmp`;
  writeFileSync(temp, contents);
  renameSync(temp, file);
}
for (const output of result.outputFiles) replace(output.path, output.contents);

const bundle = result.outputFiles.find((output) => output.path === path.join(root, BUNDLE)).contents;
const ascii = bundle.every((byte) => byte < 0x80);
const id = createHash('sha256').update(bundle).digest('hex').slice(0, 16);
// Code caches of other bundles are keyed by their id and would never be read again.
for (const name of readdirSync(outDir)) {
  if (name.endsWith('.cache') && !name.startsWith(`cli.${id}.`)) rmSync(path.join(outDir, name), { force: true });
}
replace(path.join(root, MANIFEST), `${JSON.stringify({ id, size: bundle.length, ascii, stamps }, null, 1)}\n`);
console.log(`bundle-cli: ${BUNDLE} (${inputs.length} files, ${Math.round(bundle.length / 1024)} KiB, id ${id})`);
