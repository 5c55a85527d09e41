/**
 * Helpers for the agent-integration tests: a temp world (workspace, store, a directory
 * outside every root), sessions on it with the real kernel sandbox and the real broker,
 * and the committed turns of a session.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach } from 'vitest';
import { createSandboxSession, type SandboxSession } from '../../src/agent/session.js';
import type { Approver, SandboxSessionOptions } from '../../src/agent/types.js';
import type { SessionConfigInput } from '../../src/agent/config.js';
import type { ApprovalChoice } from '../../src/plugins/approval/index.js';
import { BackupHome, type BackupEntry, type TurnManifest } from '../../src/backup/index.js';
import { capturingLogger } from '../helpers/bare-broker.js';

export interface World {
  base: string;
  ws: string;
  home: string;
  outside: string;
}

const worlds: World[] = [];
const sessions: SandboxSession[] = [];

afterEach(async () => {
  for (const session of sessions.splice(0)) await session.close().catch(() => undefined);
  for (const world of worlds.splice(0)) await fs.rm(world.base, { recursive: true, force: true });
});

/** Fresh directories, realpath'd (the broker and the store record resolved paths); removed after the test. */
export async function makeWorld(prefix: string): Promise<World> {
  const base = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), `bsh-agent-${prefix}-`)));
  const world: World = { base, ws: path.join(base, 'ws'), home: path.join(base, 'home'), outside: path.join(base, 'out') };
  for (const dir of [world.ws, world.home, world.outside]) await fs.mkdir(dir);
  worlds.push(world);
  return world;
}

/** The environment commands start from: quiet, predictable, `$OUT` names the outside directory. */
export function worldEnv(world: World): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, LANG: 'C.UTF-8', LC_ALL: 'C.UTF-8', OUT: world.outside, XDG_DATA_HOME: path.join(world.base, 'xdg') };
  delete env.BROKERED_SHELL_SOCKET;
  return env;
}

export interface OpenOptions extends Omit<SandboxSessionOptions, 'config'> {
  config?: SessionConfigInput;
}

/** A session on the world (closed after the test), with a capturing logger. */
export async function openSession(world: World, options: OpenOptions = {}) {
  const { logger, lines } = capturingLogger();
  const session = await createSandboxSession({
    workspace: world.ws,
    home: world.home,
    env: worldEnv(world),
    logger,
    ...options,
  });
  sessions.push(session);
  return { session, logLines: lines };
}

/** An approver that answers `answer` and remembers every request. */
/** An approver that records what it is asked; a list answers each round in turn (its last answer after that). */
/** An answer a recording approver gives: yes/no, or (to an inline question) how far a yes reaches. */
export type RecordedAnswer = boolean | 'session' | 'directory' | 'directory-session';

/** Answers in turn (the last one again once they run out) and keeps every request. */
export function recordingApprover(answer: RecordedAnswer | readonly RecordedAnswer[]): Approver & { requests: Parameters<Approver>[0][] } {
  const requests: Parameters<Approver>[0][] = [];
  const answers: readonly RecordedAnswer[] = Array.isArray(answer) ? answer : [answer as RecordedAnswer];
  const approver = (request: Parameters<Approver>[0]) => {
    requests.push(request);
    const given = answers[Math.min(requests.length, answers.length) - 1] ?? false;
    if (typeof given === 'boolean') return given;
    if (request.kind !== 'path') return true;
    const wanted = (choice: ApprovalChoice) =>
      given === 'session' ? choice.scope === 'session' : choice.scope === 'directory' && choice.lasts === (given === 'directory' ? 'turn' : 'session');
    return request.choices.find(wanted) ?? false;
  };
  return Object.assign(approver, { requests });
}

export async function turnsOf(world: World, sessionId: string): Promise<TurnManifest[]> {
  const home = new BackupHome({ home: world.home });
  if (!(await home.listSessions()).includes(sessionId)) return [];
  return home.listTurns({ sessionId });
}

export async function turnById(world: World, sessionId: string, turnId: string): Promise<TurnManifest> {
  const turn = (await turnsOf(world, sessionId)).find((t) => t.id === turnId);
  if (!turn) throw new Error(`no turn ${turnId} in session ${sessionId}`);
  return turn;
}

/** The bytes a manifest entry saved. */
export async function savedBytes(world: World, turn: TurnManifest, file: string): Promise<string> {
  const entry: BackupEntry | undefined = turn.files.find((f) => f.path === file);
  if (!entry?.sha256) throw new Error(`${file} has no content in turn ${turn.id}`);
  const store = await new BackupHome({ home: world.home }).session(turn.sessionId);
  return (await store.readBlob(entry.sha256)).toString('utf8');
}

export const read = (file: string) => fs.readFile(file, 'utf8');
export const exists = (file: string) => fs.lstat(file).then(() => true, () => false);
