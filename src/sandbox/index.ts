/**
 * The Linux kernel sandbox, TypeScript side. `spawnSandboxed` starts the native
 * launcher `brokered-sandbox` (build/Release, from `binding.gyp`), which runs the
 * command under Landlock + seccomp user notification and asks `onRequest` about every
 * modifying syscall outside the scratch dirs, then performs the allowed ones itself
 * on the paths the answer names. Launcher flags (see native/sandbox/main.c):
 *   --broker-fd N      the request channel (always 3 here)
 *   --scratch DIR      freely writable dirs (`scratchDirs`; TMPDIR defaults to the first)
 *   --write-dev PATH   extra writable devices below /dev (`writeDevs`)
 *   --deny-read PATH   what the command may not read or execute (`readDenied`, the read policy)
 *   --check            kernel probe (`checkSandboxSupport`)
 *   --print-filter     the seccomp tables as JSON (`describeSeccompFilter`)
 * Exit codes: the command's own; 125 broker channel lost (command killed); 126 sandbox
 * could not be set up (nothing ran); 127 program not found.
 * The wire protocol is specified in native/sandbox/PROTOCOL.md.
 *
 * `spawnPreloaded` (preload.ts) starts the fallback runtime instead: the same launcher
 * in `--mode preload`, Landlock where the kernel has it, and the brokered-preload
 * library asking the broker over its socket from inside each dynamically linked program.
 */
export {
  serveKernelChannel,
  type KernelChannel,
  type KernelChannelOptions,
  type KernelRefusalHandler,
  type KernelRequestHandler,
} from './channel.js';
export { errnoFromName, errnoName } from './errno.js';
export { checkSandboxSupport, describeSeccompFilter, type FilterTables, type SandboxSupport } from './info.js';
export { locateSandboxBinary, sandboxBinaryCandidates, SANDBOX_BINARY } from './locate.js';
export {
  SandboxOp,
  TWO_PATH_OPS,
  decodeAnswer,
  decodeRequest,
  encodeAnswer,
  encodeRefusal,
  encodeRequest,
  normalizeAnswer,
  REFUSED_OP,
  type KernelAnswer,
  type KernelOp,
  type KernelOpCode,
  type KernelRefusal,
  type KernelRequest,
} from './protocol.js';
export {
  sandboxArgs,
  spawnSandboxed,
  type SandboxExit,
  type SandboxStdio,
  type SandboxedProcess,
  type SpawnSandboxedOptions,
} from './spawn.js';
export {
  PRELOAD_LIBRARY,
  locatePreloadLibrary,
  preloadArgs,
  preloadLibraryCandidates,
  spawnPreloaded,
  type PreloadedProcess,
  type SpawnPreloadedOptions,
} from './preload.js';
export { NoRuntime, RUNTIMES, chooseRuntime, type RuntimeChoice, type RuntimeName, type RuntimeProbes } from './runtime.js';
