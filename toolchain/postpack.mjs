#!/usr/bin/env node
// After `npm pack` / `npm publish`: the checkout as it was before toolchain/prepack.mjs. Its
// prebuilds/ go (a checkout runs its own build/), and the bundle manifest loses the
// `packed` record, which only an installed copy may go by.
import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { MANIFEST } from './bundle-stamps.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
rmSync(path.join(root, 'prebuilds'), { recursive: true, force: true });
const manifestFile = path.join(root, MANIFEST);
let manifest;
try {
  manifest = JSON.parse(readFileSync(manifestFile, 'utf8'));
} catch {
  process.exit(0);
}
if (manifest.packed !== undefined) {
  delete manifest.packed;
  const temp = `${manifestFile}.${process.pid}.tmp`;
  writeFileSync(temp, `${JSON.stringify(manifest, null, 1)}\n`);
  renameSync(temp, manifestFile);
}
