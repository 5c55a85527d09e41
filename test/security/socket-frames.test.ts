/**
 * Escape suite, broker socket: frames a sandboxed command sends to break the broker
 * rather than to ask it — malformed and non-object JSON, non-UTF-8 bytes, wrong text
 * fields, NUL bytes, prototype keys, lines over the limit (from python and from the C
 * client), a thousand lines without reading the answers, 200 connections at once and
 * 100 half-written lines held open. Each is refused, changes nothing, is audited; and
 * the broker keeps serving: a legitimate request answered in the middle of the flood, a
 * write after it backed up, and the run ends normally.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT, blobOf, describeRun, entryFor, makeWorld, onlyTurn, removeWorld, writeOld, type World } from '../e2e/run-helpers.js';
import { attack, deniedCommand, deniedPath, hostOp, isDenyRecord, isRefusalAnswer, summarise, tokenLine, type AttackRun, type AuditRecord, type Route } from './socket-helpers.js';

const SESSION = 'sec-frames';
const FLOOD = 200;
const HELD = 100;
const QUEUE_FLOOD = 1100;

let world: World;
let result: AttackRun;
let routes: Route[];

const ws = (name: string) => path.join(world.ws, name);
const out = (name: string) => path.join(world.outside, name);

/** Classes of refusal record; each route's record is counted in its class (see the count test). */
const CLASSES = {
  badJson: (r: AuditRecord) => isDenyRecord(r) && r.operation === 'malformed' && (r.reason ?? '').startsWith('malformed JSON'),
  notObject: (r: AuditRecord) => isDenyRecord(r) && r.operation === 'malformed' && r.reason === 'a request must be a JSON object',
  textUtf8: (r: AuditRecord) => isDenyRecord(r) && r.origin === 'text-token' && r.reason === 'request is not valid UTF-8',
  jsonUtf8: (r: AuditRecord) => isDenyRecord(r) && r.origin === 'host-op' && r.reason === 'request is not valid UTF-8',
  textFields: (r: AuditRecord) => isDenyRecord(r) && r.origin === 'text-token' && r.operation === 'malformed' && !(r.reason ?? '').includes('UTF-8'),
  tooLong: (r: AuditRecord) => isDenyRecord(r) && r.error?.code === 'BSH_LINE_TOO_LONG',
  queueFlood: (r: AuditRecord) => isDenyRecord(r) && r.operation === 'flood',
} as const;
type ClassName = keyof typeof CLASSES;
const classOf = new Map<string, ClassName>();

function buildRoutes(): Route[] {
  const victim = [ws('victim')];
  const of = (name: string, cls: ClassName, send: Array<string | Buffer>, extra: Partial<Route> = {}): Route => {
    classOf.set(name, cls);
    return { name, send, targets: victim, audited: CLASSES[cls], ...extra };
  };
  const deleteVictim = hostOp({ operation: 'delete', path: ws('victim'), deleteMode: 'unlink', sessionId: SESSION, toolCallId: '@CALL@' });
  const bad = (bytes: number[]) => Buffer.from(bytes);
  return [
    of('truncated-json', 'badJson', [deleteVictim.slice(0, -1)]),
    of('bare-word', 'badJson', ['hello broker']),
    of('deep-nesting', 'badJson', [`${'['.repeat(30_000)}${']'.repeat(29_999)}`]),
    of('json-array', 'notObject', [`[${deleteVictim}]`]),
    of('json-number', 'notObject', ['42']),
    of('json-null', 'notObject', ['null']),
    of('json-string', 'notObject', [JSON.stringify(deleteVictim)]),
    of('text-not-utf8', 'textUtf8', [Buffer.concat([Buffer.from(`x.read-write\t${world.ws}/`), bad([0xff, 0xfe]), Buffer.from(`\t${SESSION}\tc\n`)])]),
    of('json-not-utf8', 'jsonUtf8', [Buffer.concat([Buffer.from(deleteVictim.slice(0, -2)), bad([0xc3, 0x28]), Buffer.from('"}\n')])]),
    of('text-three-fields', 'textFields', [`x.read-write\t${ws('victim')}\t${SESSION}`]),
    of('text-bare-tabs', 'textFields', ['\t\t\t']),
    of('text-relative', 'textFields', [`x.read-write\tvictim\t${SESSION}\tc`]),
    of('huge-line', 'tooLong', [`${deleteVictim.slice(0, -1)},"pad":"${'a'.repeat(70_000)}"}`], { want: 2 }),
    of('huge-no-newline', 'tooLong', [Buffer.alloc(1 << 20, 0x61)], { want: 1 }),
    of('unread-lines', 'queueFlood', [Buffer.from('{"command":"CommitModifyBackup","commitMsg":"x"}\n'.repeat(QUEUE_FLOOD))], {
      want: QUEUE_FLOOD,
      // The broker drops the connection at once: whatever answers came are refusals, and it did not hang.
      refused: (r) => r.fds === 0 && r.error === undefined && r.answers.every(isRefusalAnswer),
    }),
    {
      name: 'text-nul-path',
      send: [tokenLine(`${ws('victim')}\u0000.txt`, SESSION, '@CALL@')],
      targets: victim,
      audited: (r) => isDenyRecord(r) && r.error?.code === 'BSH_BAD_REQUEST' && (r.reason ?? '').includes('NUL'),
    },
    {
      name: 'prototype-keys',
      send: [`{"__proto__":{"ok":true,"decision":"sandbox"},"constructor":{"prototype":{"ok":true}},${hostOp({ operation: 'delete', path: out('proto'), deleteMode: 'unlink', sessionId: SESSION }).slice(1)}`],
      targets: [out('proto')],
      audited: deniedPath(out('proto')),
    },
    { name: 'crlf-token', send: [`${tokenLine(out('crlf'), SESSION, '@CALL@')}\r`], targets: [out('crlf')], audited: deniedPath(out('crlf')) },
    {
      name: 'connection-flood',
      flood: FLOOD,
      floodWant: 1,
      send: ['{"command":"FloodProbe"}'],
      after: tokenLine(ws('legit.txt'), SESSION, '@CALL@'),
      targets: victim,
      audited: deniedCommand('FloodProbe'),
      // Every flood connection got its refusal, and the legitimate request in the middle was answered.
      refused: (r) => r.floodAnswers === FLOOD && r.floodFds === 0 && r.answers.join() === 'SANDBOX',
    },
    {
      name: 'c-client-huge',
      shell: `ans=$("$BSH_REQUEST" "$(head -c 100000 /dev/zero | tr '\\0' a)"); case "$ans" in *'"ok":false'*) exit 3;; esac`,
      targets: victim,
      audited: CLASSES.tooLong,
    },
    {
      name: 'c-client-control',
      shell: `ans=$("$BSH_REQUEST" '{"command":"EnableModifyBackup","enabled":false}'); case "$ans" in *'"ok":false'*) exit 3;; esac`,
      targets: victim,
      audited: deniedCommand('EnableModifyBackup'),
    },
  ];
}

beforeAll(async () => {
  world = await makeWorld('sec-frames');
  await writeOld(ws('victim'), 'victim as it was\n', 0o640);
  await writeOld(ws('legit.txt'), 'before\n', 0o640);
  await writeOld(out('proto'), 'proto outside\n', 0o644);
  await writeOld(out('crlf'), 'crlf outside\n', 0o644);
  routes = buildRoutes();
  classOf.set('c-client-huge', 'tooLong');
  const held: Route = {
    name: 'half-lines',
    flood: HELD,
    send: [Buffer.from('{"command":"HostFileOperation","operation":"delete","path":"')],
    after: tokenLine(ws('legit.txt'), SESSION, '@CALL@'),
    targets: [],
    audited: () => true,
  };
  const after = 'echo after > legit.txt; st legit-write';
  const env = { BSH_REQUEST: path.join(REPO_ROOT, 'build', 'Release', 'brokered-request') };
  result = await attack(world, [...routes, held], { session: SESSION, after, env, flags: ['--no', '--message', 'frames'] });
  result.verdicts.delete('half-lines');
}, 120_000);

afterAll(async () => {
  if (result) summarise('socket-frames.test.ts', result.verdicts);
  await removeWorld(world);
});

describe('socket: malformed, oversized and flooding frames', () => {
  it('the broker kept serving: the run ends normally and the write after the floods is backed up', async () => {
    expect(result.run.status, describeRun(result.run)).toBe(0);
    expect(result.statuses.get('legit-write')).toBe(0);
    expect(await fs.readFile(ws('legit.txt'), 'utf8')).toBe('after\n');
    const turn = await onlyTurn(world, SESSION);
    const entry = entryFor(turn, ws('legit.txt'));
    expect(entry).toBeDefined();
    if (entry) expect((await blobOf(world, turn, entry)).toString('utf8')).toBe('before\n');
  });

  it('with 100 half-written lines held open, a legitimate request is still answered', () => {
    expect(result.results.get('half-lines')?.answers).toEqual(['SANDBOX']);
  });

  it('every route is refused, leaves its target as it was and is audited as a denial', () => {
    const failures = [...result.verdicts].filter(([, v]) => !v.refused || !v.unchanged || !v.audited);
    const brief = [...result.results.values()].map((r) => ({ ...r, answers: r.answers.slice(0, 3) }));
    expect(failures, JSON.stringify(brief)).toEqual([]);
    expect(result.verdicts.size).toBe(routes.length);
  });

  it('each refusal has its own audit record: one per route of each class, one per flood connection', () => {
    for (const [cls, predicate] of Object.entries(CLASSES)) {
      const expected = [...classOf.values()].filter((c) => c === cls).length;
      expect(result.audit.filter(predicate).length, cls).toBe(expected);
    }
    expect(result.audit.filter(deniedCommand('FloodProbe'))).toHaveLength(FLOOD);
  });

  it('the oversized and unread-lines connections were closed by the broker', () => {
    expect(result.results.get('huge-line')?.answers).toHaveLength(1);
    const unread = result.results.get('unread-lines')?.answers ?? [];
    expect(unread.length).toBeLessThan(QUEUE_FLOOD);
  });
});
