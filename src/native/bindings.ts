import type {
  KernelProbe,
  PeerCredentials,
  RenameAtOptions,
  UnlinkAtOptions,
  UtimeValue,
} from './types.js';

/**
 * The addon's surface. Every function is synchronous (one fast syscall, or a bounded
 * probe) and throws a {@link NativeErrnoError} on failure.
 *
 * Directory arguments (`dir`, `fromDir`, `toDir`) must be absolute; each is opened with
 * openat2(RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS), so a symlink anywhere in it fails
 * with ELOOP. Name arguments must be one path component (not '', '.', '..', no '/':
 * EINVAL) and are never followed.
 */
export interface NativeBinding {
  /** SO_PEERCRED of a connected Unix socket fd. */
  peerCredentials(fd: number): PeerCredentials;

  /** Names of the extended attributes of `path` (of a symlink itself when `noFollow`). */
  listXattrs(path: string, noFollow?: boolean): string[];
  getXattr(path: string, name: string, noFollow?: boolean): Buffer;
  /** Creates or replaces the attribute. */
  setXattr(path: string, name: string, value: Buffer, noFollow?: boolean): void;
  removeXattr(path: string, name: string, noFollow?: boolean): void;

  /** unlinkat; `directory` removes an empty directory. */
  unlinkAt(dir: string, name: string, options?: UnlinkAtOptions): void;
  /** renameat2; crossing file systems fails with code 'EXDEV'. */
  renameAt(fromDir: string, fromName: string, toDir: string, toName: string, options?: RenameAtOptions): void;
  mkdirAt(dir: string, name: string, mode: number): void;
  /**
   * mknodat of a FIFO, socket or device node; then, through an O_PATH descriptor of what
   * was made (checked to be that fresh node: a name swapped in meanwhile fails with
   * EEXIST), fchownat (-1 keeps the caller's uid or gid), the xattrs and fchmodat2: `mode`
   * is exact. Returns the node's device and inode.
   */
  mknodAt(
    dir: string,
    name: string,
    type: 'fifo' | 'socket' | 'char-device' | 'block-device',
    mode: number,
    rdev: number,
    uid: number,
    gid: number,
    xattrs?: Array<[string, Buffer]>,
  ): { dev: bigint; ino: bigint };
  /** Hard link; a symlink source is linked as the symlink itself. */
  linkAt(fromDir: string, fromName: string, toDir: string, toName: string): void;
  symlinkAt(target: string, dir: string, name: string): void;
  /** fchmodat2 with AT_SYMLINK_NOFOLLOW: on a symlink it fails (EOPNOTSUPP) and changes nothing. */
  chmodAt(dir: string, name: string, mode: number): void;
  /** fchownat with AT_SYMLINK_NOFOLLOW; -1 keeps the current uid or gid. */
  chownAt(dir: string, name: string, uid: number, gid: number): void;
  /** utimensat with AT_SYMLINK_NOFOLLOW; see {@link UtimeValue}. */
  utimesAt(dir: string, name: string, atime: UtimeValue, mtime: UtimeValue): void;

  /**
   * openat2(AT_FDCWD, path, { flags | O_CLOEXEC, mode, RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS }).
   * `path` must be absolute; no component, the final one included, may be a symlink.
   * Returns an fd the caller closes with `fs.closeSync`. `mode` applies only with O_CREAT/O_TMPFILE.
   */
  openNoSymlinks(path: string, flags: number, mode?: number): number;

  /**
   * Whether a descriptor of the file behind `fd` (which must be open read-only) is open
   * for writing anywhere, writable shared mappings included: a read lease taken and let go
   * at once. Throws when the kernel cannot tell (EPERM: not the file's owner; EINVAL: no
   * leases on that file system).
   */
  heldForWriting(fd: number): boolean;

  /** Asks the running kernel what it supports (forks two short-lived probe children). */
  probeKernel(): KernelProbe;

  /**
   * One non-blocking sendmsg on a connected Unix stream socket: `data` (not empty) with
   * `fd` attached (SCM_RIGHTS) to its first byte. Returns the bytes sent (the rest is
   * the caller's to send, without the fd); throws EAGAIN when the socket is full. The
   * caller keeps `fd` (the receiver gets its own copy). On a socket that Node also
   * writes to, call it only when Node has nothing queued, or the bytes overtake.
   */
  sendWithFd(socketFd: number, data: Buffer, fd: number): number;

  /**
   * The path walk's common case in one call (src/plugins/path-resolution/walk.ts): an
   * absolute path without `.`, `..`, symlinks or /proc, looked up once by openat2 with
   * RESOLVE_NO_SYMLINKS. Returns `nlink * 65536 + st_mode` of the final component, -1 when
   * only the final name is missing and `allowMissingFinal`, -2 for anything else (the JS
   * walk decides those).
   */
  walkPlain(path: string, allowMissingFinal?: boolean): number;
  /** The same answer by an lstat per component: what `walkPlain` does where openat2 is missing. */
  walkPlainByLstat(path: string, allowMissingFinal?: boolean): number;

  /** tcflush(fd, TCIFLUSH): drops input typed on a terminal and not read yet (ENOTTY on anything else). */
  flushTerminalInput(fd: number): void;
}

/** Every function name of the binding; the Record type makes the compiler check it is complete. */
const bindingFunctions: Record<keyof NativeBinding, true> = {
  peerCredentials: true,
  listXattrs: true,
  getXattr: true,
  setXattr: true,
  removeXattr: true,
  unlinkAt: true,
  renameAt: true,
  mkdirAt: true,
  mknodAt: true,
  linkAt: true,
  symlinkAt: true,
  chmodAt: true,
  chownAt: true,
  utimesAt: true,
  openNoSymlinks: true,
  heldForWriting: true,
  probeKernel: true,
  sendWithFd: true,
  walkPlain: true,
  flushTerminalInput: true,
  walkPlainByLstat: true,
};

export const BINDING_FUNCTION_NAMES: readonly string[] = Object.freeze(Object.keys(bindingFunctions));

/** The names a loaded module lacks (a stale build loads but misses newer functions). */
export function missingBindingFunctions(value: unknown): string[] {
  if (typeof value !== 'object' || value === null) return [...BINDING_FUNCTION_NAMES];
  return BINDING_FUNCTION_NAMES.filter((name) => typeof Reflect.get(value, name) !== 'function');
}

export function isNativeBinding(value: unknown): value is NativeBinding {
  return missingBindingFunctions(value).length === 0;
}
