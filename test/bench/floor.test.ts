import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { RunnerResult, WorkloadResult } from '../../bench/lib/compare.js';
import { openRunners } from '../../bench/lib/runners.js';
import { changedFile } from '../../bench/lib/durable-floor.js';
import type { MicroRow } from '../../bench/lib/micro.js';
import { floorFindings, socketFloorFinding } from '../../bench/lib/summary.js';

function runner(id: RunnerResult['runner'], medianMs: number, extra: Partial<RunnerResult> = {}): RunnerResult {
  return { runner: id, runsMs: [medianMs], minMs: medianMs, medianMs, maxMs: medianMs, ...extra };
}

function workload(id: string, target: WorkloadResult['target'], runners: RunnerResult[]): WorkloadResult {
  return { id, label: id, command: 'true', via: 'library', ...(target ? { target } : {}), runners };
}

describe('floor findings', () => {
  it('says when the sandbox alone misses a target, and what the broker adds per request', () => {
    const lines = floorFindings([
      workload('git', { kind: 'ratio', max: 1.5 }, [
        runner('native', 1000),
        runner('floor', 2100, { ratio: 2.1, extraMs: 1100, met: false, requests: 15000 }),
        runner('seccomp', 5100, { ratio: 5.1, extraMs: 4100, met: false, requests: 15000 }),
      ]),
      workload('create', { kind: 'ratio', max: 2 }, [
        runner('native', 2000),
        runner('floor', 2800, { ratio: 1.4, extraMs: 800, met: true }),
        runner('seccomp', 4800, { ratio: 2.4, extraMs: 2800, met: false, requests: 10000 }),
      ]),
      workload('startup-lib', { kind: 'extra-ms', max: 25 }, [runner('native', 6), runner('floor', 9, { ratio: 1.5, extraMs: 3, met: true })]),
      { ...workload('startup-cli', { kind: 'extra-ms', max: 25 }, [runner('native', 4), runner('floor', 49, { extraMs: 45, ratio: 12.25, met: false }), runner('seccomp', 204)]), via: 'cli' },
      // Two decimals would print the target itself next to "misses".
      workload('cat', { kind: 'ratio', max: 1.05 }, [
        runner('native', 447),
        runner('floor', 471.4, { ratio: 1.0546, extraMs: 24.4, met: false, requests: 0 }),
        runner('seccomp', 465, { ratio: 1.04, extraMs: 18, met: true, requests: 0 }),
      ]),
    ]);
    expect(lines).toEqual([
      "git: the floor is 2.10× native, **already misses ≤ 1.5×**: no change to the broker's pipeline can meet it here; the broker adds 3,000 ms over it, 200 µs per request.",
      'create: the floor is 1.40× native, within ≤ 2×; the broker adds 2,000 ms over it, 200 µs per request.',
      'startup-lib: the floor is +3.00 ms native, within ≤ +25 ms.',
      'startup-cli: the floor is +45.0 ms native, **already misses ≤ +25 ms**: no command-line tool in Node can meet it here; the rest of the CLI adds 155 ms over it.',
      "cat: the floor is 1.055× native, **already misses ≤ 1.05×**: no change to the broker's pipeline can meet it here; no request reached the broker (seccomp − floor: -6.40 ms).",
    ]);
  });

  it('says whether the durable backups alone, on top of the floor, already miss a target', () => {
    const lines = floorFindings([
      workload('sed', { kind: 'ratio', max: 2.5 }, [
        runner('native', 200),
        runner('floor', 400, { ratio: 2, extraMs: 200, met: true, requests: 3000 }),
        runner('floor-backup', 1400, { ratio: 7, extraMs: 1200, met: false, requests: 3000, backups: 1000 }),
        runner('seccomp', 1700, { ratio: 8.5, extraMs: 1500, met: false, requests: 3000, backups: 1000 }),
      ]),
      // No backup made: the durable floor is the floor, nothing more to say.
      workload('create', { kind: 'ratio', max: 2 }, [
        runner('native', 2000),
        runner('floor', 2800, { ratio: 1.4, extraMs: 800, met: true }),
        runner('floor-backup', 2810, { ratio: 1.405, extraMs: 810, met: true, backups: 0 }),
      ]),
    ]);
    expect(lines).toEqual([
      "sed: the floor is 2.00× native, within ≤ 2.5×; the broker adds 1,300 ms over it, 433 µs per request; with the durable backups the store's contract requires (1,000 per run) and nothing else, the floor is 7.00× native, **already misses ≤ 2.5×**: not reachable while every backup is synced before its change.",
      'create: the floor is 1.40× native, within ≤ 2×.',
    ]);
  });

  it('has nothing to say without a target or a floor that ran', () => {
    const lines = floorFindings([
      workload('tar', undefined, [runner('native', 100), runner('floor', 200, { ratio: 2, extraMs: 100 })]),
      workload('sed', { kind: 'ratio', max: 2.5 }, [runner('native', 100), runner('floor', Number.NaN, { error: 'exit 1' })]),
      workload('grep', { kind: 'ratio', max: 1.05 }, [runner('native', 100), runner('seccomp', 110, { ratio: 1.1, extraMs: 10 })]),
    ]);
    expect(lines).toEqual([]);
  });
});

describe('socket floor finding', () => {
  const row = (id: string, p50Us: number, maxP50Us?: number): MicroRow => ({ id, label: id, n: 100, p50Us, p99Us: p50Us, meanUs: p50Us, reqPerSec: 1, ...(maxP50Us ? { maxP50Us } : {}) });

  it('says whether the server and core alone meet the target, and what the plugins add', () => {
    expect(socketFloorFinding([row('socket-echo', 25.8), row('socket-core', 61, 50), row('socket-token-read', 106, 50)])).toBe(
      'socket: the server and core with no standard plugin answer a text token at p50 61.0 µs, **already misses p50 ≤ 50 µs**: no change to the plugins can meet it here; the standard plugins add 45.0 µs; the echo server (no broker) answers at 25.8 µs.',
    );
    expect(socketFloorFinding([row('socket-core', 40, 50)])).toBe('socket: the server and core with no standard plugin answer a text token at p50 40.0 µs, within p50 ≤ 50 µs.');
    expect(socketFloorFinding([row('socket-echo', 25.8), row('socket-token-read', 106, 50)])).toBeUndefined();
  });
});

describe('floor runner', () => {
  const base = mkdtempSync(path.join(os.tmpdir(), 'bsh-floor-test-'));
  afterAll(() => rmSync(base, { recursive: true, force: true }));

  it('runs the command under the real sandbox, every request allowed, none of it backed up; its CLI is Node spawning it', async () => {
    const workspace = path.join(base, 'ws');
    const scratch = path.join(base, 'scratch');
    mkdirSync(workspace);
    mkdirSync(scratch);
    const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', TMPDIR: scratch, BROKERED_SHELL_HOME: path.join(base, 'home') };
    const [slot] = await openRunners(['floor'], { env, workspace, home: path.join(base, 'home'), srtSettings: '', scratch });
    if (!slot || !('runner' in slot)) throw new Error(`the floor runner did not open: ${slot && 'unavailable' in slot ? slot.unavailable : '?'}`);
    const result = await slot.runner.run('echo one > a; echo two > b; mv a c; rm b; mkdir d', workspace);
    expect(result.code).toBe(0);
    expect(readdirSync(workspace).sort()).toEqual(['c', 'd']);
    expect(readFileSync(path.join(workspace, 'c'), 'utf8')).toBe('one\n');
    // two creates, the rename, the unlink and the mkdir, each through the supervisor
    expect(result.requests).toBe(5);
    expect(result.backups).toBe(0);
    // Its CLI floor: Node spawning the command outside any sandbox.
    const viaNode = await slot.runner.cli('echo three > e', workspace);
    expect(viaNode.code).toBe(0);
    expect(readFileSync(path.join(workspace, 'e'), 'utf8')).toBe('three\n');
    await slot.runner.close();
  });

  it('with durable backups, keeps each existing file it changes once per run, before the change, and only those', async () => {
    const workspace = path.join(base, 'ws-backup');
    const scratch = path.join(base, 'scratch-backup');
    const home = path.join(base, 'home-backup');
    mkdirSync(workspace);
    mkdirSync(scratch);
    writeFileSync(path.join(workspace, 'kept'), 'old bytes\n');
    writeFileSync(path.join(workspace, 'gone'), 'removed\n');
    const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', TMPDIR: scratch, BROKERED_SHELL_HOME: home };
    const [slot] = await openRunners(['floor-backup'], { env, workspace, home, srtSettings: '', scratch });
    if (!slot || !('runner' in slot)) throw new Error(`the floor-backup runner did not open: ${slot && 'unavailable' in slot ? slot.unavailable : '?'}`);
    const result = await slot.runner.run("sed -i 's/old/new/' kept; echo again >> kept; rm gone; echo fresh > made", workspace);
    await slot.runner.close();
    expect(result.code).toBe(0);
    expect(readFileSync(path.join(workspace, 'kept'), 'utf8')).toBe('new bytes\nagain\n');
    // kept (once, as it was before sed) and gone; not made, not sed's own temp
    expect(result.backups).toBe(2);
    const store = path.join(home, 'floor-backup');
    const hash = (text: string) => createHash('sha256').update(text).digest('hex');
    expect(readdirSync(path.join(store, 'blobs')).sort()).toEqual([hash('old bytes\n'), hash('removed\n')].sort());
    expect(readFileSync(path.join(store, 'blobs', hash('old bytes\n')), 'utf8')).toBe('old bytes\n');
    const journal = readFileSync(path.join(store, 'journal.jsonl'), 'utf8').trim().split('\n').map((line) => JSON.parse(line) as { path: string });
    expect(journal.map((entry) => path.basename(entry.path)).sort()).toEqual(['gone', 'kept']);
  });
});

describe('changedFile', () => {
  const request = (op: 'open' | 'rename' | 'unlink' | 'mkdir' | 'chmod', flags: number, to?: string) => ({ id: 1, op, pid: 1, tgid: 1, flags, mode: 0, follow: true, path: '/w/a', ...(to ? { to } : {}) });
  const O_WRONLY = 0o1;
  const O_RDWR = 0o2;
  const O_CREAT = 0o100;
  const O_EXCL = 0o200;
  const O_TRUNC = 0o1000;

  it('names the existing file a request may change, as the store would back it up', () => {
    expect(changedFile(request('open', O_WRONLY | O_CREAT | O_TRUNC))).toBe('/w/a');
    expect(changedFile(request('open', O_RDWR))).toBe('/w/a');
    expect(changedFile(request('open', O_WRONLY | O_CREAT | O_EXCL))).toBeUndefined();
    expect(changedFile(request('open', 0))).toBeUndefined();
    expect(changedFile(request('rename', 0, '/w/b'))).toBe('/w/b');
    expect(changedFile(request('unlink', 0))).toBe('/w/a');
    expect(changedFile(request('mkdir', 0))).toBeUndefined();
    expect(changedFile(request('chmod', 0))).toBeUndefined();
  });
});
