// Whether a folder of native parts (a prebuild) works on this machine: each part is run the
// way the package runs it, in a child process (a part built for another libc or CPU may
// crash its loader). Used by the install script to choose between the prebuild and a
// source build, and by the pack step to refuse packing parts that do not work where they
// were built.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { NATIVE_FILES } from './native-dirs.mjs';

const [ADDON, LAUNCHER, PRELOAD, REQUEST] = NATIVE_FILES;

/** Loads the addon and checks it has every function dist/ calls (the loader's own test). */
const ADDON_CHECK = `
const [bindings, addon] = process.argv.slice(1);
const { isNativeBinding, missingBindingFunctions } = await import(bindings);
const loaded = (await import('node:module')).createRequire(import.meta.url)(addon);
if (!isNativeBinding(loaded)) {
  console.error('it lacks ' + missingBindingFunctions(loaded).join(', '));
  process.exit(1);
}`;

/** The line that says what went wrong: Node puts a stack's source line before its error. */
function firstLine(text) {
  const lines = (text ?? '').trim().split('\n');
  return lines.find((line) => /Error\b/.test(line)) ?? lines[0] ?? '';
}

function describe(result) {
  if (result.error) return result.error.message;
  const how = result.signal ? `killed by ${result.signal}` : `exit ${result.status}`;
  const said = firstLine(result.stderr) || firstLine(result.stdout);
  return said ? `${how}: ${said}` : how;
}

/**
 * Undefined when every part in `dir` works here; else why the first that does not fails.
 * `root` is the package root (its dist/ holds the list of functions the addon must have).
 */
export function prebuildMisfit(root, folder) {
  const dir = path.resolve(root, folder);
  for (const file of NATIVE_FILES) {
    if (!existsSync(path.join(dir, file))) return `${file} is missing`;
  }
  const bindings = path.join(root, 'dist', 'native', 'bindings.js');
  if (!existsSync(bindings)) return 'dist/native/bindings.js is missing, so the addon cannot be checked';
  const addon = spawnSync(process.execPath, ['--input-type=module', '-e', ADDON_CHECK, pathToFileURL(bindings).href, path.join(dir, ADDON)], { encoding: 'utf8' });
  if (addon.status !== 0) return `${ADDON} does not load: ${describe(addon)}`;
  // The launcher's kernel check: "ok" and 0, or 126 and why this kernel cannot sandbox.
  // Either answer shows it runs here; what the kernel offers is for `doctor` to say.
  const launcher = spawnSync(path.join(dir, LAUNCHER), ['--check'], { encoding: 'utf8' });
  const answered = (launcher.status === 0 && launcher.stdout.trim() === 'ok') || (launcher.status === 126 && launcher.stderr.trim() !== '');
  if (!answered) return `${LAUNCHER} --check does not run: ${describe(launcher)}`;
  // The client with no broker named answers 2; with the preload library loaded into it, the
  // dynamic loader says on stderr when the library cannot be (and runs the client anyway).
  const env = { ...process.env, LD_PRELOAD: path.join(dir, PRELOAD) };
  delete env.BROKERED_SHELL_SOCKET;
  const request = spawnSync(path.join(dir, REQUEST), ['{}'], { encoding: 'utf8', env });
  if (request.status !== 2) return `${REQUEST} does not run: ${describe(request)}`;
  if (request.stderr.includes('ld.so')) return `${PRELOAD} cannot be loaded: ${firstLine(request.stderr)}`;
  return undefined;
}
