#!/usr/bin/env node
// `npm pack` / `npm publish`, before the files are gathered: what an installed package needs
// and cannot make without a compiler or tsc. The native parts of this machine's platform,
// built when stale and copied to prebuilds/<platform>-<arch>/ (refused if they do not work
// here); dist/ and the CLI bundle, built when stale; and the bundle's manifest marked with
// the `packed` record that lets an installed copy trust it (toolchain/bundle-stamps.mjs).
// toolchain/postpack.mjs undoes the last two in the checkout.
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { MANIFEST, bundleIsCurrent, packedRecord } from './bundle-stamps.mjs';
import { BUILD_DIR, NATIVE_FILES, prebuildDir } from './native-dirs.mjs';
import { prebuildMisfit } from './prebuild-fit.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const fail = (why) => {
  console.error(`prepack: ${why}`);
  process.exit(1);
};

for (const job of ['native', 'ts']) {
  const status = spawnSync(process.execPath, [path.join(root, 'toolchain', 'build-if-stale.mjs'), job], { cwd: root, stdio: ['ignore', 2, 2] }).status;
  if (status !== 0) fail(`build-if-stale ${job} failed`);
}

const prebuild = path.join(root, prebuildDir());
rmSync(prebuild, { recursive: true, force: true });
mkdirSync(prebuild, { recursive: true });
for (const file of NATIVE_FILES) copyFileSync(path.join(root, BUILD_DIR, file), path.join(prebuild, file));
const misfit = prebuildMisfit(root, prebuild);
if (misfit !== undefined) fail(`the native parts built here do not work here: ${misfit}`);

if (!bundleIsCurrent(root)) fail('dist/bundle/ is not current after the build: run `node toolchain/bundle-cli.mjs`');
const manifestFile = path.join(root, MANIFEST);
const manifest = JSON.parse(readFileSync(manifestFile, 'utf8'));
const temp = `${manifestFile}.${process.pid}.tmp`;
// Replaced by rename: a CLI starting meanwhile reads the old manifest or the new one.
writeFileSync(temp, `${JSON.stringify({ ...manifest, packed: packedRecord(root) }, null, 1)}\n`);
renameSync(temp, manifestFile);
console.error(`prepack: ${path.relative(root, prebuild)} (${NATIVE_FILES.join(', ')}) and ${MANIFEST} packed`);
