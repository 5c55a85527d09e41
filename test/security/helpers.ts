/**
 * The escape suite's table runner. Each route is a few lines of bash (calling bash
 * itself, python3, perl or the C fixtures of test/fixtures/security) that try to change
 * something the sandbox must protect. All routes of a file run in ONE real
 * `brokered-shell run` (the real kernel sandbox, broker and store; `run-helpers.ts`),
 * one after the other, each preceded by a marker: a refused write to a file named after
 * the route, whose audit record opens the route's segment of the audit trail. Refusals
 * are recorded before the refused call returns (requests and supervisor reports alike),
 * so every record a route caused lands in its own segment.
 *
 * For every route we check: (1) refused: the route's status is the expected failure;
 * (2) unchanged: each target's bytes, mode, owner, mtime, xattrs (directories: their
 * entries) are as before; (3) audited: a refusal record in the route's segment that
 * names a target (a broker denial, or a supervisor refusal with operation 'syscall'),
 * or, for calls without a path, the refused syscall.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import type { BigIntStats } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { AuditRecord } from '../../src/plugins/audit.js';
import { ST, caseStatuses, describeRun, makeWorld, run, type CliRun, type RunFlags, type World } from '../e2e/run-helpers.js';

export { describeRun, removeWorld, writeOld, type World } from '../e2e/run-helpers.js';

const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'security');

/** Compiles test/fixtures/security/NAME.c into the world's tools dir ($TOOLS/NAME inside). */
export function buildSecurityTools(world: World, names: readonly string[]): void {
  for (const name of names) {
    execFileSync('cc', ['-O2', '-Wall', '-Wextra', '-Werror', '-pthread', '-o', path.join(world.tools, name), path.join(FIXTURES, `${name}.c`)]);
  }
}

export interface SecurityWorld extends World {
  /** Outside every root: the markers that split the audit trail per route. */
  marks: string;
}

export async function makeSecurityWorld(prefix: string, tools: readonly string[] = ['escape']): Promise<SecurityWorld> {
  const world = await makeWorld(`sec-${prefix}`);
  const marks = path.join(world.base, 'marks');
  await fs.mkdir(marks);
  buildSecurityTools(world, tools);
  return { ...world, marks };
}

/** What must show in the audit trail for a route. */
export type AuditExpectation =
  /** A refusal naming one of these paths (as asked or as resolved), with this verdict (default deny). */
  | { paths: readonly string[]; verdict?: 'deny' | 'prompt' }
  /** A denial naming a path like this (for paths known only while the command runs, e.g. a pid). */
  | { pathMatch: RegExp }
  /** The supervisor's own refusal of one of these syscalls. */
  | { syscalls: readonly string[] };

export interface Route {
  name: string;
  /** bash; runs in the workspace with $OUT, $TOOLS, $TMPDIR, $SUP (supervisor pid), $BROKER (run's pid). */
  script: string;
  /** Files and directories that must be exactly as before. */
  targets: readonly string[];
  /** Default: a refusal naming a target. */
  audit?: AuditExpectation;
  /** The route's status when refused (default 1). */
  status?: number;
}

/** The state of a path that a change would show: content, mode, owner, mtime, xattrs; a directory's entries. */
export interface PathState {
  type: 'file' | 'dir' | 'symlink' | 'other' | 'missing';
  mode?: number;
  uid?: number;
  gid?: number;
  mtimeNs?: string;
  sha256?: string;
  entries?: string[];
  link?: string;
  xattrs?: string[];
}

async function stateOf(p: string): Promise<PathState> {
  let st: BigIntStats;
  try {
    st = await fs.lstat(p, { bigint: true });
  } catch {
    return { type: 'missing' };
  }
  const base = { mode: Number(st.mode & 0o7777n), uid: Number(st.uid), gid: Number(st.gid), mtimeNs: st.mtimeNs.toString() };
  if (st.isFile()) return { type: 'file', ...base, sha256: createHash('sha256').update(await fs.readFile(p)).digest('hex') };
  if (st.isDirectory()) return { type: 'dir', ...base, entries: (await fs.readdir(p)).sort() };
  if (st.isSymbolicLink()) return { type: 'symlink', link: await fs.readlink(p) };
  return { type: 'other', ...base };
}

/** Node has no xattr API: every target's user xattrs in one python3 call. */
function xattrsOf(paths: readonly string[]): Record<string, string[]> {
  const script = `import json, os, sys
out = {}
for p in sys.argv[1:]:
    try:
        out[p] = sorted(os.listxattr(p, follow_symlinks=False))
    except OSError:
        out[p] = []
print(json.dumps(out))`;
  return JSON.parse(execFileSync('python3', ['-c', script, ...paths], { encoding: 'utf8' })) as Record<string, string[]>;
}

export async function snapshot(paths: readonly string[]): Promise<Map<string, PathState>> {
  const unique = [...new Set(paths)];
  const xattrs = xattrsOf(unique);
  const out = new Map<string, PathState>();
  for (const p of unique) out.set(p, { ...(await stateOf(p)), xattrs: xattrs[p] ?? [] });
  return out;
}

export interface RoutesRun {
  result: CliRun;
  statuses: Map<string, number>;
  /** Every audit record of the run, in order. */
  records: AuditRecord[];
  /** The records between a route's marker and the next one. */
  segments: Map<string, AuditRecord[]>;
  before: Map<string, PathState>;
  after: Map<string, PathState>;
}

/** The `phase: 'audit'` log lines of a run's stderr (the CLI logs refusals at warn). */
export function auditRecords(stderr: string): AuditRecord[] {
  const out: AuditRecord[] = [];
  for (const line of stderr.split('\n')) {
    if (!line.startsWith('{') || !line.includes('"phase":"audit"')) continue;
    try {
      const parsed = JSON.parse(line) as { phase?: string; audit?: AuditRecord };
      if (parsed.phase === 'audit' && parsed.audit) out.push(parsed.audit);
    } catch {
      // A line of the command's own that only looks like JSON.
    }
  }
  return out;
}

export interface RunRoutesOptions extends RunFlags {
  /** bash run after the routes (its statuses are in `statuses` too). */
  epilogue?: readonly string[];
  /** Extra paths to snapshot before and after. */
  watch?: readonly string[];
}

/** Runs every route in one `brokered-shell run`, audit logged at warn, and collects what it needs to judge them. */
export async function runRoutes(world: SecurityWorld, routes: readonly Route[], options: RunRoutesOptions = {}): Promise<RoutesRun> {
  const watched = [...routes.flatMap((r) => r.targets), ...(options.watch ?? [])];
  const before = await snapshot(watched);
  const script = [
    ST,
    'export SUP=$PPID; export BROKER=$(awk \'/^PPid:/{print $2}\' /proc/$SUP/status)',
    `mark() { : > "${world.marks}/$1" 2>/dev/null; }`,
    ...routes.map((route) => `mark ${route.name}\n${route.script}\nst ${route.name}`),
    'mark end',
    ...(options.epilogue ?? []),
  ].join('\n');
  const { epilogue: _e, watch: _w, ...flags } = options;
  const result = await run(world, script, { session: `security-${path.basename(world.base)}`, ...flags }, { env: { BROKERED_SHELL_LOG_LEVEL: 'warn' } });
  const records = auditRecords(result.stderr);
  const segments = new Map<string, AuditRecord[]>();
  let current: AuditRecord[] | undefined;
  for (const record of records) {
    const mark = record.paths.find((p) => path.dirname(p.path) === world.marks);
    if (mark) {
      current = [];
      segments.set(path.basename(mark.path), current);
    } else {
      current?.push(record);
    }
  }
  return { result, statuses: caseStatuses(result.out), records, segments, before, after: await snapshot(watched) };
}

export interface RouteOutcome {
  name: string;
  refused: boolean;
  unchanged: boolean;
  audited: boolean;
  /** What a failed expectation needs to be understood. */
  detail: string;
}

function names(record: AuditRecord, paths: readonly string[]): boolean {
  return record.paths.some((p) => paths.includes(p.path) || (p.normalisedPath !== undefined && paths.includes(p.normalisedPath)));
}

export function judge(routesRun: RoutesRun, route: Route): RouteOutcome {
  const status = routesRun.statuses.get(route.name);
  const refused = status === (route.status ?? 1);
  const changed = route.targets.filter((t) => JSON.stringify(routesRun.before.get(t)) !== JSON.stringify(routesRun.after.get(t)));
  const segment = routesRun.segments.get(route.name) ?? [];
  const expect = route.audit ?? { paths: route.targets };
  const audited = segment.some((record) => {
    if (record.ok) return false;
    if ('syscalls' in expect) return record.operation === 'syscall' && expect.syscalls.includes(record.syscall?.name ?? '');
    if ('pathMatch' in expect) return record.verdict === 'deny' && record.paths.some((p) => expect.pathMatch.test(p.path) || expect.pathMatch.test(p.normalisedPath ?? ''));
    return record.verdict === (expect.verdict ?? 'deny') && names(record, expect.paths);
  });
  const lines = [
    `route ${route.name}: status ${String(status)} (refused: ${route.status ?? 1})`,
    ...changed.map((t) => `changed ${t}: ${JSON.stringify(routesRun.before.get(t))} -> ${JSON.stringify(routesRun.after.get(t))}`),
    `audit segment: ${JSON.stringify(segment.map((r) => ({ op: r.operation, verdict: r.verdict, paths: r.paths, syscall: r.syscall?.name, reason: r.reason })))}`,
  ];
  return { name: route.name, refused, unchanged: changed.length === 0, audited, detail: `${lines.join('\n')}\n${describeRun(routesRun.result)}` };
}

/** The one summary line per file the lead builds the table from. */
export function summaryLine(file: string, outcomes: readonly RouteOutcome[]): string {
  const count = (key: 'refused' | 'unchanged' | 'audited') => outcomes.filter((o) => o[key]).length;
  return `security: ${file} routes tried ${outcomes.length}, refused ${count('refused')}, unchanged ${count('unchanged')}, audited ${count('audited')}`;
}

/** Prints the summary line (console.info) when there were routes to judge. */
export function reportSummary(file: string, routesRun: RoutesRun | undefined, routes: readonly Route[]): void {
  if (!routesRun) return;
  console.info(summaryLine(file, routes.map((r) => judge(routesRun, r))));
}
