#!/usr/bin/env node
'use strict';
/**
 * brokered-shell safe-delete client.
 *
 *   node broker-delete.cjs [OPTION]... [--] PATH...
 *
 * Asks the broker on $BROKERED_SHELL_SOCKET to delete each PATH with one JSON
 * HostFileOperation delete (deleteMode "trash") per path: the broker checks its policy,
 * backs the file up and moves it to the freedesktop trash. Paths are made absolute
 * against the cwd but not resolved; the broker resolves them. Nothing here ever deletes
 * permanently.
 *
 *   (no option)   like unlink(2)/rm: a directory is refused (EISDIR)
 *   --dir         like rm -d: an empty directory is accepted too
 *   --recursive   like rm -r: directories with everything in them
 *   --rmdir       like rmdir(2): only directories (ENOTDIR otherwise), empty unless --recursive
 *   --force       a missing path is not an error
 *   --local       no broker: move the paths to the freedesktop trash here, with the
 *                 project's own trash code (dist/trash); used as the fallback after exit 2
 *   --quiet       say nothing on success; failures, denials and fallbacks are still said
 *   --verbose     print rm -v's "removed 'PATH'" lines on stdout
 *   --json        one JSON object per path on stdout (path, absolutePath, via, outcome,
 *                 errno, error, trashedTo); ordinary file errors are left to the caller
 *
 * Exit status:
 *   0  every path is in the trash (or, with --force, did not exist)
 *   1  denied or failed, including a broker that accepted the connection but did not
 *      answer within $BROKERED_SHELL_CLIENT_TIMEOUT_MS (default 10000): fail closed, no
 *      fallback; the reason is on stderr
 *   2  broker unreachable (BROKERED_SHELL_SOCKET unset or empty, no socket there, or
 *      connection refused) before any path was sent: nothing was deleted, the caller may
 *      run the same command again with --local
 *
 * Every path is tried even after one fails, as rm does. CommonJS and Node built-ins only,
 * so any `node` runs it without the project's build (only --local needs dist/trash).
 */

const net = require('node:net');
const fs = require('node:fs');
const path = require('node:path');
const crypto = require('node:crypto');
const { pathToFileURL } = require('node:url');

const PREFIX = 'brokered-shell safe-delete:';
const DEFAULT_TIMEOUT_MS = 10_000;
/** Connection errors that mean "nobody is there": the caller may fall back. */
const UNREACHABLE = new Set(['ENOENT', 'ENOTDIR', 'ECONNREFUSED']);
const USAGE = 'usage: broker-delete.cjs [--recursive] [--force] [--dir] [--rmdir] [--local] [--quiet] [--verbose] [--json] [--] PATH...';

const EXIT = { OK: 0, FAILED: 1, UNREACHABLE: 2 };

function parseArgs(argv) {
  const options = { recursive: false, force: false, dir: false, rmdir: false, local: false, quiet: false, json: false, verbose: false };
  const paths = [];
  let optionsDone = false;
  for (const arg of argv) {
    if (optionsDone || arg === '-' || !arg.startsWith('-')) {
      paths.push(arg);
      continue;
    }
    switch (arg) {
      case '--':
        optionsDone = true;
        break;
      case '--recursive':
        options.recursive = true;
        break;
      case '--force':
        options.force = true;
        break;
      case '--dir':
        options.dir = true;
        break;
      case '--rmdir':
        options.rmdir = true;
        break;
      case '--local':
        options.local = true;
        break;
      case '--quiet':
        options.quiet = true;
        break;
      case '--json':
        options.json = true;
        break;
      case '--verbose':
        options.verbose = true;
        break;
      default:
        return { error: `unknown option ${JSON.stringify(arg)}` };
    }
  }
  if (paths.length === 0) return { error: 'no path given' };
  if (paths.some((p) => p === '')) return { error: 'an empty path cannot be deleted' };
  return { options, paths };
}

/** Absolute against the cwd, but not resolved: the broker resolves links and `..` itself. */
function absolute(given) {
  if (given.startsWith('/')) return given;
  const cwd = process.cwd();
  return `${cwd.endsWith('/') ? cwd : `${cwd}/`}${given}`;
}

function quote(p) {
  return `'${p}'`;
}

/** The last component after trailing slashes are dropped ("/" stays "/"). */
function lastComponent(p) {
  const trimmed = p.replace(/\/+$/, '');
  if (trimmed === '') return '/';
  return trimmed.slice(trimmed.lastIndexOf('/') + 1);
}

function failure(errno, error) {
  return { outcome: 'failed', errno, error };
}

/**
 * What the caller's command would refuse before touching anything (rm's EISDIR, rmdir's
 * ENOTDIR/ENOTEMPTY, a missing file), checked with lstat only. Returns a finished result,
 * or undefined when the path should go to the broker (or the local trash).
 */
function precheck(given, abs, options) {
  const last = lastComponent(given);
  if (last === '/') return failure('EPERM', `refusing to delete ${quote('/')}`);
  if (last === '.' || last === '..') return failure('EINVAL', `refusing to delete ${quote(given)}: it names '.' or '..'`);
  let info;
  try {
    info = fs.lstatSync(abs);
  } catch (error) {
    const code = error && error.code;
    if (code === 'ENOENT' || code === 'ENOTDIR') {
      if (options.force && !options.rmdir) return { outcome: 'absent' };
      return failure(code, code === 'ENOENT' ? 'No such file or directory' : 'Not a directory');
    }
    // Anything else (EACCES, ELOOP, …): let the broker or the trash decide and report.
    return undefined;
  }
  const isDir = info.isDirectory();
  if (options.rmdir && !isDir) return failure('ENOTDIR', 'Not a directory');
  if (isDir && !options.recursive) {
    if (!options.dir && !options.rmdir) return failure('EISDIR', 'Is a directory');
    let empty = true;
    try {
      empty = fs.readdirSync(abs).length === 0;
    } catch {
      // Unreadable: the broker checks again.
    }
    if (!empty) return failure('ENOTEMPTY', 'Directory not empty');
  }
  return undefined;
}

function timeoutMs() {
  const value = Number(process.env.BROKERED_SHELL_CLIENT_TIMEOUT_MS);
  return Number.isFinite(value) && value > 0 ? value : DEFAULT_TIMEOUT_MS;
}

/**
 * One request on one connection. Resolves to a result; never rejects.
 * `unreachable` only when the connection itself could not be made.
 */
function askBroker(socketPath, request, limitMs) {
  return new Promise((resolve) => {
    let settled = false;
    let connected = false;
    let buffer = '';
    const client = net.createConnection(socketPath);
    const finish = (result) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      client.destroy();
      resolve(result);
    };
    const timer = setTimeout(() => {
      finish({
        outcome: 'failed',
        error: connected
          ? `the broker at ${socketPath} accepted the connection but did not answer within ${limitMs} ms`
          : `the connection to the broker at ${socketPath} did not complete within ${limitMs} ms`,
        timeout: true,
      });
    }, limitMs);
    client.setEncoding('utf8');
    client.on('connect', () => {
      connected = true;
      client.write(`${JSON.stringify(request)}\n`);
    });
    client.on('data', (chunk) => {
      buffer += chunk;
      const end = buffer.indexOf('\n');
      if (end < 0) {
        if (buffer.length > 1 << 20) finish({ outcome: 'failed', error: 'the broker sent an oversized answer' });
        return;
      }
      finish(interpretAnswer(buffer.slice(0, end), request.id));
    });
    client.on('end', () => finish({ outcome: 'failed', error: 'the broker closed the connection without answering' }));
    client.on('close', () => finish({ outcome: 'failed', error: 'the broker closed the connection without answering' }));
    client.on('error', (error) => {
      const code = error && error.code;
      if (!connected && UNREACHABLE.has(code)) {
        finish({ outcome: 'unreachable', error: `cannot connect to ${socketPath}: ${code}` });
      } else {
        finish({ outcome: 'failed', error: `talking to the broker at ${socketPath} failed: ${error.message}` });
      }
    });
  });
}

function interpretAnswer(line, id) {
  let answer;
  try {
    answer = JSON.parse(line);
  } catch {
    return { outcome: 'failed', error: `the broker's answer is not JSON: ${line.slice(0, 200)}` };
  }
  if (typeof answer !== 'object' || answer === null || Array.isArray(answer)) {
    return { outcome: 'failed', error: "the broker's answer is not a JSON object" };
  }
  if (answer.id !== undefined && answer.id !== id) {
    return { outcome: 'failed', error: `the broker answered another request (${JSON.stringify(answer.id)})` };
  }
  const error = typeof answer.error === 'string' ? answer.error : undefined;
  const errno = typeof answer.errno === 'string' ? answer.errno : undefined;
  if (answer.ok === true) {
    // No trashedTo: there was nothing to move (a missing path with force).
    return typeof answer.trashedTo === 'string' ? { outcome: 'trashed', trashedTo: answer.trashedTo } : { outcome: 'done' };
  }
  if (answer.decision === 'deny') {
    return { outcome: 'denied', error: error ?? 'denied by the broker', ...(errno ? { errno } : {}) };
  }
  return {
    outcome: 'failed',
    error: error ?? 'the broker could not delete it',
    ...(errno ? { errno } : {}),
    ...(typeof answer.errorCode === 'string' ? { errorCode: answer.errorCode } : {}),
  };
}

let counter = 0;
function requestId() {
  counter += 1;
  return `safe-delete-${process.pid}-${counter}-${crypto.randomUUID()}`;
}

function deleteRequest(abs, options) {
  const env = process.env;
  return {
    id: requestId(),
    command: 'HostFileOperation',
    operation: 'delete',
    path: abs,
    recursive: options.recursive,
    force: options.force,
    deleteMode: 'trash',
    sessionId: env.BROKERED_SHELL_SESSION_ID ?? '',
    ...(env.BROKERED_SHELL_TOOL_CALL_ID ? { toolCallId: env.BROKERED_SHELL_TOOL_CALL_ID } : {}),
    ...(env.BROKERED_SHELL_TRACE_ID ? { brokerTraceId: env.BROKERED_SHELL_TRACE_ID } : {}),
  };
}

let trashModule;
async function loadTrash() {
  if (trashModule) return trashModule;
  const file = path.join(__dirname, '..', '..', 'dist', 'trash', 'index.js');
  try {
    trashModule = await import(pathToFileURL(file).href);
  } catch (error) {
    throw new Error(
      `cannot load the trash implementation ${file} (${error && error.message ? error.message : String(error)}); build it with: npx tsc -p tsconfig.build.json`,
    );
  }
  if (typeof trashModule.moveToTrash !== 'function') throw new Error(`${file} has no moveToTrash`);
  return trashModule;
}

function errnoOf(error) {
  if (!error || typeof error !== 'object') return undefined;
  if (typeof error.errno === 'string' && /^E[A-Z0-9]+$/.test(error.errno)) return error.errno;
  if (typeof error.code === 'string' && /^E[A-Z0-9]+$/.test(error.code)) return error.code;
  return errnoOf(error.cause);
}

async function trashLocally(abs) {
  let trash;
  try {
    trash = await loadTrash();
  } catch (error) {
    return { outcome: 'failed', error: error.message };
  }
  try {
    const item = await trash.moveToTrash(abs, { env: process.env });
    return { outcome: 'trashed', trashedTo: item.trashedPath };
  } catch (error) {
    const errno = errnoOf(error);
    return { outcome: 'failed', error: error && error.message ? error.message : String(error), ...(errno ? { errno } : {}) };
  }
}

/**
 * Output is held back until the broker has answered once: if it then turns out to be
 * unreachable (exit 2), the caller re-runs everything with --local, which reports the
 * same paths again, so what was held is dropped instead of being said twice.
 */
class Output {
  constructor() {
    this.held = [];
    this.holding = true;
  }
  write(stream, text) {
    if (this.holding) this.held.push([stream, text]);
    else stream.write(text);
  }
  release() {
    this.holding = false;
    for (const [stream, text] of this.held) stream.write(text);
    this.held = [];
  }
  drop() {
    this.held = [];
  }
}

/** One line on stderr per outcome; --quiet keeps only what the caller must not miss. */
function describe(options, given, result, via, socketVariableSet) {
  const quiet = options.quiet || options.json;
  switch (result.outcome) {
    case 'trashed':
      if (quiet) return undefined;
      return via === 'broker'
        ? `moved ${quote(given)} to the trash (${result.trashedTo}); the broker backed it up`
        : `moved ${quote(given)} to the local trash (${result.trashedTo}) without the broker: no policy check, no backup`;
    case 'absent':
      return quiet ? undefined : `${quote(given)} does not exist; nothing to delete`;
    case 'done':
      return quiet ? undefined : `the broker found nothing to move to the trash for ${quote(given)}`;
    case 'denied':
      return `denied: ${quote(given)} was not deleted: ${result.error}`;
    case 'unreachable':
      // An unset variable is a normal state outside a broker; a dead socket is news.
      if (quiet && !socketVariableSet) return undefined;
      return `broker unreachable (${result.error}); nothing was sent, ${quote(given)} is untouched`;
    default:
      // --json callers raise their own error for ordinary file-system failures.
      if (options.json && result.errno && !result.timeout) return undefined;
      return result.timeout
        ? `${result.error}; ${quote(given)} was not deleted (failing closed, no fallback)`
        : `cannot delete ${quote(given)}: ${result.error}`;
  }
}

function emit(output, options, item, socketVariableSet) {
  const { given, abs, result, via, wasDir } = item;
  const line = describe(options, given, result, via, socketVariableSet);
  if (line) output.write(process.stderr, `${PREFIX} ${line}\n`);
  if (options.verbose && result.outcome === 'trashed') {
    // rm -v's own words, on stdout like rm.
    output.write(process.stdout, wasDir ? `removed directory ${quote(given)}\n` : `removed ${quote(given)}\n`);
  }
  if (options.json) {
    const { timeout, ...rest } = result;
    output.write(process.stdout, `${JSON.stringify({ path: given, absolutePath: abs, via, ...rest, ...(timeout ? { timeout: true } : {}) })}\n`);
  }
}

function isDirectory(abs) {
  try {
    return fs.lstatSync(abs).isDirectory();
  } catch {
    return false;
  }
}

async function main(argv) {
  const parsed = parseArgs(argv);
  if (parsed.error) {
    process.stderr.write(`${PREFIX} ${parsed.error}\n${USAGE}\n`);
    return EXIT.FAILED;
  }
  const { options, paths } = parsed;
  const socketPath = process.env.BROKERED_SHELL_SOCKET ?? '';
  const socketVariableSet = socketPath !== '';
  const limit = timeoutMs();
  const output = new Output();
  // --local cannot come back with "unreachable": nothing to hold back.
  if (options.local) output.release();
  let status = EXIT.OK;

  for (let index = 0; index < paths.length; index += 1) {
    const given = paths[index];
    const abs = absolute(given);
    let result = precheck(given, abs, options);
    let via = 'check';
    const wasDir = !result && options.verbose && isDirectory(abs);
    if (!result) {
      if (options.local) {
        via = 'local';
        result = await trashLocally(abs);
      } else {
        via = 'broker';
        result = socketVariableSet
          ? await askBroker(socketPath, deleteRequest(abs, options), limit)
          : { outcome: 'unreachable', error: 'BROKERED_SHELL_SOCKET is not set' };
      }
    }
    const item = { given, abs, result, via, wasDir };
    if (result.outcome === 'unreachable') {
      if (output.holding) {
        // Nothing was sent to any broker yet: the caller may redo the whole list locally.
        output.drop();
        output.release();
        emit(output, options, item, socketVariableSet);
        return EXIT.UNREACHABLE;
      }
      // The broker went away mid-list: what it already did stands, the rest fails closed.
      emit(output, options, item, socketVariableSet);
      output.write(process.stderr, `${PREFIX} the broker went away; ${paths.length - index} path(s) were not deleted (failing closed)\n`);
      return EXIT.FAILED;
    }
    if (via === 'broker') output.release();
    emit(output, options, item, socketVariableSet);
    if (result.outcome === 'denied' || result.outcome === 'failed') status = EXIT.FAILED;
  }
  output.release();
  return status;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error) => {
    process.stderr.write(`${PREFIX} internal error, nothing more deleted: ${error && error.stack ? error.stack : String(error)}\n`);
    process.exitCode = EXIT.FAILED;
  },
);
