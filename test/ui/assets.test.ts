/**
 * What the page is made of reaches the browser: the compiled CLI (dist/) finds the page's
 * files, every module the page imports is served (its own files, or Preact and htm
 * from node_modules through the import map), and the page's modules type-check against
 * the DOM, Preact and the server's own API types.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../helpers/serve-process.js';

interface AssetsModule {
  PUBLIC_DIR: string;
  loadAssets(): { files: ReadonlyMap<string, { body: Buffer; type: string }>; csp: string };
  importMap(): { imports: Record<string, string> };
}

const PUBLIC = path.join(REPO_ROOT, 'src', 'ui', 'public');
const compiled = () => import(path.join(REPO_ROOT, 'dist', 'ui', 'assets.js')) as Promise<AssetsModule>;

/** The module specifiers a JavaScript file imports (static imports and re-exports). */
function importsOf(source: string): string[] {
  return [...source.matchAll(/\b(?:import|from)\s*["']([^"']+)["']/g)].map((m) => m[1] ?? '');
}

describe('the page from dist/', () => {
  it('the compiled server finds src/ui/public and serves the page, its modules and the vendored ones', async () => {
    const { PUBLIC_DIR, loadAssets } = await compiled();
    expect(path.resolve(PUBLIC_DIR)).toBe(PUBLIC);
    const { files } = loadAssets();
    for (const route of ['/', '/assets/app.js', '/assets/style.css', '/assets/icon.svg', '/vendor/preact.mjs', '/vendor/preact-hooks.mjs', '/vendor/htm.mjs']) {
      expect(files.has(route), route).toBe(true);
    }
    expect(files.get('/assets/app.js')?.type).toBe('text/javascript; charset=utf-8');
    expect(files.get('/vendor/htm.mjs')?.type).toBe('text/javascript; charset=utf-8');
    // Only the page's own kinds of files: not its tsconfig, not its type declarations.
    expect([...files.keys()].filter((route) => route.startsWith('/assets/')).every((route) => /\.(js|css|svg)$/.test(route) && !route.endsWith('.d.ts'))).toBe(true);
  });

  it('every module the page imports is served: its own files, or an import-map entry', async () => {
    const { loadAssets, importMap } = await compiled();
    const { files } = loadAssets();
    const mapped = importMap().imports;
    const modules = [...files.entries()].filter(([route]) => route.endsWith('.js') || route.endsWith('.mjs'));
    expect(modules.length).toBeGreaterThan(5);
    for (const [route, asset] of modules) {
      for (const specifier of importsOf(asset.body.toString('utf8'))) {
        const target = specifier.startsWith('.') ? new URL(specifier, `http://x${route}`).pathname : mapped[specifier];
        expect(target, `${route} imports ${specifier}`).toBeDefined();
        expect(files.has(target ?? ''), `${route} imports ${specifier} (${target})`).toBe(true);
      }
    }
    const page = files.get('/')?.body.toString('utf8') ?? '';
    for (const [, ref] of page.matchAll(/(?:src|href)="([^"]+)"/g)) expect(files.has(ref ?? ''), ref).toBe(true);
  });

  it('the vendored modules are the installed, pinned versions', () => {
    const pkg = JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    for (const name of ['preact', 'htm']) {
      const installed = JSON.parse(readFileSync(path.join(REPO_ROOT, 'node_modules', name, 'package.json'), 'utf8')) as { version: string };
      expect(pkg.dependencies[name], name).toBe(installed.version);
    }
  });

  it("the page's modules type-check (JSDoc, strict) against the DOM, Preact and the API's types", () => {
    expect(readdirSync(PUBLIC)).toContain('tsconfig.json');
    const tsc = path.join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
    const result = spawnSync(process.execPath, [tsc, '-p', path.join(PUBLIC, 'tsconfig.json')], { encoding: 'utf8' });
    expect(`${result.stdout}${result.stderr}`).toBe('');
    expect(result.status).toBe(0);
  }, 180_000);
});
