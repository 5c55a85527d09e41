// What decides whether dist/bundle/cli.cjs still matches what it was built from. A full
// `tsc -p tsconfig.build.json` rewrites every file of dist/ (dist/cli/main.js among them)
// and npm rewrites node_modules/.package-lock.json on every install, so these two stand for
// all the bundle's inputs: one stat each instead of a walk. bin/brokered-shell.js makes the
// same comparison inline (it must not import more than it needs at start).
import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';

/** Relative to the package root; the second is absent where the dependencies are hoisted. */
export const STAMP_FILES = ['dist/cli/main.js', 'node_modules/.package-lock.json'];
export const BUNDLE = 'dist/bundle/cli.cjs';
export const MANIFEST = 'dist/bundle/cli.json';

/** [mtimeMs, size] of a file, or undefined when it does not exist. */
export function fingerprint(root, file) {
  const info = statSync(path.join(root, file), { throwIfNoEntry: false });
  return info && [info.mtimeMs, info.size];
}

/** True when the bundle and its manifest exist and no stamp file changed since the bundle was built. */
export function bundleIsCurrent(root) {
  let manifest;
  try {
    manifest = JSON.parse(readFileSync(path.join(root, MANIFEST), 'utf8'));
  } catch {
    return false;
  }
  if (fingerprint(root, BUNDLE) === undefined) return false;
  return STAMP_FILES.every((file) => String(fingerprint(root, file)) === String(manifest.stamps?.[file]));
}
