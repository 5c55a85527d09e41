import { constants, promises as fs } from 'node:fs';
import { basename, dirname } from 'node:path';
import { native, type NativeBinding, type TimeSpec } from '../../native/index.js';

/**
 * The host's file operations on already-resolved paths, race-free: the parent directory
 * is opened without following any symlink and the final component is never followed,
 * so a link swapped in after the policy check fails instead of redirecting the change.
 */
export interface SplitPath {
  dir: string;
  name: string;
}

export function split(path: string): SplitPath {
  return { dir: dirname(path), name: basename(path) };
}

/** An Error shaped like Node's fs errors (`code` is the errno name), for failures we detect ourselves. */
export function fsError(code: string, message: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`${code}: ${message}`), { code });
}

/** Seconds since the epoch (fractional, maybe negative) as a timespec with nsec in [0, 1e9). */
export function timeSpecOf(seconds: number): TimeSpec {
  let sec = Math.floor(seconds);
  // floor, not %, so times before 1970 keep a non-negative nsec; rounding may reach 1e9.
  let nsec = Math.round((seconds - sec) * 1e9);
  if (nsec >= 1e9) {
    sec += 1;
    nsec -= 1e9;
  }
  return { sec, nsec };
}

/**
 * The names in a directory. Read as bytes: a name that is not valid UTF-8 would be
 * decoded into a different name, so it is refused (EILSEQ) rather than misnamed.
 */
export async function listNames(dir: string): Promise<string[]> {
  return (await fs.readdir(dir, { encoding: 'buffer' })).map((bytes) => {
    const name = bytes.toString('utf8');
    if (!Buffer.from(name, 'utf8').equals(bytes)) throw fsError('EILSEQ', `a name in ${dir} is not valid UTF-8`);
    return name;
  });
}

export class FsAt {
  readonly #native: NativeBinding;

  constructor(binding: NativeBinding = native()) {
    this.#native = binding;
  }

  unlink(path: string, directory = false): void {
    const { dir, name } = split(path);
    this.#native.unlinkAt(dir, name, { directory });
  }

  rename(from: string, to: string, options: { noReplace?: boolean } = {}): void {
    const a = split(from);
    const b = split(to);
    this.#native.renameAt(a.dir, a.name, b.dir, b.name, options);
  }

  mkdir(path: string, mode: number): void {
    const { dir, name } = split(path);
    this.#native.mkdirAt(dir, name, mode);
  }

  link(from: string, to: string): void {
    const a = split(from);
    const b = split(to);
    this.#native.linkAt(a.dir, a.name, b.dir, b.name);
  }

  symlink(content: string, at: string): void {
    const { dir, name } = split(at);
    this.#native.symlinkAt(content, dir, name);
  }

  chmod(path: string, mode: number): void {
    const { dir, name } = split(path);
    this.#native.chmodAt(dir, name, mode);
  }

  /** Seconds since the epoch; an absent time means now. */
  utimes(path: string, atime: number | undefined, mtime: number | undefined): void {
    const { dir, name } = split(path);
    const spec = (seconds: number | undefined) => (seconds === undefined ? null : timeSpecOf(seconds));
    this.#native.utimesAt(dir, name, spec(atime), spec(mtime));
  }

  /** Open without following any symlink; the caller owns (and closes) the fd. */
  open(path: string, flags: number, mode = 0o666): number {
    return this.#native.openNoSymlinks(path, flags, mode);
  }

  /** A directory opened for reading without following any symlink; the caller closes it. */
  openDirectory(path: string): number {
    return this.open(path, constants.O_RDONLY | constants.O_DIRECTORY);
  }
}
