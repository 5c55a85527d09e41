#!/usr/bin/env node
// The package's install script: the native parts for this machine. A packed package carries
// them prebuilt (prebuilds/<platform>-<arch>/, toolchain/prepack.mjs); when they work here
// (toolchain/prebuild-fit.mjs runs each), nothing is built and no compiler is needed. Else,
// and in a checkout (no prebuilds/), node-gyp builds them from native/ into build/Release,
// which the loader prefers, when they are missing or older than their sources.
// The package does not depend on this script having run: the loader finds the prebuild by
// itself (a package manager may skip dependencies' install scripts).
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { prebuildDir } from './native-dirs.mjs';
import { prebuildMisfit } from './prebuild-fit.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const say = (line) => console.error(`brokered-shell: ${line}`);

const prebuild = prebuildDir();
if (existsSync(path.join(root, prebuild)) && process.env.BROKERED_SHELL_FORCE_BUILD !== '1') {
  const misfit = prebuildMisfit(root, prebuild);
  if (misfit === undefined) {
    say(`using the prebuilt native parts in ${prebuild}`);
    process.exit(0);
  }
  say(`the prebuilt native parts in ${prebuild} do not work here (${misfit}); building them from source`);
}

const build = spawnSync(process.execPath, [path.join(root, 'toolchain', 'build-if-stale.mjs'), 'native'], { cwd: root, stdio: 'inherit' });
process.exit(build.status ?? 1);
