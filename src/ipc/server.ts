import { isUtf8 } from 'node:buffer';
import { closeSync } from 'node:fs';
import { chmod } from 'node:fs/promises';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { ErrorCodes, errnoOf, type Broker, type Logger, type Peer } from '../core/index.js';
import { native, socketFd } from '../native/index.js';
import { auditRefusal } from '../plugins/audit.js';
import { AnswerFlow } from './answer-flow.js';
import { formatJsonAnswer, parseJsonRequest, type JsonAnswer } from './json-protocol.js';
import { LineSplitter } from './line-splitter.js';
import { prepareSocketPath } from './socket-dir.js';
import { TEXT_DENY, formatTextAnswer, looksLikeTextRequest, parseTextRequest, textAnswerFd } from './text-protocol.js';

export interface BrokerServerOptions {
  broker: Broker;
  socketPath: string;
  /** Longest accepted line; a longer one is answered with an error and the connection closed. */
  maxLineBytes?: number;
  /** A half-written line older than this closes the connection. */
  partialLineTimeoutMs?: number;
  /** A connection with nothing to do for this long is closed. */
  idleTimeoutMs?: number;
  /** Lines waiting for their answer on one connection before it is considered a flood. */
  maxQueuedLines?: number;
  /**
   * Bytes of lines waiting for their answer on one connection past which it is not read
   * from until they are answered (the client's writes then wait in the kernel).
   */
  maxQueuedBytes?: number;
  /**
   * Bytes of answers waiting for a client to read them past which its connection is not
   * read from, and answers no more, until it reads (see AnswerFlow).
   */
  maxUnsentBytes?: number;
  /** How long a connection may keep its answers over `maxUnsentBytes` before it is dropped. */
  unreadGraceMs?: number;
  maxConnections?: number;
  /** Who is at the other end (SO_PEERCRED); absent means unknown. */
  peerCredentials?: (socket: net.Socket) => Peer | undefined;
  /**
   * Writes `data` with `fd` attached (SCM_RIGHTS) on the socket, returning the bytes
   * sent; for `FD` answers (default: the addon's sendWithFd on the socket's fd).
   */
  sendWithFd?: (socket: net.Socket, data: Buffer, fd: number) => number;
  logger?: Logger;
}

/** An answer line that carries a descriptor the broker opened (the `FD` answer). */
interface FdAnswer {
  line: string;
  fd: number;
}

const DEFAULTS = {
  maxLineBytes: 64 * 1024,
  partialLineTimeoutMs: 10_000,
  idleTimeoutMs: 10 * 60_000,
  maxQueuedLines: 1024,
  maxQueuedBytes: 1024 * 1024,
  // Four times Node's own high-water mark: a client reading its answers at its own pace
  // never reaches it, and 512 connections stalled at once hold 32 MiB at most.
  maxUnsentBytes: 64 * 1024,
  // A stalled connection costs its bound and a connection slot, nothing else: long enough
  // for a client that is busy, swapped out or briefly stopped, far shorter than idleTimeoutMs.
  unreadGraceMs: 30_000,
  maxConnections: 512,
};

/** How long a connection being closed for bad input has to take its last answer. */
const CLOSE_GRACE_MS = 1000;

/** A full socket (EAGAIN) is retried this many times, waiting longer each time (about 10 s in all). */
const FD_SEND_ATTEMPTS = 200;
const FD_SEND_MAX_WAIT_MS = 50;

const sendWithNativeFd = (socket: net.Socket, data: Buffer, fd: number) => native().sendWithFd(socketFd(socket), data, fd);

/**
 * The broker's Unix socket: both wire protocols on one socket, one line in, one line
 * out, answered in order per connection, many connections at once.
 */
export class BrokerServer {
  readonly #options: Required<Omit<BrokerServerOptions, 'peerCredentials' | 'logger' | 'sendWithFd'>> & Pick<BrokerServerOptions, 'peerCredentials'>;
  readonly #sendWithFd: (socket: net.Socket, data: Buffer, fd: number) => number;
  readonly #log: Logger;
  readonly #server: net.Server;
  readonly #sockets = new Set<net.Socket>();
  /** What each open connection holds: its answers not yet sent, the bytes of its lines not yet answered. */
  readonly #held = new Map<net.Socket, { flow: AnswerFlow; queuedBytes: number }>();

  constructor(options: BrokerServerOptions) {
    this.#options = { ...DEFAULTS, ...options };
    this.#sendWithFd = options.sendWithFd ?? sendWithNativeFd;
    this.#log = options.logger ?? options.broker.log;
    // Half-open: a client may shut down its side once its lines are written and still
    // read their answers; the connection ends once they are sent.
    this.#server = net.createServer({ allowHalfOpen: true }, (socket) => this.#accept(socket));
    this.#server.maxConnections = this.#options.maxConnections;
  }

  get socketPath(): string {
    return this.#options.socketPath;
  }

  async listen(): Promise<void> {
    await prepareSocketPath(this.#options.socketPath);
    await new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(this.#options.socketPath, () => {
        this.#server.off('error', reject);
        resolve();
      });
    });
    await chmod(this.#options.socketPath, 0o600);
    this.#log.info({ phase: 'ipc', socketPath: this.#options.socketPath }, 'listening');
  }

  /**
   * What the open connections hold in the broker's memory: answers Node has not handed
   * to the kernel yet, lines read but not answered yet, and how many connections stopped
   * answering because their client does not read. Each connection keeps its own bounded.
   */
  get buffered(): { connections: number; unsentBytes: number; queuedBytes: number; stalled: number } {
    const total = { connections: this.#sockets.size, unsentBytes: 0, queuedBytes: 0, stalled: 0 };
    for (const { flow, queuedBytes } of this.#held.values()) {
      total.unsentBytes += flow.unsentBytes;
      total.queuedBytes += queuedBytes;
      if (flow.stalled) total.stalled += 1;
    }
    return total;
  }

  /** Let the process exit when nothing but this server is left to keep it alive. */
  unref(): this {
    this.#server.unref();
    return this;
  }

  async close(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #accept(socket: net.Socket): void {
    this.#sockets.add(socket);
    socket.on('close', () => this.#sockets.delete(socket));
    socket.on('error', (error) => this.#log.debug({ phase: 'ipc', err: error }, 'client socket error'));
    let peer: Peer | undefined;
    try {
      peer = this.#options.peerCredentials?.(socket);
    } catch (error) {
      this.#log.warn({ phase: 'ipc', err: error }, 'could not read peer credentials');
    }
    const log = this.#log.child({ peer });
    log.debug({ phase: 'ipc' }, 'client connected');
    const splitter = new LineSplitter(this.#options.maxLineBytes);
    const flow = new AnswerFlow(socket, {
      maxUnsentBytes: this.#options.maxUnsentBytes,
      graceMs: this.#options.unreadGraceMs,
      onDrop: (unsentBytes) => {
        log.warn({ phase: 'ipc', unsentBytes }, 'the client does not read its answers; dropping it');
        const reason = `more than ${this.#options.maxUnsentBytes} bytes of answers unread for ${this.#options.unreadGraceMs} ms; connection closed`;
        this.#audit(peer, 'socket', 'unread-answers', ErrorCodes.BAD_REQUEST, reason);
      },
    });
    const held = { flow, queuedBytes: 0 };
    this.#held.set(socket, held);
    socket.once('close', () => this.#held.delete(socket));
    let queue: Promise<void> = Promise.resolve();
    let queued = 0;
    // Settles once everything written so far has left Node; `closed` in case it never will.
    let flushed: Promise<void> = Promise.resolve();
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    const send = (line: string | Buffer) => {
      if (socket.destroyed) return;
      flushed = new Promise<void>((resolve) => flow.write(typeof line === 'string' ? `${line}\n` : line, resolve));
    };
    const sendFd = (answer: FdAnswer) => this.#passFd(socket, answer, () => Promise.race([flushed, closed]), send, log);
    // Half-closing is not enough: a client that neither reads nor closes would keep the
    // connection (and a slot of maxConnections) for ever. Its answer gets a moment to leave.
    // Nothing more is read once the connection is being closed.
    let closing = false;
    let partialTimer: NodeJS.Timeout | undefined;
    const stopPartial = () => {
      clearTimeout(partialTimer);
      partialTimer = undefined;
    };
    const closeAfterAnswer = () => {
      closing = true;
      stopPartial();
      socket.end();
      setTimeout(() => socket.destroy(), CLOSE_GRACE_MS).unref();
    };
    // A half-written line has partialLineTimeoutMs from its first byte, however slowly the
    // rest trickles in (bytes do not restart the clock); an idle connection has idleTimeoutMs.
    const watchPartial = (endedLines: boolean) => {
      if (endedLines || splitter.pendingBytes === 0) stopPartial();
      if (splitter.pendingBytes === 0 || partialTimer !== undefined) return;
      partialTimer = setTimeout(() => {
        log.info({ phase: 'ipc', pendingBytes: splitter.pendingBytes }, 'closing a connection whose line never ended');
        closing = true;
        queue = queue.then(() => {
          refuseUnfinished('timed out waiting for its end');
          closeAfterAnswer();
        });
      }, this.#options.partialLineTimeoutMs);
    };
    // A line without its newline may be cut short (a shorter path is another path): refused,
    // after the answers to the lines before it.
    const refuseUnfinished = (why: string) => {
      const reason = `incomplete line: ${why}`;
      this.#audit(peer, 'socket', 'malformed', ErrorCodes.BAD_REQUEST, reason);
      send(looksLikeTextRequest(splitter.pending.toString('utf8')) ? TEXT_DENY : JSON.stringify(errorAnswer(ErrorCodes.BAD_REQUEST, reason)));
    };
    socket.on('end', () => {
      if (closing) return;
      closing = true;
      stopPartial();
      const unfinished = splitter.pendingBytes > 0;
      queue = queue.then(() => {
        if (unfinished) refuseUnfinished('the connection ended before its newline');
        socket.end();
      });
    });
    socket.once('close', stopPartial);
    socket.setTimeout(this.#options.idleTimeoutMs);
    socket.on('timeout', () => {
      log.info({ phase: 'ipc' }, 'closing a connection that went quiet');
      closeAfterAnswer();
    });
    socket.on('data', (chunk: Buffer) => {
      if (closing) return;
      // Lines completed before an overflow in the same chunk are answered first.
      const lines = splitter.push(chunk);
      for (const line of lines) {
        if (++queued > this.#options.maxQueuedLines) {
          log.warn({ phase: 'ipc' }, 'too many unanswered lines; closing');
          this.#audit(peer, 'socket', 'flood', ErrorCodes.BAD_REQUEST, `more than ${this.#options.maxQueuedLines} unanswered lines; connection closed`);
          socket.destroy();
          return;
        }
        held.queuedBytes += line.length;
        queue = queue.then(async () => {
          // Nothing is answered while the client leaves earlier answers unread, and nothing
          // is done for a connection that is gone: its client never learns the outcome.
          await flow.ready();
          if (!socket.destroyed) {
            const answer = await this.#answer(line, peer, log);
            if (typeof answer === 'string') send(answer);
            else await sendFd(answer);
          }
          queued -= 1;
          held.queuedBytes -= line.length;
          if (held.queuedBytes <= this.#options.maxQueuedBytes) flow.resume('queued-lines');
        });
      }
      if (held.queuedBytes > this.#options.maxQueuedBytes) flow.pause('queued-lines');
      if (splitter.overflowed) {
        log.warn({ phase: 'ipc', maxLineBytes: this.#options.maxLineBytes }, 'line too long; closing');
        this.#audit(peer, 'socket', 'malformed', ErrorCodes.LINE_TOO_LONG, `line longer than ${this.#options.maxLineBytes} bytes; connection closed`);
        closing = true;
        flow.pause('closing');
        queue = queue.then(() => {
          send(JSON.stringify(errorAnswer(ErrorCodes.LINE_TOO_LONG, `line longer than ${this.#options.maxLineBytes} bytes`)));
          closeAfterAnswer();
        });
        return;
      }
      watchPartial(lines.length > 0);
    });
  }

  /**
   * An `FD` answer: its line goes out with the descriptor attached, by a sendmsg of our
   * own on the socket's fd. Node may still hold earlier answers for this connection, so
   * we wait until they have left (or our bytes would overtake them); the answers after
   * this one wait for us in the connection's queue. The broker's copy of the descriptor
   * is closed whatever happens. A connection we cannot hand the fd to is closed: its
   * client would otherwise wait for an answer that never comes.
   */
  async #passFd(socket: net.Socket, answer: FdAnswer, flushed: () => Promise<void>, send: (rest: Buffer) => void, log: Logger): Promise<void> {
    try {
      await flushed();
      if (socket.destroyed) return;
      const data = Buffer.from(`${answer.line}\n`);
      let sent = 0;
      for (let attempt = 1; ; attempt++) {
        try {
          sent = this.#sendWithFd(socket, data, answer.fd);
          break;
        } catch (error) {
          if (errnoOf(error) !== 'EAGAIN' || attempt >= FD_SEND_ATTEMPTS || socket.destroyed) throw error;
          await sleep(Math.min(attempt, FD_SEND_MAX_WAIT_MS));
        }
      }
      // The fd went with the first byte; whatever did not fit follows as plain bytes.
      if (sent < data.length) send(data.subarray(sent));
      log.debug({ phase: 'ipc-token' }, 'passed a granted fd');
    } catch (error) {
      log.warn({ phase: 'ipc-token', err: error }, 'could not pass a granted fd; closing the connection');
      socket.destroy();
    } finally {
      closeSync(answer.fd);
    }
  }

  /**
   * A line (or connection) refused before it became a request, or a client command that
   * failed: recorded like any refusal (`getAuditHooks(broker).record`), so what a
   * sandboxed client tried on the socket is in the audit trail even when no policy was asked.
   */
  #audit(peer: Peer | undefined, origin: string, operation: string, errorCode: string, reason: string, command?: string): void {
    try {
      auditRefusal(this.#options.broker, {
        origin,
        decidedBy: 'ipc',
        operation,
        errorCode,
        reason: reason.length > MAX_AUDIT_REASON ? `${reason.slice(0, MAX_AUDIT_REASON)}…` : reason,
        ...(command ? { command: command.slice(0, 64) } : {}),
        ...(peer ? { peer } : {}),
      });
    } catch (error) {
      this.#log.error({ phase: 'ipc', err: error }, 'an audit sink failed');
    }
  }

  /** One line in, one line out. Never throws: a failure is an answer. */
  async #answer(raw: Buffer, peer: Peer | undefined, log: Logger): Promise<string | FdAnswer> {
    const valid = isUtf8(raw);
    const text = raw.toString('utf8').replace(/\r$/, '');
    try {
      if (looksLikeTextRequest(text)) {
        const parsed = valid ? parseTextRequest(text, peer) : ({ ok: false, reason: 'request is not valid UTF-8' } as const);
        if (!parsed.ok) {
          log.info({ phase: 'ipc-token', reason: parsed.reason }, 'malformed token request');
          this.#audit(peer, 'text-token', 'malformed', ErrorCodes.BAD_REQUEST, parsed.reason);
          return TEXT_DENY;
        }
        const outcome = await this.#options.broker.handle(parsed.request);
        log.debug({ phase: 'ipc-token', path: outcome.request?.targets[0]?.path, normalisedPath: outcome.targets[0]?.resolved, decision: outcome.wireDecision }, 'token request');
        const fd = textAnswerFd(outcome);
        return fd === undefined ? formatTextAnswer(outcome) : { line: formatTextAnswer(outcome), fd };
      }
      if (!valid) {
        this.#audit(peer, 'host-op', 'malformed', ErrorCodes.BAD_REQUEST, 'request is not valid UTF-8');
        return JSON.stringify(errorAnswer(ErrorCodes.BAD_REQUEST, 'request is not valid UTF-8'));
      }
      const parsed = parseJsonRequest(text, peer);
      if (parsed.ok === 'client-command') {
        const result = await this.#options.broker.clientCommand(parsed.command, parsed.payload, peer);
        log.debug({ phase: 'ipc-client-command', command: parsed.command, ok: result.ok }, 'client command');
        if (!result.ok) {
          const code = typeof result.errorCode === 'string' ? result.errorCode : ErrorCodes.UNKNOWN_COMMAND;
          this.#audit(peer, 'host-op', 'client-command', code, typeof result.error === 'string' ? result.error : `${parsed.command} refused`, parsed.command);
        }
        return JSON.stringify({ ...(parsed.id === undefined ? {} : { id: parsed.id }), ...result, ...(result.ok ? {} : { decision: 'deny' }) });
      }
      if (!parsed.ok) {
        log.info({ phase: 'ipc-host-op', error: parsed.answer.error }, 'request refused before the pipeline');
        const code = parsed.answer.errorCode ?? ErrorCodes.BAD_REQUEST;
        const operation = code === ErrorCodes.CONTROL_REFUSED ? 'control' : code === ErrorCodes.UNKNOWN_COMMAND ? 'client-command' : 'malformed';
        this.#audit(peer, 'host-op', operation, code, parsed.answer.error ?? 'refused', parsed.command);
        return JSON.stringify(parsed.answer);
      }
      const outcome = await this.#options.broker.handle(parsed.request);
      const answer = formatJsonAnswer(parsed.message, outcome);
      log.debug({ phase: 'ipc-host-op', path: answer.path, normalisedPath: answer.normalisedPath, decision: answer.decision }, 'host operation');
      return JSON.stringify(answer);
    } catch (error) {
      log.error({ phase: 'ipc', err: error }, 'unexpected failure answering a line');
      this.#audit(peer, 'socket', 'malformed', ErrorCodes.BAD_REQUEST, 'internal error answering a line');
      return looksLikeTextRequest(text) ? TEXT_DENY : JSON.stringify(errorAnswer(ErrorCodes.BAD_REQUEST, 'internal error'));
    }
  }
}

/** Longest reason kept in a socket refusal's audit record (a reason may quote the line). */
const MAX_AUDIT_REASON = 512;

function errorAnswer(code: string, message: string): JsonAnswer {
  return { ok: false, decision: 'deny', error: message, errorCode: code };
}
