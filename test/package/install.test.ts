import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, realpathSync, statSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../helpers/serve-process.js';

// The package as a user gets it: `npm pack` here, then `npm install` of the tarball into a
// fresh project on a PATH with no C toolchain (only what npm and the commands below use),
// so nothing can be compiled. The dependencies come from the npm registry.

const APPLETS = 'cat chmod cp dd find grep head ln ls mkdir mv readlink realpath rm rmdir sed tail tee touch truncate unlink wc'.split(' ');
const PREBUILD = `prebuilds/${process.platform}-${process.arch}`;
const NATIVE_FILES = ['brokered_shell_native.node', 'brokered-sandbox', 'brokered-preload.so', 'brokered-request'];
/** What npm, the install script and the tests' commands run: no cc, gcc, g++, make or python3. */
const TOOLS = ['node', 'npm', 'npx', 'sh', 'bash', 'env', 'cat', 'ls', 'rm', 'mkdir', 'mv', 'cp', 'stat', 'awk', 'sed', 'grep', 'uname', 'tr', 'chmod', 'touch', 'head', 'tail', 'wc'];
const COMPILERS = ['cc', 'gcc', 'g++', 'c++', 'clang', 'make', 'python3', 'python'];

interface PackedFile {
  path: string;
  size: number;
  mode: number;
}

let base: string;
let bin: string;
let packed: { filename: string; files: PackedFile[] };
let tarball: string;
let project: string;
let installLog: string;

/** The environment of a user's shell on that PATH: no npm lifecycle variables of this suite's own run. */
function userEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!key.startsWith('npm_') && !key.startsWith('VITEST')) env[key] = value;
  return { ...env, PATH: bin, BROKERED_SHELL_HOME: path.join(base, 'home'), ...extra };
}

function inProject(dir: string, command: string, args: string[], extra: NodeJS.ProcessEnv = {}) {
  const result = spawnSync(command, args, { cwd: dir, env: userEnv(extra), encoding: 'utf8', timeout: 120_000 });
  if (result.error) throw result.error;
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

async function makeProject(name: string, installArgs: string[]): Promise<{ dir: string; log: string }> {
  const dir = path.join(base, name);
  await fs.mkdir(dir);
  await fs.writeFile(path.join(dir, 'package.json'), JSON.stringify({ name, version: '1.0.0', private: true }));
  const result = inProject(dir, 'npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', '--foreground-scripts', ...installArgs, tarball]);
  expect(result.status, `${result.stdout}\n${result.stderr}`).toBe(0);
  return { dir, log: `${result.stdout}\n${result.stderr}` };
}

const installed = (dir: string, ...parts: string[]) => path.join(dir, 'node_modules', 'brokered-shell', ...parts);

beforeAll(async () => {
  base = realpathSync(await fs.mkdtemp(path.join(os.tmpdir(), 'bsh-package-')));
  bin = path.join(base, 'bin');
  await fs.mkdir(bin);
  for (const tool of TOOLS) {
    const found = execFileSync('bash', ['-c', `type -P ${tool}`], { encoding: 'utf8' }).trim();
    await fs.symlink(found, path.join(bin, tool));
  }
  const packing = spawnSync('npm', ['pack', '--json', '--pack-destination', base], { cwd: REPO_ROOT, env: userEnv({ PATH: process.env.PATH }), encoding: 'utf8' });
  expect(packing.status, packing.stderr).toBe(0);
  [packed] = JSON.parse(packing.stdout) as [typeof packed];
  tarball = path.join(base, packed.filename);
  ({ dir: project, log: installLog } = await makeProject('consumer', []));
}, 240_000);

afterAll(async () => {
  if (base) await fs.rm(base, { recursive: true, force: true });
});

describe('the tarball', () => {
  const paths = () => new Set(packed.files.map((file) => file.path));
  const modeOf = (file: string) => packed.files.find((entry) => entry.path === file)?.mode;

  it('holds the built library and CLI, the prebuilt native parts, their sources and the shims', () => {
    const files = paths();
    for (const file of ['dist/index.js', 'dist/index.d.ts', 'dist/cli/main.js', 'dist/config.schema.json', 'dist/project-config.schema.json', 'dist/bundle/cli.cjs', 'dist/bundle/cli.json', 'bin/brokered-shell.js', 'bin/package.json', 'binding.gyp', 'native/sandbox/main.c', 'native/addon/binding.cc', 'shims/brokered-env.sh', 'shims/brokered-bin/brokered-dispatch', 'src/ui/public/index.html', 'src/ui/public/app.js', 'toolchain/install-native.mjs']) {
      expect(files.has(file), file).toBe(true);
    }
    for (const file of NATIVE_FILES) expect(files.has(`${PREBUILD}/${file}`), file).toBe(true);
    for (const file of ['brokered-sandbox', 'brokered-request']) expect(modeOf(`${PREBUILD}/${file}`), file).toBe(0o755);
    for (const applet of APPLETS) expect(modeOf(`shims/brokered-bin/${applet}`), applet).toBe(0o755);
  });

  it('leaves out tests, benchmarks, docs images, sources the package does not run, maps and code caches', () => {
    const unwanted = [...paths()].filter((file) => /^(test|bench|docs|examples|build|\.ci)\/|^native\/fuzz\/|^src\/(?!ui\/public\/)|\.map$|\.cache$|\.png$|^tsconfig|^vitest/.test(file) || (file.startsWith('src/ui/public/') && !/\.(js|css|svg|html)$/.test(file)));
    expect(unwanted).toEqual([]);
    const manifest = JSON.parse(readFileSync(installed(project, 'dist', 'bundle', 'cli.json'), 'utf8')) as { packed?: unknown };
    expect(manifest.packed).toBeDefined();
  });

  it('leaves the checkout as it was: no prebuilds/, no packed record in its own manifest', () => {
    expect(existsSync(path.join(REPO_ROOT, 'prebuilds'))).toBe(false);
    const manifest = JSON.parse(readFileSync(path.join(REPO_ROOT, 'dist', 'bundle', 'cli.json'), 'utf8')) as { packed?: unknown };
    expect(manifest.packed).toBeUndefined();
  });
});

describe('npm install of the tarball on a machine without a C toolchain', () => {
  it('has no compiler, make or python on its PATH', () => {
    for (const tool of COMPILERS) expect(inProject(base, 'bash', ['-c', `type -P ${tool}`]).status, tool).toBe(1);
  });

  it('uses the prebuilt native parts: the install script says so and builds nothing', () => {
    expect(installLog).toContain(`brokered-shell: using the prebuilt native parts in ${PREBUILD}`);
    expect(existsSync(installed(project, 'build'))).toBe(false);
  });

  it("import('brokered-shell') works: a library session runs a command in the kernel sandbox", async () => {
    const ws = path.join(base, 'library-ws');
    await fs.mkdir(ws);
    await fs.writeFile(path.join(ws, 'lib.txt'), 'before\n');
    const script = `const { createSandboxSession } = await import('brokered-shell');
const session = await createSandboxSession({ workspace: process.argv[1] });
await session.beginTurn({ userMessage: 'from the installed library' });
const result = await session.execute('echo after > lib.txt');
const ended = await session.endTurn();
await session.close();
console.log(JSON.stringify({ runtime: session.runtime, exitCode: result.exitCode, files: ended.files }));`;
    const result = inProject(project, 'node', ['--input-type=module', '-e', script, ws]);
    expect(result.status, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual({ runtime: 'seccomp', exitCode: 0, files: 1 });
    expect(await fs.readFile(path.join(ws, 'lib.txt'), 'utf8')).toBe('after\n');
  });

  it('the installed CLI runs a sandboxed command that changes a file, and backups restore puts its bytes back', async () => {
    const ws = path.join(base, 'ws');
    await fs.mkdir(ws);
    const file = path.join(ws, 'notes.txt');
    await fs.writeFile(file, 'the original\n');
    const cli = path.join(project, 'node_modules', '.bin', 'brokered-shell');
    const doctor = inProject(ws, cli, ['doctor', '--json']);
    expect(doctor.status, doctor.stderr).toBe(0);
    expect(JSON.parse(doctor.stdout)).toMatchObject({ ok: true, runtime: 'seccomp' });

    const run = inProject(ws, cli, ['run', '--', 'echo changed > notes.txt; echo outside > /etc/bsh-package-test 2>/dev/null || echo refused']);
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout).toBe('refused\n');
    expect(existsSync('/etc/bsh-package-test')).toBe(false);
    expect(await fs.readFile(file, 'utf8')).toBe('changed\n');
    expect(run.stderr).toMatch(/turn \S+ backed up 1 file/);

    const restore = inProject(ws, cli, ['backups', 'restore', 'latest']);
    expect(restore.status, restore.stderr).toBe(0);
    expect(await fs.readFile(file, 'utf8')).toBe('the original\n');
    expect(inProject(ws, cli, ['--version'])).toMatchObject({ status: 0, stdout: `${(JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string }).version}\n` });
  });

  it('starts the CLI from the one-file bundle and writes its code cache next to it', () => {
    const bundleDir = installed(project, 'dist', 'bundle');
    const { id } = JSON.parse(readFileSync(path.join(bundleDir, 'cli.json'), 'utf8')) as { id: string };
    // A cache is written only by a run of the bundle, named by the bundle's id and the command.
    const caches = readdirSync(bundleDir).filter((name) => name.endsWith('.cache'));
    expect(caches.some((name) => name.startsWith(`cli.${id}.`) && /\.run(\.requests)?\.cache$/.test(name)), caches.join(' ')).toBe(true);
  });

  it('runs from a read-only install too: no cache is written, nothing fails', async () => {
    const bundleDir = installed(project, 'dist', 'bundle');
    for (const name of readdirSync(bundleDir).filter((entry) => entry.endsWith('.cache'))) await fs.rm(path.join(bundleDir, name));
    execFileSync('mount', ['--bind', bundleDir, bundleDir]);
    try {
      execFileSync('mount', ['-o', 'remount,bind,ro', bundleDir]);
      const list = inProject(project, path.join(project, 'node_modules', '.bin', 'brokered-shell'), ['backups', 'list']);
      expect(list.status, list.stderr).toBe(0);
      expect(list.stderr).toBe('');
      expect(readdirSync(bundleDir).filter((entry) => entry.endsWith('.cache'))).toEqual([]);
    } finally {
      execFileSync('umount', [bundleDir]);
    }
  });

  it('the command files of shims/brokered-bin run, and brokered-env.sh finds the prebuilt request client', () => {
    const shims = installed(project, 'shims');
    const wc = inProject(project, path.join(shims, 'brokered-bin', 'wc'), ['-c', 'package.json']);
    expect(wc.status, wc.stderr).toBe(0);
    expect(wc.stdout.trim()).toBe(`${statSync(path.join(project, 'package.json')).size} package.json`);
    const env = inProject(project, 'bash', ['-c', `source '${path.join(shims, 'brokered-env.sh')}' && printf '%s\\n' "$BROKERED_SHELL_REQUEST" && type -P cat`]);
    expect(env.stdout).toBe(`${installed(project, PREBUILD, 'brokered-request')}\n${path.join(shims, 'brokered-bin', 'cat')}\n`);
  });
});

describe('the examples, run against the installed package', () => {
  /** An example copied into the consumer project (an ES module folder, as examples/ is here), where 'brokered-shell' resolves to the installed copy. */
  async function copied(...names: string[]): Promise<string[]> {
    const out: string[] = [];
    await fs.mkdir(path.join(project, 'examples'), { recursive: true });
    await fs.writeFile(path.join(project, 'examples', 'package.json'), JSON.stringify({ type: 'module' }));
    for (const name of names) {
      const target = path.join(project, 'examples', path.basename(name));
      await fs.mkdir(path.dirname(target), { recursive: true });
      await fs.copyFile(path.join(REPO_ROOT, 'examples', name), target);
      out.push(target);
    }
    return out;
  }
  // TypeScript examples run with this checkout's tsx: the consumer has none, and no tsconfig that would map the name.
  const tsx = pathToFileURL(path.join(REPO_ROOT, 'node_modules', 'tsx', 'dist', 'loader.mjs')).href;

  it('the agent loop (library: refusals, streaming, turns, diff, restore, undoLast)', async () => {
    const [loop] = await copied('agent-loop.ts');
    const result = inProject(project, 'node', ['--import', tsx, loop ?? '']);
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout).toContain('diff notes.txt: -first draft +second draft');
    expect(result.stdout).toContain('after undoLast: notes.txt "second draft\\n"');
  });

  it('the MCP client, against the installed CLI and SDK', async () => {
    const [client] = await copied('mcp-client.ts');
    const ws = path.join(base, 'mcp-ws');
    await fs.mkdir(ws);
    await fs.writeFile(path.join(ws, 'notes.txt'), 'original\n');
    const result = inProject(project, 'node', ['--import', tsx, client ?? '', ws]);
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout).toContain('diff: -original +changed');
    expect(await fs.readFile(path.join(ws, 'notes.txt'), 'utf8')).toBe('original\n');
  });

  it('the Claude Code hook and /bsh-rewind (plain node, no TypeScript)', async () => {
    const [hook, rewind] = await copied('claude-code/pre-tool-use.mjs', 'claude-code/rewind.mjs');
    const ws = path.join(base, 'claude-ws');
    await fs.mkdir(ws);
    await fs.writeFile(path.join(ws, 'f.txt'), 'before\n');
    const payload = { session_id: 's1', cwd: ws, hook_event_name: 'PreToolUse', tool_name: 'Bash', tool_input: { command: 'echo after > f.txt' }, tool_use_id: 't1' };
    const env = { BROKERED_SHELL_BIN: path.join(project, 'node_modules', '.bin', 'brokered-shell') };
    const answered = spawnSync('node', [hook ?? ''], { cwd: project, env: userEnv(env), input: JSON.stringify(payload), encoding: 'utf8' });
    expect(answered.status, answered.stderr).toBe(0);
    const command = (JSON.parse(answered.stdout) as { hookSpecificOutput: { updatedInput: { command: string } } }).hookSpecificOutput.updatedInput.command;
    expect(inProject(ws, 'bash', ['-c', command], env).status).toBe(0);
    expect(await fs.readFile(path.join(ws, 'f.txt'), 'utf8')).toBe('after\n');
    const undone = inProject(project, 'node', [rewind ?? '', '--workspace', ws]);
    expect(undone.status, undone.stdout + undone.stderr).toBe(0);
    expect(await fs.readFile(path.join(ws, 'f.txt'), 'utf8')).toBe('before\n');
  });
});

describe('npm install --ignore-scripts: the package does not depend on its install script', () => {
  it('still imports, finds the prebuild and runs a sandboxed command', { timeout: 120_000 }, async () => {
    const { dir } = await makeProject('no-scripts', ['--ignore-scripts']);
    const result = inProject(dir, 'node', ['--input-type=module', '-e', "const m = await import('brokered-shell'); console.log(typeof m.createSandboxSession)"]);
    expect(result).toMatchObject({ status: 0, stdout: 'function\n' });
    expect(existsSync(path.join(dir, 'node_modules', 'brokered-shell', 'build'))).toBe(false);
    await fs.writeFile(path.join(dir, 'f.txt'), 'one\n');
    const run = inProject(dir, path.join(dir, 'node_modules', '.bin', 'brokered-shell'), ['run', '--', 'echo two > f.txt']);
    expect(run.status, run.stderr).toBe(0);
    expect(await fs.readFile(path.join(dir, 'f.txt'), 'utf8')).toBe('two\n');
  });
});
