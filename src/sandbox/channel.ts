import type { Socket } from 'node:net';
import {
  decodeRequest,
  encodeAnswer,
  normalizeAnswer,
  PERFORMED_OP,
  requestReader,
  type KernelAnswer,
  type KernelRefusal,
  type KernelRequest,
} from './protocol.js';
import { decodeNetwork, encodeNetworkAnswer, encodeNetworkTable, isNetworkFrame, type KernelConnectionRecord, type KernelNetworkQuestion } from './network-protocol.js';

const EACCES = 13;

/**
 * What the channel holds for a supervisor that does not read its answers (the real one
 * has one request out at a time, so this never binds it): past MAX_UNSENT_BYTES of
 * answers Node has not handed to the kernel, no further request is handed to the broker
 * until they leave; at most MAX_IN_FLIGHT requests are decided at once; past
 * MAX_WAITING_BYTES of requests read and not handed over, the socket is not read.
 */
const MAX_UNSENT_BYTES = 64 * 1024;
const MAX_IN_FLIGHT = 16;
const MAX_WAITING_BYTES = 1024 * 1024;
/** Offset of the op in a frame body (PROTOCOL.md). */
const OP_OFFSET = 4;

/**
 * Decides one request. `over` settles once the supervisor is done with the request:
 * after an allow, when it reports the operation performed (or dropped); after a denial,
 * as soon as the answer is sent; in any case when the channel ends. A handler that must
 * keep other changes out until then (the broker) waits on it.
 */
export type KernelRequestHandler = (request: KernelRequest, over: Promise<void>) => Promise<KernelAnswer>;
/** Told about each syscall the supervisor refused itself (to audit it); the refusal stands whatever it does. */
export type KernelRefusalHandler = (refusal: KernelRefusal) => Promise<void> | void;

/** Told about each connection the supervisor decided itself (to audit it). */
export type KernelConnectionHandler = (record: KernelConnectionRecord) => void;
/** Decides a connection the supervisor's table could not: 0 allows, an errno refuses. */
export type KernelNetworkQuestionHandler = (question: KernelNetworkQuestion) => Promise<number> | number;

export interface KernelChannelOptions {
  onRequest: KernelRequestHandler;
  onRefusal?: KernelRefusalHandler;
  onConnection?: KernelConnectionHandler;
  /** Without one every question is refused (EACCES). */
  onNetworkQuestion?: KernelNetworkQuestionHandler;
  /** Told about frames that were refused or that ended the channel (for logs). */
  onProtocolError?: (reason: string) => void;
}

export interface KernelChannel {
  /** Ends the channel; the supervisor then fails closed (kills the command, exit 125). */
  close(): void;
  readonly closed: boolean;
  /** Sends the supervisor a new network table (its lines; PROTOCOL.md, "Network table"). */
  pushNetworkTable(lines: readonly string[]): void;
  /** What the channel holds: answers not yet handed to the kernel, requests read and not yet handed to the broker. */
  readonly buffered: { unsentBytes: number; waitingBytes: number; inFlight: number };
}

/**
 * Serves the supervisor's requests on `socket`: each request is handed to
 * `onRequest` as soon as it arrives and answered when its promise settles, so
 * answers may leave out of order. A refusal report goes to `onRefusal` and is
 * acknowledged once it returns. A handler that throws, rejects or returns
 * something malformed produces EACCES. A frame whose length cannot be trusted
 * ends the channel, which the supervisor treats as a lost broker.
 */
export function serveKernelChannel(socket: Socket, options: KernelChannelOptions): KernelChannel {
  const reader = requestReader();
  let closed = false;
  const report = (reason: string) => options.onProtocolError?.(reason);
  /** Allowed requests whose operation the supervisor has not reported over yet, by id. */
  const awaitingOver = new Map<number, () => void>();
  const endAll = () => {
    for (const end of awaitingOver.values()) end();
    awaitingOver.clear();
  };

  const close = () => {
    closed = true;
    socket.destroy();
    endAll();
  };
  const send = (id: number, answer: KernelAnswer) => {
    if (closed || socket.destroyed) return;
    socket.write(encodeAnswer(id, answer));
  };
  const performed = (id: number) => {
    const end = awaitingOver.get(id);
    if (!end) {
      // Not an id that waits: the two sides disagree about what happened, so stop (fail closed).
      report(`performed notice for request ${id}, which was not allowed or is over`);
      close();
      return;
    }
    awaitingOver.delete(id);
    end();
  };
  const handle = async (body: Buffer) => {
    const decoded = decodeRequest(body);
    if (!decoded.ok) {
      report(decoded.reason);
      if (decoded.id === undefined) close();
      else send(decoded.id, { errno: EACCES });
      return;
    }
    if (decoded.performed !== undefined) {
      performed(decoded.performed);
      return;
    }
    if (decoded.refusal) {
      const { refusal } = decoded;
      try {
        await options.onRefusal?.(refusal);
      } catch (error) {
        report(`onRefusal failed for ${refusal.syscall}: ${String(error)}`);
      }
      // The acknowledgement releases the refused call; the supervisor answers it with its own errno.
      send(refusal.id, { errno: refusal.errno });
      return;
    }
    const { request } = decoded;
    let end: () => void = () => undefined;
    const over = new Promise<void>((resolve) => (end = resolve));
    let answer: KernelAnswer;
    try {
      answer = normalizeAnswer(request.op, await options.onRequest(request, over));
    } catch (error) {
      report(`onRequest failed for ${request.op} ${request.path}: ${String(error)}`);
      answer = { errno: EACCES };
    }
    // An allow is over when the supervisor says so; a denial, once it is sent.
    if (answer.errno === 0 && !closed && !socket.destroyed) awaitingOver.set(request.id, end);
    send(request.id, answer);
    if (answer.errno !== 0 || closed || socket.destroyed) end();
  };

  // Network records and questions change no file: they pass the file requests' order and bounds.
  const handleNetwork = async (body: Buffer) => {
    const decoded = decodeNetwork(body);
    if (!decoded.ok) {
      report(decoded.reason);
      if (decoded.id === undefined) close();
      else if (!closed && !socket.destroyed) socket.write(encodeNetworkAnswer(decoded.id, EACCES));
      return;
    }
    if (decoded.record) {
      try {
        options.onConnection?.(decoded.record);
      } catch (error) {
        report(`onConnection failed: ${String(error)}`);
      }
      return;
    }
    const { question } = decoded;
    let errno = EACCES;
    try {
      const answer = options.onNetworkQuestion ? await options.onNetworkQuestion(question) : EACCES;
      errno = Number.isInteger(answer) && answer >= 0 && answer <= 4095 ? answer : EACCES;
    } catch (error) {
      report(`onNetworkQuestion failed for ${question.address}:${question.port}: ${String(error)}`);
    }
    if (!closed && !socket.destroyed) socket.write(encodeNetworkAnswer(question.id, errno));
  };

  const waiting: Buffer[] = [];
  let waitingBytes = 0;
  let inFlight = 0;
  /** Hands the broker what waits, as far as the bounds allow, and reads on only while little waits. */
  const pump = () => {
    while (waiting.length > 0 && !closed && inFlight < MAX_IN_FLIGHT && socket.writableLength <= MAX_UNSENT_BYTES) {
      const body = waiting.shift() as Buffer;
      waitingBytes -= body.length;
      inFlight += 1;
      void handle(body).finally(() => {
        inFlight -= 1;
        pump();
      });
    }
    if (closed) return;
    if (waitingBytes > MAX_WAITING_BYTES) socket.pause();
    else socket.resume();
  };
  socket.on('drain', pump);

  socket.on('data', (chunk: Buffer) => {
    if (closed) return;
    const { frames, error } = reader.push(chunk);
    for (const body of frames) {
      // A performed notice releases what waits on its request (perhaps a request in flight): never held back.
      if (body.length > OP_OFFSET + 1 && body.readUInt16LE(OP_OFFSET) === PERFORMED_OP) {
        void handle(body);
        continue;
      }
      if (isNetworkFrame(body)) {
        void handleNetwork(body);
        continue;
      }
      waiting.push(body);
      waitingBytes += body.length;
    }
    pump();
    if (error !== undefined) {
      report(error);
      close();
    }
  });
  // The supervisor notices a broken channel on its own; nothing to do here but stop writing.
  socket.on('error', () => {
    closed = true;
    endAll();
  });
  socket.on('close', () => {
    closed = true;
    endAll();
  });

  return {
    close,
    get closed() {
      return closed;
    },
    pushNetworkTable(lines) {
      if (closed || socket.destroyed) return;
      for (const frame of encodeNetworkTable(lines)) socket.write(frame);
    },
    get buffered() {
      return { unsentBytes: socket.writableLength, waitingBytes, inFlight };
    },
  };
}
