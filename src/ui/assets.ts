import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * What the page is made of, read once at start and served from memory: the page's own
 * files (`src/ui/public/`, plain ES modules, no build step) and three ES modules from
 * node_modules (Preact, its hooks, htm). Nothing else on disk can be reached by a URL.
 *
 * `src/ui/public/` is found from this module's own place: `src/ui/` when run from the
 * sources, `dist/ui/` when run compiled — both two levels below the package root, and
 * the package ships `src/ui/public/` beside `dist/`.
 */
export const PUBLIC_DIR = fileURLToPath(new URL('../../src/ui/public/', import.meta.url));

export interface Asset {
  body: Buffer;
  type: string;
}

export interface Assets {
  /** URL path → asset: `/`, `/assets/<name>`, `/vendor/<name>`. */
  files: ReadonlyMap<string, Asset>;
  /** The Content-Security-Policy for every answer (the inline import map is allowed by its hash). */
  csp: string;
}

/** Bare module names the page imports → the file in node_modules that serves each. */
const VENDOR: ReadonlyArray<{ specifier: string; route: string; pkg: string; file: string }> = [
  { specifier: 'preact', route: '/vendor/preact.mjs', pkg: 'preact', file: 'dist/preact.mjs' },
  { specifier: 'preact/hooks', route: '/vendor/preact-hooks.mjs', pkg: 'preact', file: 'hooks/dist/hooks.mjs' },
  { specifier: 'htm', route: '/vendor/htm.mjs', pkg: 'htm', file: 'dist/htm.mjs' },
];

const TYPES: Readonly<Record<string, string>> = {
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.html': 'text/html; charset=utf-8',
  '.svg': 'image/svg+xml',
};

/** Only plain names of these kinds are served from the public folder. */
const PUBLIC_NAME = /^[a-z0-9][a-z0-9-]*\.(?:js|css|svg)$/;
const IMPORT_MAP_SLOT = '<!--import-map-->';

/** A file inside an installed package (found from its entry point: not every package exports its package.json). */
export function vendorFile(pkg: string, file: string): string {
  let dir = path.dirname(createRequire(import.meta.url).resolve(pkg));
  for (;;) {
    const manifest = path.join(dir, 'package.json');
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: unknown }).name === pkg) return path.join(dir, file);
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error(`cannot find the folder of package ${pkg}`);
    dir = parent;
  }
}

export function importMap(): { imports: Record<string, string> } {
  return { imports: Object.fromEntries(VENDOR.map((v) => [v.specifier, v.route])) };
}

export function loadAssets(publicDir: string = PUBLIC_DIR): Assets {
  const files = new Map<string, Asset>();
  for (const name of readdirSync(publicDir).sort()) {
    if (!PUBLIC_NAME.test(name)) continue;
    files.set(`/assets/${name}`, { body: readFileSync(path.join(publicDir, name)), type: typeOf(name) });
  }
  for (const v of VENDOR) files.set(v.route, { body: readFileSync(vendorFile(v.pkg, v.file)), type: typeOf(v.file) });

  const template = readFileSync(path.join(publicDir, 'index.html'), 'utf8');
  if (!template.includes(IMPORT_MAP_SLOT)) throw new Error(`${publicDir}/index.html has no ${IMPORT_MAP_SLOT} slot`);
  const map = JSON.stringify(importMap());
  files.set('/', { body: Buffer.from(template.replace(IMPORT_MAP_SLOT, `<script type="importmap">${map}</script>`)), type: typeOf('index.html') });
  const mapHash = createHash('sha256').update(map, 'utf8').digest('base64');
  const csp = [
    "default-src 'none'",
    `script-src 'self' 'sha256-${mapHash}'`,
    "style-src 'self'",
    "img-src 'self'",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
  return { files, csp };
}

function typeOf(name: string): string {
  return TYPES[path.extname(name)] ?? 'application/octet-stream';
}
