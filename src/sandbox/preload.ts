import { spawn, type ChildProcess } from 'node:child_process';
import { findPackageRoot, locateNativeFile, nativeCandidates } from '../native/loader.js';
import { locateSandboxBinary } from './locate.js';
import type { SandboxExit, SandboxStdio } from './spawn.js';

/**
 * The preload runtime: the fallback where seccomp user notification is missing, and the
 * reference's eager per-call IPC model for side-by-side benchmarks. The launcher
 * (`brokered-sandbox --mode preload`) drops capabilities, applies Landlock where the
 * kernel has it (read everywhere but the read policy's paths, write only the writable
 * dirs and a few devices; with a read policy and no Landlock it refuses to start) and
 * starts the command with the brokered-preload library first in LD_PRELOAD, staying as
 * its child subreaper: the command's orphans stay below it, and whatever the command
 * left running is killed when it ends (as under the seccomp supervisor). The library
 * asks the broker over `BROKERED_SHELL_SOCKET` before every modifying libc call of a
 * dynamically linked program (see native/preload/preload.h).
 */

/** The library's file name; node-gyp builds it next to the addon. */
export const PRELOAD_LIBRARY = 'brokered-preload.so';

/** The library paths tried under the package root, in order. */
export function preloadLibraryCandidates(root: string): string[] {
  return nativeCandidates(root, PRELOAD_LIBRARY);
}

/**
 * The built brokered-preload library of this package (from the package root, never
 * from a search path). Throws NATIVE_UNAVAILABLE naming every path tried.
 */
export function locatePreloadLibrary(root: string = findPackageRoot()): string {
  return locateNativeFile(root, PRELOAD_LIBRARY, `the ${PRELOAD_LIBRARY} library`, 'read');
}

export interface SpawnPreloadedOptions {
  /** Program and arguments; the program is looked up in env.PATH by the launcher. */
  argv: readonly string[];
  cwd: string;
  /**
   * Environment of the command; it must name the broker (BROKERED_SHELL_SOCKET,
   * BROKERED_SHELL_SESSION_ID, …) or the library refuses every write it sees.
   */
  env: NodeJS.ProcessEnv;
  /** Directories the command may write itself after the broker said SANDBOX. Must exist. */
  writableDirs: readonly string[];
  /** Devices beyond /dev/null, /dev/zero, /dev/full, /dev/tty and /dev/pts the command may write. */
  writeDevs?: readonly string[];
  /**
   * Files and folders the command may not read or execute: only Landlock keeps them so (the
   * library never sees reads), so without it the launcher refuses to start (exit 126).
   */
  readDenied?: readonly string[];
  /**
   * false: no Landlock even where the kernel has it (the launcher says so on stderr) —
   * the reference's model alone, for benchmarks. `run` never turns it off.
   */
  landlock?: boolean;
  stdio?: readonly [SandboxStdio, SandboxStdio, SandboxStdio];
  /** Overrides for the launcher and the library (default: this package's builds). */
  binaryPath?: string;
  libraryPath?: string;
}

export interface PreloadedProcess {
  /** The launcher: it passes the signals it gets on to the command and exits with its status. */
  child: ChildProcess;
  exit: Promise<SandboxExit>;
}

/** The launcher's arguments for the preload runtime (exported for diagnostics). */
export function preloadArgs(options: Pick<SpawnPreloadedOptions, 'argv' | 'writableDirs' | 'writeDevs' | 'readDenied' | 'landlock'> & { library: string }): string[] {
  if (options.argv.length === 0) throw new RangeError('argv must name a program');
  return [
    '--mode',
    'preload',
    '--preload',
    options.library,
    ...options.writableDirs.flatMap((dir) => ['--writable', dir]),
    ...(options.writeDevs ?? []).flatMap((dev) => ['--write-dev', dev]),
    ...(options.readDenied ?? []).flatMap((denied) => ['--deny-read', denied]),
    ...(options.landlock === false ? ['--no-landlock'] : []),
    '--',
    ...options.argv,
  ];
}

/** Runs a command in the preload runtime. Exit status: the command's; 126 setup failed; 127 not found. */
export function spawnPreloaded(options: SpawnPreloadedOptions): PreloadedProcess {
  const binary = options.binaryPath ?? locateSandboxBinary();
  const library = options.libraryPath ?? locatePreloadLibrary();
  const [stdin, stdout, stderr] = options.stdio ?? ['inherit', 'inherit', 'inherit'];
  const child = spawn(binary, preloadArgs({ ...options, library }), {
    cwd: options.cwd,
    env: options.env,
    stdio: [stdin, stdout, stderr],
  });
  const exit = new Promise<SandboxExit>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
  // Callers that never await `exit` must not crash the process on a spawn error.
  exit.catch(() => undefined);
  return { child, exit };
}
