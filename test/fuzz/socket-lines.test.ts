/**
 * The broker's socket end to end: a real BrokerServer on a real Unix socket, a broker
 * with the real path resolution over a temp tree, and a policy that denies every write.
 * Whatever lines a client sends (both protocols, broken UTF-8, NUL, CR, blank lines),
 * each gets exactly one answer line, in order, of the protocol it spoke, and no file
 * changes. Runs: FUZZ_RUNS/4 connections (each up to 12 lines), seed FUZZ_SEED.
 */
import { isUtf8 } from 'node:buffer';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Broker } from '../../src/core/index.js';
import { BrokerServer } from '../../src/ipc/server.js';
import { PathResolutionPlugin } from '../../src/plugins/path-resolution/index.js';
import { fixedPolicy } from '../helpers/bare-broker.js';
import { exchange } from '../helpers/serve-process.js';
import { FUZZ_RUNS, FUZZ_SEED } from './harness/fuzz-suite.js';

const numRuns = Math.max(1, Math.ceil(FUZZ_RUNS / 4));
let dir: string;
let ws: string;
let socket: string;
let server: BrokerServer;

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'bsh-fuzz-socket-'));
  ws = path.join(dir, 'ws');
  mkdirSync(path.join(ws, 'sub'), { recursive: true });
  writeFileSync(path.join(ws, 'a.txt'), 'a');
  writeFileSync(path.join(ws, 'sub', 'b.txt'), 'b');
  socket = path.join(dir, 'sock', 'broker.sock');
  const broker = new Broker({ sessionId: 's1' }).use(
    new PathResolutionPlugin({ home: dir }),
    // Reads may pass; anything that would modify is denied, so no run can change the tree.
    fixedPolicy(() => ({ verdict: 'deny', reason: 'fuzz', source: 'fuzz' })),
  );
  server = new BrokerServer({ broker, socketPath: socket, maxLineBytes: 4096, partialLineTimeoutMs: 2000 });
  await server.listen();
});

afterAll(async () => {
  await server?.close();
  rmSync(dir, { recursive: true, force: true });
});

const names = () => fc.constantFrom('a.txt', 'sub', 'sub/b.txt', 'missing', '..', '.', '', 'sub/../a.txt', '\0', 'é');
const wsPath = fc.array(names(), { maxLength: 4 }).map((parts) => `${ws}/${parts.join('/')}`);
const anyPath = fc.oneof(wsPath, fc.string({ maxLength: 20 }), fc.constant('/proc/self/fd/0'));

/** One line without its newline, and which protocol the server will read it as. */
const line: fc.Arbitrary<Buffer> = fc.oneof(
  fc
    .tuple(fc.constantFrom('x.read', 'x.read-write', 'x.execute', ''), anyPath, fc.constantFrom('s1', 's2', ''), fc.string({ maxLength: 8 }), fc.nat({ max: 6 }))
    .map(([cls, p, session, call, extra]) => Buffer.from([cls, p, session, call, ...Array(extra % 3 === 0 ? 1 : 0).fill('z')].join('\t'))),
  fc
    .record(
      {
        id: fc.oneof(fc.nat(), fc.string({ maxLength: 6 })),
        command: fc.constantFrom('HostFileOperation', 'Shutdown', 'Nope'),
        operation: fc.constantFrom('delete', 'mkdir', 'rename', 'copy', 'chmod', 'link', 'touch', 'open'),
        path: anyPath,
        from: anyPath,
        to: anyPath,
        sessionId: fc.constantFrom('s1', 's2'),
        recursive: fc.boolean(),
        mode: fc.constantFrom(0o644, '755', 'rwx'),
        symbolic: fc.boolean(),
      },
      { requiredKeys: ['command'] },
    )
    .map((o) => Buffer.from(JSON.stringify(o))),
  fc.uint8Array({ maxLength: 40 }).map((b) => Buffer.from(b.filter((x) => x !== 0x0a))),
  fc.constantFrom('', '\r', '{', '[]', 'null', '\t\t\t').map((s) => Buffer.from(s)),
);

/** The server's own reading: a line with a tab that does not start with `{` is a text request. */
const isText = (raw: Buffer) => {
  const text = raw.toString('utf8').replace(/\r$/, '');
  return !text.startsWith('{') && text.includes('\t');
};

/** The id a JSON request line carries (the server echoes it), if any. */
function idOf(raw: Buffer): string | number | undefined {
  if (!isUtf8(raw)) return undefined;
  try {
    const value: unknown = JSON.parse(raw.toString('utf8'));
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
    const id = (value as { id?: unknown }).id;
    return typeof id === 'string' || typeof id === 'number' ? id : undefined;
  } catch {
    return undefined;
  }
}

function snapshot(root: string): string {
  const out: string[] = [];
  const visit = (p: string) => {
    for (const entry of readdirSync(p, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const full = path.join(p, entry.name);
      out.push(`${full}:${entry.isDirectory() ? 'dir' : readFileSync(full, 'latin1')}`);
      if (entry.isDirectory()) visit(full);
    }
  };
  visit(root);
  return out.join('\n');
}

describe('fuzz: the broker socket answers every line, in order, and changes nothing', () => {
  it('any sequence of lines on one connection', async () => {
    const before = snapshot(ws);
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(line, { minLength: 1, maxLength: 12 }), async (lines) => {
        runs += 1;
        const payload = Buffer.concat(lines.flatMap((l) => [l, Buffer.from('\n')]));
        const answers = await exchange(socket, payload, lines.length, 20_000);
        expect(answers).toHaveLength(lines.length);
        lines.forEach((raw, i) => {
          const answer = answers[i] as string;
          if (isText(raw)) {
            // Only the token protocol's words: its clients understand nothing else.
            expect(answer).toMatch(/^(DENY|SANDBOX|FD|[A-Za-z0-9._:-]+)$/);
            expect(answer).not.toMatch(/^[{]/);
          } else {
            const value = JSON.parse(answer) as { ok?: unknown; decision?: unknown; id?: unknown };
            expect(typeof value.ok).toBe('boolean');
            // In order: an answer carries the id of the line it answers.
            const id = idOf(raw);
            if (id !== undefined) expect(value.id).toBe(id);
            // Nothing that modifies is allowed by this policy.
            if (value.ok === true) expect(value.decision).not.toBe('sandbox');
          }
        });
      }),
      { seed: FUZZ_SEED, numRuns },
    );
    console.log(`fuzz socket-lines: ${runs} connections, seed ${FUZZ_SEED}`);
    expect(runs).toBe(numRuns);
    expect(snapshot(ws)).toBe(before);
  }, 60_000 + numRuns * 200);
});
