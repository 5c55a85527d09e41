/**
 * Escape suite, broker socket: forged tool-call ids. Two calls of one sandbox session run
 * at once in the real kernel sandbox (the session API an agent CLI embeds). The attacker
 * knows the victim's tool call id and sends socket requests under it for paths a rule
 * puts to a person; the victim's own write needs approval too, and the person approves
 * what is asked for the victim. The forged requests must be refused (not remembered as
 * the victim's), so they are never in the victim's question, never granted, and the
 * attacker cannot write those paths afterwards either.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSandboxSession, type SandboxSession } from '../../src/agent/index.js';
import type { ApprovalRequest, ExecuteResult } from '../../src/agent/types.js';
import { getAuditHooks, type AuditRecord } from '../../src/plugins/audit.js';
import { makeWorld, removeWorld, writeOld, type World } from '../e2e/run-helpers.js';
import { changedTargets, deniedPath, hostOp, judge, states, summarise, tokenLine, writeClient, type Route, type Verdict } from './socket-helpers.js';

const SESSION = 'sec-toolcall';
const VICTIM = 'call-victim';
const ATTACKER = 'call-attacker';

let world: World;
let session: SandboxSession;
const approvals: ApprovalRequest[] = [];
const audit: AuditRecord[] = [];
let victim: ExecuteResult;
let attacker: ExecuteResult;
let verdicts: Map<string, Verdict>;
let routes: Route[];

const ws = (name: string) => path.join(world.ws, name);
/** Refused under the victim's id, by the binding of calls to their processes. */
const forgedDenial = (file: string) => (r: AuditRecord) => deniedPath(file)(r) && r.verdict === 'deny' && r.toolCallId === VICTIM && r.decidedBy === 'tool-call-binding';

function buildRoutes(): Route[] {
  const op = (fields: Record<string, unknown>) => hostOp({ sessionId: SESSION, toolCallId: VICTIM, ...fields });
  return [
    { name: 'forged-token', send: [tokenLine(ws('stolen.prompt'), SESSION, VICTIM)], targets: [ws('stolen.prompt')], audited: forgedDenial(ws('stolen.prompt')) },
    { name: 'forged-delete', send: [op({ operation: 'delete', path: ws('gone.prompt'), deleteMode: 'unlink' })], targets: [ws('gone.prompt')], audited: forgedDenial(ws('gone.prompt')) },
    { name: 'forged-touch', send: [op({ operation: 'touch', path: ws('touched.prompt') })], targets: [ws('touched.prompt')], audited: forgedDenial(ws('touched.prompt')) },
    {
      name: 'forged-prebackup',
      send: [JSON.stringify({ command: 'CommandPrebackup', argv: ['dd', `of=${ws('dd.prompt')}`], cwd: world.ws, sessionId: SESSION, toolCallId: VICTIM })],
      targets: [ws('dd.prompt')],
      audited: forgedDenial(ws('dd.prompt')),
    },
    {
      name: 'forged-plain-write',
      send: [tokenLine(ws('plain.txt'), SESSION, VICTIM)],
      targets: [ws('plain.txt')],
      audited: forgedDenial(ws('plain.txt')),
    },
    {
      name: 'unknown-call-id',
      send: [tokenLine(ws('old.prompt'), SESSION, 'call-finished-long-ago')],
      targets: [ws('old.prompt')],
      audited: (r) => deniedPath(ws('old.prompt'))(r) && r.decidedBy === 'tool-call-binding',
    },
  ];
}

/** Waits (bounded) for a marker file in the workspace. */
const waitFor = (name: string) => `for i in $(seq 400); do [ -e ${name} ] && break; sleep 0.05; done`;

beforeAll(async () => {
  world = await makeWorld('sec-toolcall');
  for (const name of ['stolen.prompt', 'gone.prompt', 'old.prompt', 'plain.txt']) await writeOld(ws(name), `${name} as it was\n`, 0o640);
  routes = buildRoutes();
  await writeClient(world.tools, routes);
  const targets = [...new Set(routes.flatMap((r) => r.targets))];
  const before = await states(targets);
  session = await createSandboxSession({
    workspace: world.ws,
    sessionId: SESSION,
    home: world.home,
    userHome: world.base,
    env: { ...process.env, TOOLS: world.tools },
    config: { fileSafety: { rules: [{ pattern: '*.prompt', access: ['write', 'delete'], decision: 'prompt' }] } },
    // The person approves what is asked for the victim's command (for the session), nothing else.
    approver: (request) => {
      approvals.push(request);
      if (request.toolCallId !== VICTIM) return false;
      return request.kind === 'path' ? (request.choices.find((choice) => choice.scope === 'session') ?? false) : true;
    },
  });
  getAuditHooks(session.broker).record.tap('test', (record) => void audit.push(record));
  await session.beginTurn({ userMessage: 'two calls at once' });
  const victimScript = [waitFor('a-sent'), 'echo victim > mine.prompt && touch b-done'].join('\n');
  const attackerScript = [
    'python3 "$TOOLS/client.py" cases "$TOOLS/cases.json"',
    'touch a-sent',
    // Once the victim was approved: would the forged paths now be granted?
    waitFor('b-done'),
    'echo pwned > stolen.prompt; echo "@@late-write $?"',
    'rm -f gone.prompt; echo "@@late-delete $?"',
  ].join('\n');
  [victim, attacker] = await Promise.all([
    session.execute(victimScript, { toolCallId: VICTIM, timeoutMs: 60_000 }),
    session.execute(attackerScript, { toolCallId: ATTACKER, timeoutMs: 60_000 }),
  ]);
  await session.endTurn();
  const changed = changedTargets(targets, before, await states(targets));
  verdicts = judge(routes, attacker.stdout, audit, changed).verdicts;
}, 120_000);

afterAll(async () => {
  if (verdicts) summarise('socket-toolcall.test.ts', verdicts);
  await session?.close();
  await removeWorld(world);
});

describe('socket: a request under another running call\'s id', () => {
  it('both calls ran in the sandbox; the victim was asked while its write waited, and approved', async () => {
    expect(victim.exitCode, victim.stderr).toBe(0);
    expect(attacker.sandboxed && victim.sandboxed).toBe(true);
    expect(victim.approval).toMatchObject({ asked: true, approved: true, rerun: false });
    expect(await fs.readFile(ws('mine.prompt'), 'utf8')).toBe('victim\n');
  });

  it("the victim's question names only the victim's own path", () => {
    const asked = approvals.filter((a) => a.toolCallId === VICTIM);
    expect(asked).toHaveLength(1);
    const [question] = asked;
    expect(question?.kind === 'path' ? [question.block.normalisedPath] : []).toEqual([ws('mine.prompt')]);
  });

  it('nothing the attacker asked for under the forged id was granted', () => {
    expect(session.grants.map((g) => g.path)).toEqual([ws('mine.prompt')]);
  });

  it('after the approval the attacker still cannot write or delete those paths', () => {
    expect(attacker.stdout).toMatch(/^@@late-write 1$/m);
    expect(attacker.stdout).toMatch(/^@@late-delete 1$/m);
  });

  it('every forged route is refused, leaves its target as it was and is audited as a denial', () => {
    const failures = [...verdicts].filter(([, v]) => !v.refused || !v.unchanged || !v.audited);
    expect(failures, attacker.stdout).toEqual([]);
    expect(verdicts.size).toBe(routes.length);
  });
});
