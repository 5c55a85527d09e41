import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sendAndEnd, startServe, type ServeHandle } from '../helpers/serve-process.js';

let serve: ServeHandle;

beforeAll(async () => {
  serve = await startServe();
});
afterAll(() => serve.cleanup());

const hostOp = (fields: Record<string, unknown>) => JSON.stringify({ command: 'HostFileOperation', sessionId: 's1', ...fields });

describe('serve: a client that half-closes after writing its lines', () => {
  it('gets every answer, in order, then the connection ends', async () => {
    const file = path.join(serve.workspace, 'kept.txt');
    writeFileSync(file, 'before');
    const made = path.join(serve.workspace, 'made');
    const lines = [
      `x.read-write\t${file}\ts1\tcall-1`,
      hostOp({ id: 'm', operation: 'mkdir', path: made }),
      hostOp({ id: 'r', operation: 'rename', from: file, to: `${file}.moved` }),
    ];
    const answers = await sendAndEnd(serve.socket, `${lines.join('\n')}\n`);
    expect(answers).toHaveLength(3);
    expect(answers[0]).toBe('SANDBOX');
    expect(JSON.parse(answers[1] ?? '{}')).toMatchObject({ id: 'm', ok: true });
    expect(JSON.parse(answers[2] ?? '{}')).toMatchObject({ id: 'r', ok: true });
    expect(existsSync(made)).toBe(true);
    expect(readFileSync(`${file}.moved`, 'utf8')).toBe('before');
  });

  it('refuses a last line the connection ended before its newline: it may be cut short', async () => {
    const first = path.join(serve.workspace, 'first');
    const unfinished = path.join(serve.workspace, 'unfinished');
    const payload = `${hostOp({ operation: 'mkdir', path: first })}\n${hostOp({ operation: 'mkdir', path: unfinished })}`;
    const answers = await sendAndEnd(serve.socket, payload);
    expect(answers).toHaveLength(2);
    expect(JSON.parse(answers[0] ?? '{}')).toMatchObject({ ok: true });
    expect(JSON.parse(answers[1] ?? '{}')).toMatchObject({ ok: false, decision: 'deny', errorCode: 'BSH_BAD_REQUEST' });
    expect(existsSync(first)).toBe(true);
    expect(existsSync(unfinished)).toBe(false);
  });

  it('answers a text request cut short with DENY, though its fields would be granted with a newline', async () => {
    const request = `x.read-write\t${path.join(serve.workspace, 'inside.txt')}\ts1\tcall-2`;
    expect(await sendAndEnd(serve.socket, `${request}\n`)).toEqual(['SANDBOX']);
    expect(await sendAndEnd(serve.socket, request)).toEqual(['DENY']);
  });
});
