/**
 * Escape suite, broker socket: requests that name another session, or none. Each aims at
 * a workspace file the run's own session may change (the legitimate request at the end
 * shows it would have worked), so a session check that let it through would show as a
 * changed file. Whatever the shape of the wrong id (another, empty, missing, mistyped,
 * padded, case-changed, a look-alike, too long, with a NUL), the request is refused,
 * changes nothing and is audited as a denial.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeRun, makeWorld, removeWorld, writeOld, type World } from '../e2e/run-helpers.js';
import { attack, deniedPath, hostOp, isDenyRecord, summarise, tokenLine, type AttackRun, type AuditRecord, type Route } from './socket-helpers.js';

const SESSION = 'sec-sessions';

let world: World;
let result: AttackRun;
let routes: Route[];

const ws = (name: string) => path.join(world.ws, name);
const sessionDenied = (file: string) => (r: AuditRecord) => deniedPath(file)(r) && r.error?.code === 'BSH_SESSION_MISMATCH';
/** Refused before the pipeline (the JSON schema): audited as a malformed host operation. */
const schemaDenied = (words: string) => (r: AuditRecord) =>
  isDenyRecord(r) && r.command === 'HostFileOperation' && r.operation === 'malformed' && (r.reason ?? '').includes('sessionId') && (r.reason ?? '').includes(words);
/** Refused by the request schema in the broker (no paths survive a request it cannot read). */
const requestSchemaDenied = (words: string) => (r: AuditRecord) => isDenyRecord(r) && r.error?.code === 'BSH_BAD_REQUEST' && (r.reason ?? '').includes(words);

/** Deletes `name` (for good) under `sessionId`; the field is left out when undefined. */
const del = (name: string, sessionId: unknown) =>
  hostOp({ operation: 'delete', path: ws(name), deleteMode: 'unlink', toolCallId: '@CALL@', ...(sessionId === undefined ? {} : { sessionId }) });

function buildRoutes(): Route[] {
  const viaOp = (name: string, sessionId: unknown, audited = sessionDenied(ws(name))): Route => ({ name, send: [del(name, sessionId)], targets: [ws(name)], audited });
  const viaToken = (name: string, sessionId: string, audited = sessionDenied(ws(name))): Route => ({
    name,
    send: [tokenLine(ws(name), sessionId, '@CALL@')],
    targets: [ws(name)],
    audited,
  });
  return [
    viaOp('op-other', 'another-session'),
    viaOp('op-empty', '', (r) => deniedPath(ws('op-empty'))(r) && r.reason === 'request names no session'),
    viaOp('op-missing', undefined, schemaDenied('received undefined')),
    viaOp('op-null', null, schemaDenied('received null')),
    viaOp('op-number', 7, schemaDenied('received number')),
    viaOp('op-array', [SESSION], schemaDenied('received array')),
    viaOp('op-too-long', SESSION.repeat(30), schemaDenied('Too big')),
    viaOp('op-padded', ` ${SESSION} `),
    viaOp('op-upper', SESSION.toUpperCase()),
    viaOp('op-prefix', SESSION.slice(0, -1)),
    viaOp('op-lookalike', SESSION.replace('-', '\u2010')),
    viaOp('op-nul', `${SESSION}\u0000`, requestSchemaDenied('NUL')),
    viaToken('token-other', 'another-session'),
    viaToken('token-empty', '', (r) => deniedPath(ws('token-empty'))(r) && r.reason === 'request names no session'),
    viaToken('token-padded', `${SESSION} `),
    viaToken('token-too-long', 'x'.repeat(300), requestSchemaDenied('sessionId')),
    {
      name: 'token-extra-field',
      send: [`${tokenLine(ws('token-extra-field'), SESSION, '@CALL@')}\textra`],
      targets: [ws('token-extra-field')],
      audited: (r) => isDenyRecord(r) && r.operation === 'malformed' && (r.reason ?? '').includes('got 5'),
    },
  ];
}

beforeAll(async () => {
  world = await makeWorld('sec-sessions');
  routes = buildRoutes();
  for (const route of routes) await writeOld(ws(route.name), `${route.name} as it was\n`, 0o640);
  await writeOld(ws('legit'), 'legit\n', 0o640);
  // The same request under the right session works: the file goes (to the store, backed up).
  const legit: Route = { name: 'legit', send: [del('legit', SESSION)], targets: [], audited: () => true, refused: () => true };
  result = await attack(world, [...routes, legit], { session: SESSION });
  result.verdicts.delete('legit');
}, 120_000);

afterAll(async () => {
  if (result) summarise('socket-sessions.test.ts', result.verdicts);
  await removeWorld(world);
});

describe('socket: requests under another session, or none', () => {
  it('the run ends normally, and the same request under the run session is carried out', async () => {
    expect(result.run.status, describeRun(result.run)).toBe(0);
    expect(JSON.parse(result.results.get('legit')?.answers[0] ?? '{}')).toMatchObject({ ok: true, operation: 'delete' });
    await expect(fs.stat(ws('legit'))).rejects.toThrow();
  });

  it('token requests under a wrong session are answered DENY', () => {
    for (const name of ['token-other', 'token-empty', 'token-padded', 'token-too-long', 'token-extra-field']) {
      expect(result.results.get(name)?.answers, name).toEqual(['DENY']);
    }
  });

  it('every route is refused, leaves its file as it was and is audited as a denial', () => {
    const failures = [...result.verdicts].filter(([, v]) => !v.refused || !v.unchanged || !v.audited);
    expect(failures, JSON.stringify([...result.results.values()])).toEqual([]);
    expect(result.verdicts.size).toBe(routes.length);
  });
});
