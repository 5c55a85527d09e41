/**
 * What the read policy costs ordinary reads: `grep -r` over 20,000 files in the kernel
 * sandbox with no read policy, with one whose denied paths lie beside the tree (a fake
 * home's secrets and the store: the tree's folder is one rule of the allow-list), and
 * with denied files inside the tree itself (its folders are then on the way to them, so
 * every entry of theirs is a rule of its own, the most a walk can meet). Runs alternate
 * between the variants so the machine's load falls on all of them alike; the medians and
 * their ratio to the run without a policy are printed. Not a test: no pass/fail.
 *
 *   node --import tsx bench/read-policy.ts [--runs 9] [--files 20000]
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { spawnSandboxed } from '../src/sandbox/index.js';
import { positiveInt } from './lib/cli-options.js';
import { answerAtOnce } from './lib/sandbox-runner.js';
import { median } from './lib/stats.js';
import { timeProcess, type StartedProcess } from './lib/timed-process.js';
import { writeTree } from './lib/trees.js';

const { values } = parseArgs({ options: { runs: { type: 'string' }, files: { type: 'string' } } });
const runs = positiveInt('runs', values.runs, 9);
const files = positiveInt('files', values.files, 20_000);

const base = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'bsh-bench-read-policy-')));
const tree = path.join(base, 'tree');
const scratch = path.join(base, 'scratch');
const home = path.join(base, 'home');
mkdirSync(scratch);
writeTree(tree, { files, perDir: 100, bytes: 1024, needleEvery: 97, needle: 'needle' });
const secrets = ['.ssh/id_ed25519', '.aws/credentials', '.npmrc', '.brokered-shell/config.json'].map((relative) => path.join(home, relative));
for (const file of secrets) {
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, 'fake\n');
}
const inside = [path.join(tree, '.env'), path.join(tree, 'd000', 'key.pem'), path.join(tree, 'd100', 'key.pem')];
for (const file of inside) writeFileSync(file, 'fake\n');

const command = ['grep', '-r', '--exclude=.env', '--exclude=*.pem', '-c', 'needle', tree];
/** The launcher's own start with each list (its Landlock rules are made then), to tell it from what each read costs. */
const startOnly = ['true'];
const variants: Record<string, (() => StartedProcess) | undefined> = {
  native: () => {
    const child = spawn(command[0] as string, command.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
    return { child, exit: new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal }))) };
  },
  'no read policy': () => sandboxed([]),
  'secrets beside the tree': () => sandboxed([...secrets, path.join(home, '.brokered-shell')]),
  'denied files inside the tree': () => sandboxed([...secrets, ...inside]),
  'true, no read policy': () => sandboxed([], startOnly),
  'true, denied files inside': () => sandboxed([...secrets, ...inside], startOnly),
};

function sandboxed(readDenied: string[], argv = command): StartedProcess {
  const started = spawnSandboxed({ argv, cwd: base, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C' }, scratchDirs: [scratch], readDenied, onRequest: answerAtOnce, stdio: ['ignore', 'pipe', 'pipe'] });
  return { child: started.child, exit: started.exit };
}

const times = new Map<string, number[]>(Object.keys(variants).map((name) => [name, []]));
for (let round = 0; round <= runs; round += 1) {
  for (const [name, start] of Object.entries(variants)) {
    if (!start) continue;
    const run = await timeProcess(start);
    if (run.code !== 0) throw new Error(`${name} exited ${String(run.code)}: ${run.stderrTail}`);
    // Round 0 warms the page cache and the launcher; it is not counted.
    if (round > 0) times.get(name)?.push(run.wallMs);
  }
}
rmSync(base, { recursive: true, force: true });

const reference = times.get('no read policy') ?? [];
const [referenceMedian, referenceBest] = [median(reference), Math.min(...reference)];
console.log(`grep -r over ${files} files, ${runs} runs each: median and best wall time (ms), each as a ratio to the sandbox without a read policy`);
for (const [name, samples] of times) {
  if (name.startsWith('true')) continue;
  const [middle, best] = [median(samples), Math.min(...samples)];
  const ratios = `${(middle / referenceMedian).toFixed(2)}× ${(best / referenceBest).toFixed(2)}×`;
  console.log(`  ${name.padEnd(30)} ${middle.toFixed(1).padStart(7)} ${best.toFixed(1).padStart(7)}  ${ratios}  [${samples.map((s) => s.toFixed(0)).join(' ')}]`);
}
const start = (name: string) => median(times.get(name) ?? []);
console.log(`the launcher's start alone (\`true\`): ${start('true, no read policy').toFixed(1)} ms without a read policy, ${start('true, denied files inside').toFixed(1)} ms with the denied files inside the tree`);
