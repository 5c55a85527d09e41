// What decides whether dist/bundle/cli.cjs still matches what it was built from. A full
// `tsc -p tsconfig.build.json` rewrites every file of dist/ (dist/cli/main.js among them)
// and npm rewrites node_modules/.package-lock.json on every install, so these two stand for
// all the bundle's inputs: one stat each instead of a walk. bin/brokered-shell.js makes the
// same comparison inline (it must not import more than it needs at start).
//
// An installed package is told apart: npm writes its files with the install's own mtimes
// and its dependencies live in the consumer's node_modules (no node_modules/.package-lock.json
// of its own). There no tsc runs, and the bundle came in the same archive as dist/: the
// pack step (toolchain/prepack.mjs) records dist/cli/main.js's size and hash as `packed`,
// and the bundle is current while that file is still the one packed with it.
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

/** FNV-1a of bytes, as hex: the bin has no crypto module at start. Kept in step with bin/brokered-shell.js. */
export function fnv1a(bytes) {
  let hash = 0x811c9dc5;
  for (let i = 0; i < bytes.length; i += 1) hash = Math.imul(hash ^ bytes[i], 0x01000193);
  return (hash >>> 0).toString(16);
}

/** The manifest's `packed` record: [size, hash] of dist/cli/main.js as packed. */
export function packedRecord(root) {
  const bytes = readFileSync(path.join(root, STAMP_FILES[0]));
  return { [STAMP_FILES[0]]: [bytes.length, fnv1a(bytes)] };
}

/** True when the manifest was packed and this is an installed copy of that package with dist/cli/main.js as packed. */
function packedIsCurrent(root, manifest) {
  const record = manifest.packed?.[STAMP_FILES[0]];
  if (!Array.isArray(record) || fingerprint(root, STAMP_FILES[1]) !== undefined) return false;
  try {
    return String(packedRecord(root)[STAMP_FILES[0]]) === String(record);
  } catch {
    return false;
  }
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
  return STAMP_FILES.every((file) => String(fingerprint(root, file)) === String(manifest.stamps?.[file])) || packedIsCurrent(root, manifest);
}
