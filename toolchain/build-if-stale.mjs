#!/usr/bin/env node
// Build the native parts (node-gyp) or the TypeScript (tsc) only when an output is
// missing or older than a source. npm runs `install` and `prepare` again whenever
// `npx brokered-shell` resolves this package; without this check every first npx call
// would rebuild everything (a minute and more on a small machine).
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const jobs = {
  native: {
    sources: ['binding.gyp', 'native'],
    outputs: [
      'build/Release/brokered_shell_native.node',
      'build/Release/brokered-sandbox',
      'build/Release/brokered-request',
      'build/Release/brokered-preload.so',
    ],
    command: ['node-gyp', 'rebuild'],
  },
  ts: {
    sources: ['src', 'tsconfig.json', 'tsconfig.build.json'],
    outputs: ['dist/index.js', 'dist/cli/main.js'],
    command: ['tsc', '-p', 'tsconfig.build.json'],
  },
};

function newest(entry) {
  const full = path.join(root, entry);
  const info = statSync(full);
  if (!info.isDirectory()) return info.mtimeMs;
  return Math.max(info.mtimeMs, ...readdirSync(full).map((name) => newest(path.join(entry, name))));
}

function oldestOutput(outputs) {
  let oldest = Infinity;
  for (const output of outputs) {
    try {
      oldest = Math.min(oldest, statSync(path.join(root, output)).mtimeMs);
    } catch {
      return -Infinity;
    }
  }
  return oldest;
}

const job = jobs[process.argv[2]];
if (!job) {
  console.error(`usage: build-if-stale.mjs ${Object.keys(jobs).join('|')}`);
  process.exit(2);
}
if (process.env.BROKERED_SHELL_FORCE_BUILD !== '1' && oldestOutput(job.outputs) >= Math.max(...job.sources.map(newest))) {
  process.exit(0);
}
// npm puts node_modules/.bin (and its own node-gyp) on PATH for lifecycle scripts; add
// the local bin dir for manual runs too.
const env = { ...process.env, PATH: [path.join(root, 'node_modules', '.bin'), process.env.PATH].filter(Boolean).join(path.delimiter) };
const result = spawnSync(job.command[0], job.command.slice(1), { cwd: root, stdio: 'inherit', env });
process.exit(result.status ?? 1);
