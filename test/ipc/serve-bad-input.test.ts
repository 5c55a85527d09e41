import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, ask, askJson, exchange, startServe, type ServeHandle } from '../helpers/serve-process.js';

let serve: ServeHandle;
let victim: string;

beforeAll(async () => {
  process.env.BROKERED_SHELL_PARTIAL_LINE_TIMEOUT_MS = '300';
  serve = await startServe();
  delete process.env.BROKERED_SHELL_PARTIAL_LINE_TIMEOUT_MS;
  victim = path.join(serve.workspace, 'victim.txt');
  writeFileSync(victim, 'untouched');
});
afterAll(() => serve.cleanup());

const json = (line: string) => JSON.parse(line) as Record<string, unknown>;

describe('serve: bad input is answered, never crashes, never hangs, never modifies', () => {
  it.each([
    ['malformed JSON', '{"command": "HostFileOperation", ', 'BSH_BAD_REQUEST'],
    ['a JSON array', '[1,2]', 'BSH_BAD_REQUEST'],
    ['an unknown command', '{"command":"FormatDisk"}', 'BSH_UNKNOWN_COMMAND'],
    ['an unknown operation', '{"command":"HostFileOperation","operation":"shred","path":"/x","sessionId":"s1"}', 'BSH_BAD_REQUEST'],
    ['a relative path', '{"command":"HostFileOperation","operation":"delete","path":"victim.txt","sessionId":"s1"}', 'BSH_BAD_REQUEST'],
    ['a NUL byte in a path', '{"command":"HostFileOperation","operation":"delete","path":"/tmp/a\\u0000b","sessionId":"s1"}', 'BSH_BAD_REQUEST'],
    ['a missing operand', '{"command":"HostFileOperation","operation":"rename","from":"/tmp/a","sessionId":"s1"}', 'BSH_BAD_REQUEST'],
    ['a control command', '{"command":"CommitModifyBackup","commitMsg":"sneaky"}', 'BSH_CONTROL_REFUSED'],
    ['a disable-backup attempt', '{"command":"EnableModifyBackup","enabled":false}', 'BSH_CONTROL_REFUSED'],
    ['a blank line', '', 'BSH_BAD_REQUEST'],
  ])('%s → ok:false with %s', async (_label, line, code) => {
    const answer = json(await ask(serve.socket, line));
    expect(answer).toMatchObject({ ok: false, decision: 'deny', errorCode: code });
    expect(typeof answer.error).toBe('string');
  });

  it.each([
    ['too few fields', 'x.read-write\t/tmp/a'],
    ['an unknown class', 'x.execute\t/tmp/a\ts1\tt'],
    ['a relative path', 'x.read-write\tvictim.txt\ts1\tt'],
    ['a NUL byte', 'x.read-write\t/tmp/a\u0000b\ts1\tt'],
  ])('text request with %s → DENY', async (_label, line) => {
    expect(await ask(serve.socket, line)).toBe('DENY');
  });

  it('invalid UTF-8 is refused', async () => {
    const bytes = Buffer.concat([Buffer.from('x.read-write\t/tmp/'), Buffer.from([0xff, 0xfe]), Buffer.from('\ts1\tt\n')]);
    expect(await exchange(serve.socket, bytes, 1)).toEqual(['DENY']);
  });

  it('a line over 64 KiB gets an error and the connection is closed', async () => {
    const huge = `{"command":"HostFileOperation","operation":"delete","path":"/${'a'.repeat(70_000)}","sessionId":"s1"}\n`;
    const answers = await exchange(serve.socket, huge, 2);
    expect(answers).toHaveLength(1);
    expect(json(answers[0] ?? '{}')).toMatchObject({ ok: false, errorCode: 'BSH_LINE_TOO_LONG' });
  });

  it('answers the lines before an over-long one first, in order', async () => {
    const before = path.join(serve.workspace, 'before-huge');
    const first = JSON.stringify({ command: 'HostFileOperation', operation: 'mkdir', path: before, sessionId: 's1' });
    const huge = `{"command":"HostFileOperation","operation":"delete","path":"/${'a'.repeat(70_000)}","sessionId":"s1"}\n`;
    const answers = await exchange(serve.socket, `${first}\n${huge}`, 3);
    expect(answers.map((answer) => json(answer).errorCode ?? 'ok')).toEqual(['ok', 'BSH_LINE_TOO_LONG']);
    expect(existsSync(before)).toBe(true);
  });

  it('a half-written line is answered with an error once it goes quiet', async () => {
    const answers = await exchange(serve.socket, '{"command":"HostFileOperation","operation":"del', 2);
    expect(answers).toHaveLength(1);
    expect(json(answers[0] ?? '{}')).toMatchObject({ ok: false, errorCode: 'BSH_BAD_REQUEST' });
  });

  it('answers many lines of one connection in order', async () => {
    const lines = Array.from({ length: 50 }, (_, i) => JSON.stringify({ id: i, command: 'HostFileOperation', operation: 'mkdir', path: path.join(serve.workspace, `d${i}`), sessionId: 's1' }));
    const answers = await exchange(serve.socket, `${lines.join('\n')}\n`, 50);
    expect(answers.map((a) => json(a).id)).toEqual(lines.map((_, i) => i));
    expect(answers.every((a) => json(a).ok === true)).toBe(true);
  });

  it('serves many concurrent clients', async () => {
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) => ask(serve.socket, `x.read-write\t${path.join(serve.workspace, `c${i}.txt`)}\ts1\tt${i}`)),
    );
    expect(results).toEqual(Array(40).fill('SANDBOX'));
  });

  it('still works after all of the above, and never touched the victim', async () => {
    expect(await askJson(serve.socket, { operation: 'mkdir', path: path.join(serve.workspace, 'alive') })).toMatchObject({ ok: true });
    expect(readFileSync(victim, 'utf8')).toBe('untouched');
    expect(existsSync(path.join(serve.workspace, 'alive'))).toBe(true);
    expect(serve.child.exitCode).toBeNull();
  });

  it('keeps its socket private: directory 0700, socket 0600', () => {
    expect(statSync(path.dirname(serve.socket)).mode & 0o777).toBe(0o700);
    expect(statSync(serve.socket).mode & 0o777).toBe(0o600);
  });

  it('commits the open turn on SIGTERM and exits 0', async () => {
    serve.child.kill('SIGTERM');
    expect(await serve.exited).toBe(0);
  });
});

describe('serve refuses a socket path the kernel would cut short', () => {
  it('exits with a clear message instead of binding elsewhere', async () => {
    const long = path.join(serve.workspace, 'x'.repeat(120), 'broker.sock');
    const { spawnSync } = await import('node:child_process');
    const result = spawnSync(process.execPath, [CLI, 'serve', '--socket', long, '--session', 's3'], { encoding: 'utf8', env: serve.env, input: '' });
    expect(result.status).toBe(1);
    expect(result.stderr).toMatch(/longer than 107 bytes/);
    expect(existsSync(path.dirname(long))).toBe(false);
  });
});
