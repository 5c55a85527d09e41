#!/usr/bin/env node
// Thin launcher: the CLI lives in the compiled package (npm install builds it). Loading dist/
// as 200+ ES modules costs several times Node's own start, so when the one-file bundle of it
// (toolchain/bundle-cli.mjs) is current, that is compiled instead, from a V8 code cache.
// CommonJS (bin/package.json) for the same reason: an ES module entry starts slower.
'use strict';
const { readFileSync, renameSync, rmSync, statSync, writeFileSync } = require('node:fs');
const { createRequire } = require('node:module');
const path = require('node:path');
const vm = require('node:vm');

const root = path.join(__dirname, '..');
// Kept in step with toolchain/bundle-stamps.mjs (not imported: every module costs at start).
const STAMP_FILES = ['dist/cli/main.js', 'node_modules/.package-lock.json'];

function fingerprint(file) {
  const info = statSync(path.join(root, file), { throwIfNoEntry: false });
  return String(info && [info.mtimeMs, info.size]);
}

/** FNV-1a as hex, of a string's UTF-16 units or a buffer's bytes: no crypto module at start. */
function fnv1a(units) {
  let hash = 0x811c9dc5;
  for (let i = 0; i < units.length; i += 1) hash = Math.imul(hash ^ (typeof units === 'string' ? units.charCodeAt(i) : units[i]), 0x01000193);
  return (hash >>> 0).toString(16);
}

/** '' for a plain `node`, else a short hash of its flags. */
function flagsKey() {
  const flags = [...process.execArgv, process.env.NODE_OPTIONS ?? ''].join('\0');
  return flags === '' ? '' : `-${fnv1a(flags)}`;
}

/**
 * Whether the bundle matches dist/ (toolchain/bundle-stamps.mjs says why these): in a
 * checkout, while both stamp files are as the build found them; in an installed package
 * (no dependency tree of its own), while dist/cli/main.js is the one it was packed with.
 */
function bundleMatches(manifest) {
  const stamps = STAMP_FILES.map(fingerprint);
  if (stamps.every((stamp, i) => stamp === String(manifest.stamps[STAMP_FILES[i]]))) return true;
  const packed = manifest.packed && manifest.packed[STAMP_FILES[0]];
  if (!Array.isArray(packed) || stamps[1] !== 'undefined') return false;
  const main = readFileSync(path.join(root, STAMP_FILES[0]));
  return String([main.length, fnv1a(main)]) === String(packed);
}

// The commands of src/cli/main.ts, kept in step (test/cli/launcher.test.ts checks).
const COMMANDS = ['run', 'serve', 'mcp', 'backups', 'config', 'doctor'];

/** Which code cache a command line uses: its command's, or one shared by everything else. */
function cacheScope(word) {
  return COMMANDS.includes(word) ? word : 'other';
}

/** The bundle's `main` and a function that saves its code cache, or undefined to use dist/. */
function loadBundle() {
  if (process.env.BROKERED_SHELL_NO_BUNDLE === '1') return undefined;
  const dir = path.join(root, 'dist', 'bundle');
  let manifest;
  let source;
  try {
    manifest = JSON.parse(readFileSync(path.join(dir, 'cli.json'), 'utf8'));
    // Built from another dist/ than the one on disk (a later tsc or npm install): stale.
    if (!bundleMatches(manifest)) return undefined;
    // An ASCII bundle (the usual case) reads faster as latin1: no UTF-8 decoding.
    source = readFileSync(path.join(dir, 'cli.cjs'), manifest.ascii === true ? 'latin1' : 'utf8');
    // Replaced by a build between the two reads: not the bundle the manifest describes.
    if (manifest.ascii === true && source.length !== manifest.size) return undefined;
  } catch {
    return undefined;
  }
  // V8 checks a cache only against the source's length and its own version and flags: the
  // bundle's id in the name ties the cache to these exact bytes, and runs with other flags
  // (a profiler, NODE_OPTIONS) get their own file instead of rejecting and rewriting this one.
  // Each command has its own: a cache holds only what its first run compiled, so `run`'s must
  // not be the one a `--help` made.
  const base = path.join(dir, `cli.${manifest.id}.${process.version}-${process.arch}${flagsKey()}.${cacheScope(process.argv[2])}`);
  // A cache made by a run whose broker answered requests holds the request path too: read first.
  const deepCache = `${base}.requests.cache`;
  const shallowCache = `${base}.cache`;
  let cachedData;
  let cacheFile;
  for (const file of [deepCache, shallowCache]) {
    try {
      cachedData = readFileSync(file);
      cacheFile = file;
      break;
    } catch {
      // Not made yet: made after this run.
    }
  }
  const filename = path.join(dir, 'cli.cjs');
  const wrapped = `(function (exports, require, module, __filename, __dirname) {${source}\n})`;
  const script = new vm.Script(wrapped, { filename, cachedData });
  const bundle = { exports: {} };
  script.runInThisContext()(bundle.exports, createRequire(filename), bundle, filename, dir);
  const saveCache = () => {
    const rejected = cachedData !== undefined && script.cachedDataRejected;
    const deeper = bundle.exports.brokerAnsweredRequests?.() === true;
    if (cachedData !== undefined && !rejected && !(deeper && cacheFile === shallowCache)) return;
    // After the run, so the functions it compiled lazily are in the cache too (a cache made
    // right after compiling costs ~40 ms more per start). A read-only install, or another
    // process writing the same file, just means no cache this time.
    const target = deeper ? deepCache : shallowCache;
    const temp = `${target}.${process.pid}.tmp`;
    try {
      writeFileSync(temp, script.createCachedData());
      renameSync(temp, target);
      // The one read first from now on; a shallower or rejected one would only be read again.
      if (cacheFile !== undefined && cacheFile !== target) rmSync(cacheFile, { force: true });
    } catch {
      try {
        rmSync(temp, { force: true });
      } catch {
        // Nothing was written.
      }
    }
  };
  return { main: bundle.exports.main, saveCache };
}

async function start() {
  const bundled = loadBundle();
  const { main } = bundled ?? (await import('../dist/cli/main.js'));
  process.exitCode = await main(process.argv);
  bundled?.saveCache();
}

start().catch((error) => {
  // What an ES module entry does with a rejected top-level await: report and fail.
  process.exitCode = 1;
  console.error(error);
});
