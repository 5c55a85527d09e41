/**
 * Crash consistency of the backup store: a child process backs up large files in a
 * loop (backup-worker.mjs) and is SIGKILLed at random points, again and again, into the
 * same open turn; between kills the journal's tail is sometimes torn by hand (what a
 * power cut in the middle of an append leaves). One session's store syncs each backup
 * (durability 'each'), the other's only writes them (durability 'turn': the page cache
 * outlives the killed process). After every kill, and at the end, in both:
 *
 * - every file under blobs/ hashes to its name (a half-written copy only ever lives
 *   under a temp name, which nothing trusts);
 * - the open turn still reads (a torn last line is ignored, never trusted) and holds
 *   every backup the worker saw acknowledged, with the same hash;
 * - every blob the turn refers to reads back verified, equal to its source;
 * - restoring the open turn brings every source back byte for byte.
 */
import { spawn } from 'node:child_process';
import { randomInt } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BackupHome, type TurnManifest } from '../../src/backup/index.js';
import { REPO_ROOT } from '../e2e/run-helpers.js';
import { sessionStoreDir, sha256 } from './fault-helpers.js';

const WORKER = path.join(REPO_ROOT, 'test', 'faults', 'backup-worker.mjs');
const DIST_BACKUP = path.join(REPO_ROOT, 'dist', 'backup', 'index.js');
const KIB = 1024;

/** Kills per session (two sessions are hammered at once); BSH_FAULT_KILLS raises it for a longer run. */
const KILLS = Number(process.env.BSH_FAULT_KILLS ?? 10);
const SESSIONS = [
  { id: 'crash-each', durability: 'each' },
  { id: 'crash-turn', durability: 'turn' },
] as const;
const TURN = '20261130-000000-c0ffee';

let base: string | undefined;
afterEach(async () => {
  if (base) await fs.rm(base, { recursive: true, force: true });
  base = undefined;
});

interface Cycle {
  acked: Array<{ path: string; sha256: string }>;
  /** The kill landed between `begin` and `ok` of a backup. */
  midBackup: boolean;
  signal: NodeJS.Signals | null;
}

/** Start the worker, let it run a random while after it is ready, SIGKILL it. */
function killOnce(home: string, sessionId: string, durability: string, data: string): Promise<Cycle> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [WORKER, DIST_BACKUP, home, sessionId, TURN, data, String(64 * KIB), String(1024 * KIB), durability], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    let timer: NodeJS.Timeout | undefined;
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString('utf8');
      if (timer === undefined && out.includes('ready\n')) timer = setTimeout(() => child.kill('SIGKILL'), randomInt(0, 300));
    });
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString('utf8')));
    child.once('error', reject);
    child.once('close', (code, signal) => {
      if (timer) clearTimeout(timer);
      if (signal !== 'SIGKILL') {
        reject(new Error(`the worker ended by itself (${String(code)}): ${err}`));
        return;
      }
      const lines = out.split('\n');
      const acked = lines.flatMap((line) => {
        const [word, file, hash] = line.split(' ');
        return word === 'ok' && file && hash ? [{ path: file, sha256: hash }] : [];
      });
      const last = lines.filter(Boolean).at(-1) ?? '';
      resolve({ acked, midBackup: last.startsWith('begin '), signal });
    });
  });
}

/** Append what a power cut in the middle of an append leaves: half a line, or a line that does not parse. */
async function tearJournal(root: string, variant: number): Promise<boolean> {
  const journal = path.join(root, 'turns', `${TURN}.journal`);
  const text = await fs.readFile(journal, 'utf8').catch(() => undefined);
  if (text === undefined) return false;
  const lines = text.split('\n').filter(Boolean);
  const model = lines.at(-1) ?? '{}';
  await fs.appendFile(journal, variant % 2 === 0 ? model.slice(0, Math.floor(model.length / 2)) : `${model.slice(0, 40)}\n`);
  return true;
}

async function blobFiles(root: string): Promise<string[]> {
  const out: string[] = [];
  const fanout = await fs.readdir(path.join(root, 'blobs')).catch(() => [] as string[]);
  for (const dir of fanout) for (const name of await fs.readdir(path.join(root, 'blobs', dir))) out.push(path.join(root, 'blobs', dir, name));
  return out;
}

/**
 * Every blob on disk matches its name and sits in its fan-out directory (those in
 * `checked` were verified before: a blob is never rewritten once named); returns how many.
 */
async function expectBlobsIntact(root: string, checked = new Set<string>()): Promise<number> {
  const files = await blobFiles(root);
  for (const file of files) {
    if (checked.has(file)) continue;
    checked.add(file);
    const name = path.basename(file);
    expect(path.basename(path.dirname(file))).toBe(name.slice(0, 2));
    expect(sha256(await fs.readFile(file)), file).toBe(name);
  }
  return files.length;
}

async function openTurn(home: string, sessionId: string): Promise<TurnManifest> {
  const turns = await new BackupHome({ home }).listTurns({ sessionId });
  expect(turns.map((t) => t.id)).toEqual([TURN]);
  const turn = turns[0] as TurnManifest;
  expect(turn.committedAt).toBeNull();
  return turn;
}

describe('the store under kill -9', () => {
  it('never trusts a half-written blob or a torn journal line, keeps every acknowledged backup, and restores', { timeout: 60_000 + KILLS * 6_000 }, async () => {
    base = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'bsh-fault-crash-')));
    const home = path.join(base, 'home');
    const stats = { kills: 0, midBackup: 0, torn: 0, acked: 0 };
    const hammer = async ({ id: sessionId, durability }: (typeof SESSIONS)[number]) => {
      const data = path.join(base!, `data-${sessionId}`);
      await fs.mkdir(data, { recursive: true });
      const root = sessionStoreDir(home, sessionId);
      const acked = new Map<string, string>();
      const checked = new Set<string>();
      for (let kill = 0; kill < KILLS; kill++) {
        const cycle = await killOnce(home, sessionId, durability, data);
        stats.kills++;
        if (cycle.midBackup) stats.midBackup++;
        for (const entry of cycle.acked) acked.set(entry.path, entry.sha256);
        await expectBlobsIntact(root, checked);
        // A turn's journal is written by its first backup: killed before one, the turn is not on disk yet.
        if (acked.size === 0 && (await new BackupHome({ home }).listTurns({ sessionId })).length === 0) continue;
        const turn = await openTurn(home, sessionId);
        const recorded = new Map(turn.files.map((f) => [f.path, f.sha256]));
        for (const [file, hash] of acked) expect(recorded.get(file), `acknowledged backup of ${file}`).toBe(hash);
        if (kill % 3 === 1 && (await tearJournal(root, kill))) {
          stats.torn++;
          // Ignored, not trusted: the turn reads the same as before the tear.
          expect((await openTurn(home, sessionId)).files.map((f) => f.path)).toEqual(turn.files.map((f) => f.path));
        }
      }
      return { sessionId, root, acked };
    };
    // Settled, not Promise.all: a failure in one session must not leave the other's worker writing under cleanup.
    const settled = await Promise.allSettled(SESSIONS.map(hammer));
    const failure = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failure) throw failure.reason;
    const results = settled.map((s) => (s as PromiseFulfilledResult<Awaited<ReturnType<typeof hammer>>>).value);

    for (const { sessionId, root, acked } of results) {
      stats.acked += acked.size;
      expect(acked.size).toBeGreaterThan(0);
      await expectBlobsIntact(root);
      const turn = await openTurn(home, sessionId);
      const store = await new BackupHome({ home }).session(sessionId);
      // Every blob the turn refers to reads back verified and equal to its source (never changed since).
      for (const entry of turn.files) {
        expect(entry.sha256).not.toBeNull();
        const bytes = await store.readBlob(entry.sha256 ?? '');
        expect(bytes.equals(await fs.readFile(entry.path)), entry.path).toBe(true);
      }
      // Restore of the open turn (forced: it was never committed) brings every source back.
      const originals = new Map<string, Buffer>();
      for (const entry of turn.files) {
        originals.set(entry.path, await fs.readFile(entry.path));
        await fs.writeFile(entry.path, 'changed after the turn\n');
      }
      const report = await store.restore(TURN, { force: true });
      expect(report.failed).toEqual([]);
      expect(report.restored).toHaveLength(turn.files.length);
      for (const [file, bytes] of originals) expect((await fs.readFile(file)).equals(bytes), file).toBe(true);
    }
    expect(stats.kills).toBe(KILLS * SESSIONS.length);
    expect(stats.torn).toBeGreaterThan(0);
    console.info(`store crash: ${JSON.stringify(stats)}`);
  });
});
