#!/usr/bin/env node
// Build the native parts (node-gyp) or the TypeScript (tsc) only when an output is
// missing or older than a source. npm runs `install` and `prepare` again whenever
// `npx brokered-shell` resolves this package; without this check every first npx call
// would rebuild everything (a minute and more on a small machine). `ts` also refreshes the
// one-file bundle of the CLI (toolchain/bundle-cli.mjs) when tsc ran or npm reinstalled the
// dependencies since it was made; the bin falls back to dist/ without it.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleIsCurrent } from './bundle-stamps.mjs';
import { BUILD_DIR, NATIVE_FILES } from './native-dirs.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const jobs = {
  native: {
    sources: ['binding.gyp', 'native'],
    outputs: NATIVE_FILES.map((file) => `${BUILD_DIR}/${file}`),
    command: ['node-gyp', 'rebuild'],
    before: missingCompilers,
  },
  ts: {
    sources: ['src', 'tsconfig.json', 'tsconfig.build.json'],
    outputs: ['dist/index.js', 'dist/cli/main.js'],
    command: ['tsc', '-p', 'tsconfig.build.json'],
    after: [
      {
        command: [process.execPath, 'toolchain/bundle-cli.mjs'],
        needed: () => !bundleIsCurrent(root) || oldestOutput(['dist/bundle/cli.json']) < newest('toolchain'),
        // Only a speed-up: without it the CLI still runs, from dist/.
        failed: 'build-if-stale: the CLI bundle was not built; the CLI runs from dist/ (slower start)',
      },
      {
        command: [process.execPath, 'toolchain/config-schema.mjs'],
        needed: () => oldestOutput(['dist/config.schema.json', 'dist/project-config.schema.json']) < oldestOutput(['dist/config/schema.js', 'dist/config/project.js']),
        failed: 'build-if-stale: the JSON Schemas of the configuration were not written to dist/',
      },
    ],
  },
};

/** The first of `names` on PATH, or undefined. */
function onPath(names) {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    for (const name of names) if (dir !== '' && existsSync(path.join(dir, name))) return name;
  }
  return undefined;
}

/** Why node-gyp cannot build here, asked first: its own failure is pages of gyp output. */
function missingCompilers() {
  const tools = [['make'], ['cc', 'gcc', 'clang'], ['c++', 'g++', 'clang++'], ['python3']];
  const missing = tools.filter((names) => onPath(names) === undefined).map((names) => names[0]);
  if (missing.length === 0) return undefined;
  return [
    `cannot build the native parts: ${missing.join(', ')} not found on PATH`,
    'install a C/C++ toolchain and python3 (Debian: `apt-get install build-essential python3`, which `bash toolchain/install-debian-packages.sh` does), then run `npm rebuild brokered-shell` (in a checkout: `npm ci`)',
  ].join('\n');
}

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
const force = process.env.BROKERED_SHELL_FORCE_BUILD === '1';
// npm puts node_modules/.bin (and its own node-gyp) on PATH for lifecycle scripts; add
// the local bin dir for manual runs too.
const env = { ...process.env, PATH: [path.join(root, 'node_modules', '.bin'), process.env.PATH].filter(Boolean).join(path.delimiter) };
const run = (command) => {
  const result = spawnSync(command[0], command.slice(1), { cwd: root, stdio: 'inherit', env });
  // npm puts node-gyp on PATH for its scripts; a run outside npm may not have it.
  if (result.error) console.error(`brokered-shell: cannot run ${command[0]}: ${result.error.message}`);
  return result.status ?? 1;
};
const built = force || oldestOutput(job.outputs) < Math.max(...job.sources.map(newest));
if (built) {
  const refusal = job.before?.();
  if (refusal) {
    console.error(refusal.replace(/^/gm, 'brokered-shell: '));
    process.exit(1);
  }
  const status = run(job.command);
  if (status !== 0) process.exit(status);
}
for (const step of job.after ?? []) {
  if ((built || step.needed()) && run(step.command) !== 0) console.error(step.failed);
}
