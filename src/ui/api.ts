import type { IncomingMessage, ServerResponse } from 'node:http';
import { z } from 'zod';
import { turnEntries, type BackupHome, type FoundTurn, type SetTimesNs } from '../backup/index.js';
import { restoreTurnFiles } from '../agent/turn-history.js';
import { BrokerError, ErrorCodes } from '../core/errors.js';
import { HttpError, readJsonBody, sendError, sendJson } from './http.js';
import { rewindPlan, rewindSession } from './rewind.js';
import { diffView, turnSummary, turnView, type TurnSummary } from './views.js';

/**
 * The page's JSON API. Reads are GETs; restore and rewind are POSTs that run one at a
 * time and call the same functions as `backups restore`. The server has already checked
 * the secret, the Host and, for POSTs, the origin.
 *
 *   GET  /api/sessions                          sessions and their turns
 *   GET  /api/turn?session=S&turn=T             a turn's files and where each stands now
 *   GET  /api/diff?session=S&turn=T&path=P      one file's diff, backup → now
 *   GET  /api/rewind-plan?session=S&turn=T      the turns a rewind to before T restores, and its dry run
 *   POST /api/restore {session, turn, paths?, force?, dryRun?}
 *   POST /api/rewind  {session, turn, turns, force?} (turns: the ids the confirmation listed; 409 when the plan changed)
 */
export interface ApiContext {
  home: BackupHome;
  setTimesNs: SetTimesNs | undefined;
}

const BODY_LIMIT = 1024 * 1024;
const id = z.string().min(1).max(256);
const turnQuery = z.strictObject({ session: id, turn: id });
const diffQuery = z.strictObject({ session: id, turn: id, path: z.string().min(1).max(4096) });
const absolutePath = z
  .string()
  .min(1)
  .max(4096)
  .refine((p) => p.startsWith('/') && !p.includes('\0'), 'not an absolute path');
const restoreBody = z.strictObject({
  session: id,
  turn: id,
  paths: z.array(absolutePath).max(100_000).optional(),
  force: z.boolean().optional(),
  dryRun: z.boolean().optional(),
});
/** `turns`: the ids the confirmation listed (newest first); the rewind runs only if they are still the plan. */
const rewindBody = z.strictObject({ session: id, turn: id, turns: z.array(id).min(1).max(100_000), force: z.boolean().optional() });

export class Api {
  readonly #ctx: ApiContext;
  /** Restores and rewinds, one at a time: two at once could rescue each other's half-written files. */
  #writes: Promise<unknown> = Promise.resolve();

  constructor(ctx: ApiContext) {
    this.#ctx = ctx;
  }

  async handle(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    try {
      sendJson(res, 200, await this.#route(req, url));
    } catch (error) {
      const { status, message, code } = describe(error);
      sendError(res, status, message, code);
    }
  }

  async #route(req: IncomingMessage, url: URL): Promise<unknown> {
    const route = `${req.method ?? ''} ${url.pathname}`;
    const query = () => Object.fromEntries(url.searchParams);
    const { home } = this.#ctx;
    switch (route) {
      case 'GET /api/sessions':
        return this.#sessions();
      case 'GET /api/turn': {
        const q = parse(turnQuery, query());
        const { manifest } = await exactTurn(home, q.session, q.turn);
        return { turn: await turnView(manifest, this.#ctx.setTimesNs) };
      }
      case 'GET /api/diff': {
        const q = parse(diffQuery, query());
        const { store, manifest } = await exactTurn(home, q.session, q.turn);
        const entry = turnEntries(manifest).find((f) => f.path === q.path);
        if (!entry) throw new HttpError(404, `turn ${manifest.id} did not touch ${q.path}`);
        return { path: entry.path, diff: await diffView(store, entry, this.#ctx.setTimesNs) };
      }
      case 'GET /api/rewind-plan': {
        // The turns, and a dry run of the rewind (it changes nothing): what the confirmation shows.
        const q = parse(turnQuery, query());
        await exactTurn(home, q.session, q.turn);
        const turns = (await rewindPlan(home, q.session, q.turn)).map(turnSummary);
        return { turns, preview: await rewindSession(home, q.session, q.turn, { dryRun: true }) };
      }
      case 'POST /api/restore': {
        const body = parse(restoreBody, await readJsonBody(req, BODY_LIMIT));
        await exactTurn(home, body.session, body.turn);
        return this.#exclusively(async () => {
          const options = { sessionId: body.session, force: body.force ?? false, dryRun: body.dryRun ?? false };
          const { report, refused } = await restoreTurnFiles(home, body.turn, body.paths ?? [], options);
          return { refused, report };
        });
      }
      case 'POST /api/rewind': {
        const body = parse(rewindBody, await readJsonBody(req, BODY_LIMIT));
        await exactTurn(home, body.session, body.turn);
        return this.#exclusively(() => rewindSession(home, body.session, body.turn, { force: body.force ?? false, confirmed: body.turns }));
      }
      default:
        throw new HttpError(url.pathname.startsWith('/api/') && knownPath(url.pathname) ? 405 : 404, `no ${route}`);
    }
  }

  async #sessions(): Promise<{ home: string; sessions: Array<{ id: string; turns: TurnSummary[] }> }> {
    const { home } = this.#ctx;
    const sessions = new Map<string, TurnSummary[]>((await home.listSessions()).map((s) => [s, []]));
    for (const turn of await home.listTurns()) sessions.get(turn.sessionId)?.push(turnSummary(turn));
    return { home: home.home, sessions: [...sessions].map(([sessionId, turns]) => ({ id: sessionId, turns })) };
  }

  #exclusively<T>(task: () => Promise<T>): Promise<T> {
    const run = this.#writes.then(task, task);
    this.#writes = run.catch(() => undefined);
    return run;
  }
}

/**
 * The turn with exactly this id. The page names turns by the ids it listed; a prefix or
 * `latest` (which the command line takes) could name another turn by the time a restore
 * runs than the one the page showed.
 */
async function exactTurn(home: BackupHome, session: string, turn: string): Promise<FoundTurn> {
  const found = await home.findTurn(turn, { sessionId: session });
  if (found.manifest.id !== turn) throw new HttpError(404, `no turn ${JSON.stringify(turn)} in session ${JSON.stringify(session)}: the viewer takes whole turn ids`);
  return found;
}

const KNOWN = new Set(['/api/sessions', '/api/turn', '/api/diff', '/api/rewind-plan', '/api/restore', '/api/rewind']);
const knownPath = (pathname: string) => KNOWN.has(pathname);

function parse<T>(schema: z.ZodType<T>, value: unknown): T {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  throw new HttpError(400, parsed.error.issues.map((i) => `${i.path.join('.') || '(request)'}: ${i.message}`).join('; '));
}

function describe(error: unknown): { status: number; message: string; code?: string } {
  if (error instanceof HttpError) return { status: error.status, message: error.message };
  if (error instanceof BrokerError) {
    const status = error.code === ErrorCodes.TURN_NOT_FOUND ? 404 : error.code === ErrorCodes.INVALID_OPTIONS ? 400 : 500;
    return { status, message: error.message, code: error.code };
  }
  return { status: 500, message: error instanceof Error ? error.message : String(error) };
}
