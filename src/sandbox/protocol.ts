/**
 * The binary protocol between the native supervisor (`brokered-sandbox`) and the
 * broker, as specified in native/sandbox/PROTOCOL.md. Little-endian frames, each
 * prefixed by its length. Every decoder here validates fully and reports problems
 * as values: garbage never throws out of this module.
 */

/** Operation codes; the same numbers as `enum bsh_op` in native/sandbox/sandbox.h. */
export const SandboxOp = {
  open: 1,
  truncate: 2,
  unlink: 3,
  rmdir: 4,
  rename: 5,
  link: 6,
  symlink: 7,
  mkdir: 8,
  mknod: 9,
  chmod: 10,
  chown: 11,
  utimes: 12,
  setxattr: 13,
  removexattr: 14,
  fileSetattr: 15,
} as const;
export type KernelOp = keyof typeof SandboxOp;
export type KernelOpCode = (typeof SandboxOp)[KernelOp];

const opNames = new Map<number, KernelOp>(
  (Object.keys(SandboxOp) as KernelOp[]).map((name) => [SandboxOp[name], name]),
);

/**
 * Not an operation: the supervisor reports a syscall it refused without asking (a
 * refused syscall, a refused argument, a call aimed at a process outside the sandbox).
 * The broker records it and acknowledges it; the answer's content is ignored.
 */
export const REFUSED_OP = 16;

/**
 * Not an operation either: the supervisor is done with a request the broker allowed
 * (performed it, or dropped it because its caller was gone). Never answered. Until it
 * arrives the broker runs no other change, so nothing renames or links onto a name
 * between the broker's check and the supervisor's operation.
 */
export const PERFORMED_OP = 17;

/** Ops whose request and answer carry a second path (`to`). */
export const TWO_PATH_OPS: ReadonlySet<KernelOp> = new Set<KernelOp>(['rename', 'link']);

/** One modifying syscall the supervisor wants decided. */
export interface KernelRequest {
  /** Request id, echoed in the answer. */
  id: number;
  op: KernelOp;
  /** Thread id of the caller. */
  pid: number;
  /** Process (thread group) id of the caller. */
  tgid: number;
  /** open(2) flags, rename flags or AT_* flags, depending on `op`. */
  flags: number;
  /** Requested mode (open/mkdir/mknod with type bits/chmod), before the umask. */
  mode: number;
  /** Whether the op follows a symlink in the final component of `path`. */
  follow: boolean;
  /** Absolute, lexical (`.` removed, `..` kept, links not resolved). */
  path: string;
  /** Second path of rename/link (lexical). */
  to?: string;
  /** Content of the symlink being created (not a path to check). */
  linkTarget?: string;
}

/** A syscall the supervisor refused itself, reported so the refusal is audited. */
export interface KernelRefusal {
  /** Request id: acknowledge it with an answer (its content is ignored). */
  id: number;
  /** Thread id and process id of the caller. */
  pid: number;
  tgid: number;
  /** The errno the syscall returns (EPERM, EACCES, EXDEV, ENOSYS). */
  errno: number;
  /** The syscall number, as seccomp saw it. */
  nr: number;
  /** Its name (`io_uring_setup`, `kill`, `x32-syscall-2`). */
  syscall: string;
  /** Why it was refused, for a person reading the audit log. */
  reason: string;
  /** The path the call named (absolute, lexical), when it named one. */
  path?: string;
}

/**
 * The broker's decision. Allowed: the resolved path(s) it checked, on which the
 * supervisor then acts. Denied: an errno (> 0) the syscall returns, usually EACCES.
 */
export type KernelAnswer = { errno: 0; path: string; to?: string; aside?: string } | { errno: number };

/**
 * Ops whose allow may carry `aside`: where the supervisor moves the file the op removes
 * (an unlink's path) or replaces (a rename's `to`) instead of deleting it.
 */
export const ASIDE_OPS: ReadonlySet<KernelOp> = new Set<KernelOp>(['unlink', 'rename']);

export const LENGTH_FIELD = 4;
/** Request: id, op, reserved, pid, tgid, flags, mode, follow, reserved[3]. */
export const REQUEST_FIXED = 28;
/** Answer: id, errno. */
export const ANSWER_FIXED = 8;
/** Longest string field in bytes (PATH_MAX less the NUL). */
export const MAX_STRING_BYTES = 4095;
/** Largest frame body either side accepts. */
export const MAX_FRAME_BODY = 16384;
const MIN_REQUEST_BODY = REQUEST_FIXED + 3 * 2;
const MIN_ANSWER_BODY = ANSWER_FIXED + 2 * 2;
const MAX_ERRNO = 4095;
/** Linux's EACCES: the answer to anything malformed. */
const EACCES = 13;

/** Splits a byte stream into frame bodies. `push` returns an error instead of throwing. */
export class FrameReader {
  #buffer: Buffer = Buffer.alloc(0);

  constructor(
    private readonly minBody: number,
    private readonly maxBody: number = MAX_FRAME_BODY,
  ) {}

  push(chunk: Buffer): { frames: Buffer[]; error?: string } {
    this.#buffer = this.#buffer.length === 0 ? chunk : Buffer.concat([this.#buffer, chunk]);
    const frames: Buffer[] = [];
    while (this.#buffer.length >= LENGTH_FIELD) {
      const length = this.#buffer.readUInt32LE(0);
      if (length < this.minBody || length > this.maxBody) {
        return { frames, error: `frame length ${length} outside ${this.minBody}..${this.maxBody}` };
      }
      if (this.#buffer.length < LENGTH_FIELD + length) break;
      frames.push(this.#buffer.subarray(LENGTH_FIELD, LENGTH_FIELD + length));
      this.#buffer = this.#buffer.subarray(LENGTH_FIELD + length);
    }
    return { frames };
  }
}

export const requestReader = (): FrameReader => new FrameReader(MIN_REQUEST_BODY);
export const answerReader = (): FrameReader => new FrameReader(MIN_ANSWER_BODY);

/** Strict UTF-8 without NUL, or undefined. */
function text(bytes: Buffer): string | undefined {
  const value = bytes.toString('utf8');
  if (!Buffer.from(value, 'utf8').equals(bytes) || value.includes('\0')) return undefined;
  return value;
}

function readStrings(body: Buffer, offset: number, count: number): string[] | undefined {
  const out: string[] = [];
  let at = offset;
  for (let i = 0; i < count; i++) {
    if (at + 2 > body.length) return undefined;
    const length = body.readUInt16LE(at);
    at += 2;
    if (length > MAX_STRING_BYTES || at + length > body.length) return undefined;
    const value = text(body.subarray(at, at + length));
    if (value === undefined) return undefined;
    out.push(value);
    at += length;
  }
  return at === body.length ? out : undefined;
}

export type DecodedRequest =
  | { ok: true; request: KernelRequest; refusal?: undefined; performed?: undefined }
  | { ok: true; refusal: KernelRefusal; request?: undefined; performed?: undefined }
  /** The id of an allowed request whose operation is over. */
  | { ok: true; performed: number; request?: undefined; refusal?: undefined }
  /** `id` is set when the frame was well delimited: answer it with a denial. */
  | { ok: false; id?: number; reason: string };

function decodeRefusal(body: Buffer, id: number): DecodedRequest {
  if (body.readUInt16LE(6) !== 0 || body.readUIntLE(24, 4) !== 0) return { ok: false, id, reason: 'reserved bytes are not zero' };
  const strings = readStrings(body, REQUEST_FIXED, 3);
  if (strings === undefined) return { ok: false, id, reason: 'bad string field' };
  const [path = '', to = '', text = ''] = strings;
  const errno = body.readUInt32LE(16);
  const space = text.indexOf(' ');
  const syscall = space < 0 ? text : text.slice(0, space);
  if (path !== '' && !path.startsWith('/')) return { ok: false, id, reason: 'path is not absolute' };
  if (to !== '' || syscall === '') return { ok: false, id, reason: 'malformed refusal' };
  if (errno < 1 || errno > MAX_ERRNO) return { ok: false, id, reason: 'refusal without an errno' };
  const refusal: KernelRefusal = {
    id,
    pid: body.readUInt32LE(8),
    tgid: body.readUInt32LE(12),
    errno,
    nr: body.readUInt32LE(20),
    syscall,
    reason: space < 0 ? `${syscall} is refused in the sandbox` : text,
  };
  if (path !== '') refusal.path = path;
  return { ok: true, refusal };
}

/** Everything but the id and op is zero, and the three strings are empty; no id on failure (nothing answers it). */
function decodePerformed(body: Buffer, id: number): DecodedRequest {
  // From the reserved field on, every byte is zero: the fields and the three strings' lengths.
  if (body.length !== MIN_REQUEST_BODY || body.subarray(6).some((byte) => byte !== 0)) return { ok: false, reason: 'malformed performed notice' };
  return { ok: true, performed: id };
}

/** Decodes one request body (the bytes after the length field). */
export function decodeRequest(body: Buffer): DecodedRequest {
  if (body.length < MIN_REQUEST_BODY) return { ok: false, reason: 'request too short' };
  const id = body.readUInt32LE(0);
  if (body.readUInt16LE(4) === REFUSED_OP) return decodeRefusal(body, id);
  if (body.readUInt16LE(4) === PERFORMED_OP) return decodePerformed(body, id);
  const op = opNames.get(body.readUInt16LE(4));
  if (op === undefined) return { ok: false, id, reason: `unknown op ${body.readUInt16LE(4)}` };
  const follow = body.readUInt8(24);
  if (body.readUInt16LE(6) !== 0 || follow > 1 || body.readUIntLE(25, 3) !== 0) {
    return { ok: false, id, reason: 'reserved bytes are not zero' };
  }
  const strings = readStrings(body, REQUEST_FIXED, 3);
  if (strings === undefined) return { ok: false, id, reason: 'bad string field' };
  const [path = '', to = '', linkTarget = ''] = strings;
  if (!path.startsWith('/')) return { ok: false, id, reason: 'path is not absolute' };
  if (TWO_PATH_OPS.has(op) !== (to !== '')) return { ok: false, id, reason: 'second path mismatch' };
  const request: KernelRequest = {
    id,
    op,
    pid: body.readUInt32LE(8),
    tgid: body.readUInt32LE(12),
    flags: body.readUInt32LE(16),
    mode: body.readUInt32LE(20),
    follow: follow === 1,
    path,
  };
  if (to !== '') request.to = to;
  if (linkTarget !== '') request.linkTarget = linkTarget;
  return { ok: true, request };
}

function stringField(value: string): Buffer {
  const bytes = Buffer.from(value, 'utf8');
  if (bytes.length > MAX_STRING_BYTES) throw new RangeError('string field too long');
  const head = Buffer.alloc(2);
  head.writeUInt16LE(bytes.length);
  return Buffer.concat([head, bytes]);
}

function frame(fixed: Buffer, strings: string[]): Buffer {
  const body = Buffer.concat([fixed, ...strings.map(stringField)]);
  const head = Buffer.alloc(LENGTH_FIELD);
  head.writeUInt32LE(body.length);
  return Buffer.concat([head, body]);
}

/** A request frame as the supervisor writes it (for tests and tools). */
export function encodeRequest(request: KernelRequest): Buffer {
  const fixed = Buffer.alloc(REQUEST_FIXED);
  fixed.writeUInt32LE(request.id, 0);
  fixed.writeUInt16LE(SandboxOp[request.op], 4);
  fixed.writeUInt32LE(request.pid, 8);
  fixed.writeUInt32LE(request.tgid, 12);
  fixed.writeUInt32LE(request.flags >>> 0, 16);
  fixed.writeUInt32LE(request.mode >>> 0, 20);
  fixed.writeUInt8(request.follow ? 1 : 0, 24);
  return frame(fixed, [request.path, request.to ?? '', request.linkTarget ?? '']);
}

/** A performed notice as the supervisor writes it (for tests and tools). */
export function encodePerformed(id: number): Buffer {
  const fixed = Buffer.alloc(REQUEST_FIXED);
  fixed.writeUInt32LE(id, 0);
  fixed.writeUInt16LE(PERFORMED_OP, 4);
  return frame(fixed, ['', '', '']);
}

/** A refusal frame as the supervisor writes it (for tests and tools). */
export function encodeRefusal(refusal: KernelRefusal): Buffer {
  const fixed = Buffer.alloc(REQUEST_FIXED);
  fixed.writeUInt32LE(refusal.id, 0);
  fixed.writeUInt16LE(REFUSED_OP, 4);
  fixed.writeUInt32LE(refusal.pid, 8);
  fixed.writeUInt32LE(refusal.tgid, 12);
  fixed.writeUInt32LE(refusal.errno >>> 0, 16);
  fixed.writeUInt32LE(refusal.nr >>> 0, 20);
  const text = refusal.reason.startsWith(`${refusal.syscall} `) ? refusal.reason : `${refusal.syscall} ${refusal.reason}`;
  return frame(fixed, [refusal.path ?? '', '', text]);
}

function isAbsolutePathText(value: unknown): value is string {
  return (
    typeof value === 'string' &&
    value.startsWith('/') &&
    !value.includes('\0') &&
    Buffer.byteLength(value, 'utf8') <= MAX_STRING_BYTES
  );
}

/**
 * Turns whatever an `onRequest` handler returned into a valid answer for `op`.
 * Anything malformed (wrong errno, missing or relative path, a `to` where none
 * belongs) becomes EACCES: a broken handler never allows by accident.
 */
export function normalizeAnswer(op: KernelOp, answer: unknown): KernelAnswer {
  const denied = { errno: EACCES };
  if (typeof answer !== 'object' || answer === null) return denied;
  const errno: unknown = Reflect.get(answer, 'errno');
  if (typeof errno !== 'number' || !Number.isInteger(errno)) return denied;
  if (errno > 0 && errno <= MAX_ERRNO) return { errno };
  if (errno !== 0) return denied;
  const path: unknown = Reflect.get(answer, 'path');
  const to: unknown = Reflect.get(answer, 'to');
  if (!isAbsolutePathText(path)) return denied;
  const aside: unknown = Reflect.get(answer, 'aside');
  if (aside !== undefined && aside !== '' && !(ASIDE_OPS.has(op) && isAbsolutePathText(aside))) return denied;
  const kept = typeof aside === 'string' && aside !== '' ? { aside } : {};
  if (TWO_PATH_OPS.has(op)) return isAbsolutePathText(to) ? { errno: 0, path, to, ...kept } : denied;
  return to === undefined || to === '' ? { errno: 0, path, ...kept } : denied;
}

/** An answer frame. The answer must be normalized first (see normalizeAnswer). */
export function encodeAnswer(id: number, answer: KernelAnswer): Buffer {
  const fixed = Buffer.alloc(ANSWER_FIXED);
  fixed.writeUInt32LE(id >>> 0, 0);
  fixed.writeInt32LE(answer.errno, 4);
  if (answer.errno !== 0 || !('path' in answer)) return frame(fixed, ['', '']);
  // The third string only when there is one: an answer without it reads as before.
  return frame(fixed, answer.aside ? [answer.path, answer.to ?? '', answer.aside] : [answer.path, answer.to ?? '']);
}

export type DecodedAnswer = { ok: true; id: number; answer: KernelAnswer } | { ok: false; reason: string };

/** Decodes one answer body (for tests and tools standing in for the supervisor). */
export function decodeAnswer(body: Buffer): DecodedAnswer {
  if (body.length < MIN_ANSWER_BODY) return { ok: false, reason: 'answer too short' };
  const id = body.readUInt32LE(0);
  const errno = body.readInt32LE(4);
  const strings = readStrings(body, ANSWER_FIXED, 2) ?? readStrings(body, ANSWER_FIXED, 3);
  if (strings === undefined) return { ok: false, reason: 'bad string field' };
  const [path = '', to = '', aside = ''] = strings;
  if (errno !== 0) return { ok: true, id, answer: { errno } };
  const answer: KernelAnswer = to === '' ? { errno: 0, path } : { errno: 0, path, to };
  if (aside !== '') Object.assign(answer, { aside });
  return { ok: true, id, answer };
}
