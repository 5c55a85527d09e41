import type { Socket } from 'node:net';
import {
  decodeRequest,
  encodeAnswer,
  normalizeAnswer,
  requestReader,
  type KernelAnswer,
  type KernelRefusal,
  type KernelRequest,
} from './protocol.js';

const EACCES = 13;

export type KernelRequestHandler = (request: KernelRequest) => Promise<KernelAnswer>;
/** Told about each syscall the supervisor refused itself (to audit it); the refusal stands whatever it does. */
export type KernelRefusalHandler = (refusal: KernelRefusal) => Promise<void> | void;

export interface KernelChannelOptions {
  onRequest: KernelRequestHandler;
  onRefusal?: KernelRefusalHandler;
  /** Told about frames that were refused or that ended the channel (for logs). */
  onProtocolError?: (reason: string) => void;
}

export interface KernelChannel {
  /** Ends the channel; the supervisor then fails closed (kills the command, exit 125). */
  close(): void;
  readonly closed: boolean;
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

  const close = () => {
    closed = true;
    socket.destroy();
  };
  const send = (id: number, answer: KernelAnswer) => {
    if (closed || socket.destroyed) return;
    socket.write(encodeAnswer(id, answer));
  };
  const handle = async (body: Buffer) => {
    const decoded = decodeRequest(body);
    if (!decoded.ok) {
      report(decoded.reason);
      if (decoded.id === undefined) close();
      else send(decoded.id, { errno: EACCES });
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
    let answer: KernelAnswer;
    try {
      answer = normalizeAnswer(request.op, await options.onRequest(request));
    } catch (error) {
      report(`onRequest failed for ${request.op} ${request.path}: ${String(error)}`);
      answer = { errno: EACCES };
    }
    send(request.id, answer);
  };

  socket.on('data', (chunk: Buffer) => {
    if (closed) return;
    const { frames, error } = reader.push(chunk);
    for (const body of frames) void handle(body);
    if (error !== undefined) {
      report(error);
      close();
    }
  });
  // The supervisor notices a broken channel on its own; nothing to do here but stop writing.
  socket.on('error', () => {
    closed = true;
  });
  socket.on('close', () => {
    closed = true;
  });

  return {
    close,
    get closed() {
      return closed;
    },
  };
}
