import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { expect, it } from 'vitest';

const here = new URL('.', import.meta.url).pathname;

/** Every source file under examples/, tests included. */
function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) return sources(file);
    return /\.(ts|mjs|js)$/.test(entry.name) ? [file] : [];
  });
}

it("every example imports brokered-shell by its name, as an embedder does, never the repository's sources", () => {
  const reaching = sources(here).filter((file) => /from\s+['"](\.\.\/)+src\//.test(readFileSync(file, 'utf8')) || /import\(\s*['"](\.\.\/)+src\//.test(readFileSync(file, 'utf8')));
  expect(reaching.map((file) => path.relative(here, file))).toEqual([]);
  const byName = sources(here).filter((file) => /from\s+'brokered-shell'/.test(readFileSync(file, 'utf8')));
  expect(byName.length).toBeGreaterThanOrEqual(8);
});
