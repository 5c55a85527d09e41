'use strict';
/**
 * brokered-shell safe-delete for Node: load with `node --require node-safe-delete.cjs`
 * (or NODE_OPTIONS="--require ..."). Wraps fs.unlink/unlinkSync/promises.unlink,
 * fs.rm/rmSync/promises.rm and fs.rmdir/rmdirSync/promises.rmdir so every delete goes
 * through the safe-delete client first (synchronously, `spawnSync`):
 *
 *   client exit 0 -> the call succeeds (the path is in the trash, backed up by the broker)
 *   client exit 1 -> the call fails: EACCES when denied (or the broker failed), else the
 *                    error Node itself would give (ENOENT, EISDIR, ENOTEMPTY, ...);
 *                    the file stays
 *   client exit 2 -> broker unreachable: the client runs again with --local (the
 *                    freedesktop trash, never a permanent delete)
 *
 * Inside the client process itself (BROKERED_SHELL_SAFE_DELETE_IN_CLIENT=1, set by every
 * shim when it starts the client) nothing is patched, so the client cannot call itself;
 * nor in the brokered-shell CLI, which hosts the broker.
 */

const fs = require('node:fs');
const path = require('node:path');
const os = require('node:os');
const { spawnSync } = require('node:child_process');
const { fileURLToPath } = require('node:url');
const { syncBuiltinESMExports } = require('node:module');

const GUARD = 'BROKERED_SHELL_SAFE_DELETE_IN_CLIENT';
const PATCHED = Symbol.for('brokered-shell.safe-delete.patched');

/** Node's own descriptions, so our errors read like the real ones. */
const DESCRIPTIONS = {
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  ENOENT: 'no such file or directory',
  ENOTDIR: 'not a directory',
  EISDIR: 'illegal operation on a directory',
  ENOTEMPTY: 'directory not empty',
  EINVAL: 'invalid argument',
  EBUSY: 'resource busy or locked',
  EXDEV: 'cross-device link not permitted',
  EROFS: 'read-only file system',
  ELOOP: 'too many symbolic links encountered',
  ENAMETOOLONG: 'name too long',
  EIO: 'i/o error',
};

function clientPath() {
  return process.env.BROKERED_SHELL_SAFE_DELETE_CLIENT || path.join(__dirname, 'broker-delete.cjs');
}

/** A path argument as Node accepts it (string, Buffer, file: URL), or undefined if invalid. */
function pathArgument(value) {
  if (typeof value === 'string') return value.includes('\u0000') ? undefined : value;
  if (Buffer.isBuffer(value)) {
    if (value.includes(0)) return undefined;
    const text = value.toString('utf8');
    // argv carries text: a name that is not UTF-8 cannot reach the client intact.
    return Buffer.from(text, 'utf8').equals(value) ? text : null;
  }
  if (value instanceof URL || (value && typeof value === 'object' && typeof value.href === 'string' && value.protocol === 'file:')) {
    try {
      return fileURLToPath(value);
    } catch {
      return undefined;
    }
  }
  return undefined;
}

function errnoNumber(code) {
  const value = os.constants.errno[code];
  return typeof value === 'number' ? -value : undefined;
}

function fsError(code, syscall, given, reason) {
  const description = DESCRIPTIONS[code] || code.toLowerCase();
  const suffix = reason ? ` (brokered-shell: ${reason})` : '';
  const error = new Error(`${code}: ${description}, ${syscall} '${given}'${suffix}`);
  const errno = errnoNumber(code);
  if (errno !== undefined) error.errno = errno;
  error.code = code;
  error.syscall = syscall;
  error.path = given;
  Error.captureStackTrace(error, fsError);
  return error;
}

/** What fs.rm gives for a directory without `recursive`. */
function rmIsDirectoryError(given) {
  const error = new Error(`Path is a directory: rm returned EISDIR (is a directory) ${given}`);
  error.name = 'SystemError';
  error.code = 'ERR_FS_EISDIR';
  error.errno = os.constants.errno.EISDIR;
  error.syscall = 'rm';
  error.path = given;
  error.info = { code: 'EISDIR', message: 'is a directory', path: given, syscall: 'rm', errno: os.constants.errno.EISDIR };
  Error.captureStackTrace(error, rmIsDirectoryError);
  return error;
}

function invalidCallback(value) {
  const error = new TypeError(`The "cb" argument must be of type function. Received ${value === undefined ? 'undefined' : typeof value}`);
  error.code = 'ERR_INVALID_ARG_TYPE';
  return error;
}

function runClient(flags, absolutePath) {
  const result = spawnSync(process.execPath, [clientPath(), '--json', ...flags, '--', absolutePath], {
    env: { ...process.env, [GUARD]: '1' },
    stdio: ['ignore', 'pipe', 'inherit'],
    encoding: 'utf8',
    windowsHide: true,
  });
  let report;
  for (const line of String(result.stdout || '').split('\n')) {
    if (!line.trim()) continue;
    try {
      report = JSON.parse(line);
    } catch {
      // Not ours; ignore.
    }
  }
  return { status: result.error ? null : result.status, report, spawnError: result.error };
}

/**
 * The one decision every wrapper shares. Returns undefined on success, else the Error to
 * throw or hand to the callback. `kind` picks the client flags and the error shapes.
 */
function safeDelete(kind, given, options) {
  const absolutePath = path.isAbsolute(given) ? given : `${process.cwd().replace(/\/$/, '')}/${given}`;
  const flags = [];
  if (kind === 'rmdir') flags.push('--rmdir');
  if (options.recursive) flags.push('--recursive');
  if (options.force) flags.push('--force');
  const syscall = kind === 'rm' ? 'rm' : kind;

  let outcome = runClient(flags, absolutePath);
  if (outcome.status === 2) outcome = runClient(['--local', ...flags], absolutePath);
  if (outcome.status === 0) return undefined;

  const report = outcome.report || {};
  if (outcome.status === 1 && report.outcome === 'failed' && report.errno && !report.timeout) {
    // An ordinary file-system answer: give the error Node itself would have given.
    if (kind === 'rm' && report.errno === 'EISDIR') return rmIsDirectoryError(given);
    const failedSyscall = kind === 'rm' && (report.errno === 'ENOENT' || report.errno === 'ENOTDIR') ? 'lstat' : syscall;
    return fsError(report.errno, failedSyscall, given, report.via === 'check' ? undefined : report.error);
  }
  let reason;
  if (outcome.spawnError) reason = `the safe-delete client could not run: ${outcome.spawnError.message}`;
  else if (outcome.status !== 1) reason = `the safe-delete client ended with status ${outcome.status}`;
  else reason = report.error || 'denied';
  return fsError('EACCES', syscall, given, reason);
}

/**
 * The brokered-shell CLI next to these shims hosts a broker (`run`, `serve`): its own
 * deletes must not be sent to a broker (at worst to itself). An agent that embeds the
 * broker as a library must not load this file into its process.
 */
function isBrokeredShellItself() {
  const script = process.argv[1];
  if (!script) return false;
  try {
    return fs.realpathSync(script) === fs.realpathSync(path.join(__dirname, '..', '..', 'bin', 'brokered-shell.js'));
  } catch {
    return false;
  }
}

function install() {
  if (process.env[GUARD] === '1' || fs[PATCHED] || isBrokeredShellItself()) return;
  const original = {
    unlink: fs.unlink,
    unlinkSync: fs.unlinkSync,
    rm: fs.rm,
    rmSync: fs.rmSync,
    rmdir: fs.rmdir,
    rmdirSync: fs.rmdirSync,
    promisesUnlink: fs.promises.unlink,
    promisesRm: fs.promises.rm,
    promisesRmdir: fs.promises.rmdir,
  };

  const flagsOf = (kind, options) => {
    const object = options !== null && typeof options === 'object' ? options : {};
    if (kind === 'unlink') return {};
    if (kind === 'rmdir') return { recursive: object.recursive === true };
    return { recursive: object.recursive === true, force: object.force === true };
  };

  const makeSync = (kind, originalFn) =>
    function safeDeleteSync(target, options) {
      const given = pathArgument(target);
      // An invalid path: Node's own function throws its usual TypeError, touching nothing.
      if (given === undefined) return originalFn.apply(this, arguments);
      if (given === null) throw fsError('EACCES', kind, String(target), 'safe-delete cannot pass a non-UTF-8 path to the broker');
      const error = safeDelete(kind, given, flagsOf(kind, options));
      if (error) throw error;
      return undefined;
    };

  const makeCallback = (kind, originalFn) =>
    function safeDeleteCallback(target, options, callback) {
      if (typeof options === 'function') {
        callback = options;
        options = undefined;
      }
      const given = pathArgument(target);
      if (given === undefined) return originalFn.apply(this, arguments);
      if (typeof callback !== 'function') throw invalidCallback(callback);
      const error =
        given === null
          ? fsError('EACCES', kind, String(target), 'safe-delete cannot pass a non-UTF-8 path to the broker')
          : safeDelete(kind, given, flagsOf(kind, options));
      process.nextTick(callback, error || null);
      return undefined;
    };

  const makePromise = (kind, originalFn) =>
    async function safeDeletePromise(target, options) {
      const given = pathArgument(target);
      if (given === undefined) return originalFn.apply(this, arguments);
      if (given === null) throw fsError('EACCES', kind, String(target), 'safe-delete cannot pass a non-UTF-8 path to the broker');
      const error = safeDelete(kind, given, flagsOf(kind, options));
      if (error) throw error;
      return undefined;
    };

  fs.unlinkSync = makeSync('unlink', original.unlinkSync);
  fs.rmSync = makeSync('rm', original.rmSync);
  fs.rmdirSync = makeSync('rmdir', original.rmdirSync);
  fs.unlink = makeCallback('unlink', original.unlink);
  fs.rm = makeCallback('rm', original.rm);
  fs.rmdir = makeCallback('rmdir', original.rmdir);
  fs.promises.unlink = makePromise('unlink', original.promisesUnlink);
  fs.promises.rm = makePromise('rm', original.promisesRm);
  fs.promises.rmdir = makePromise('rmdir', original.promisesRmdir);
  Object.defineProperty(fs, PATCHED, { value: original, enumerable: false });
  // `import { rm } from 'node:fs'` and 'node:fs/promises' see the wrapped functions too.
  syncBuiltinESMExports();
}

install();
