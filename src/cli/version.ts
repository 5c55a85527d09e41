import { readFileSync } from 'node:fs';

/**
 * This package's version, from its package.json: two levels above this module, as from
 * dist/cli/, src/cli/ and dist/bundle/ alike.
 */
export function packageVersion(): string {
  const manifest = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version?: unknown };
  return typeof manifest.version === 'string' ? manifest.version : 'unknown';
}
