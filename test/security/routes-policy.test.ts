/**
 * Escape suite, the policy inside the roots: a workspace file under a `deny` rule and one
 * under a `prompt` rule, reached by every route that makes sense inside the workspace
 * (absolute and `..` paths, symlinks and hard links, renames, /proc magic links, openat2,
 * dirfd-relative calls, O_TMPFILE + linkat, metadata calls by name and by a read-only
 * fd). Each is refused, leaves the file as it was, and is audited: a denial for `deny`,
 * a prompt (refused now, listed as needing approval) for `prompt`.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { judge, makeSecurityWorld, removeWorld, reportSummary, runRoutes, writeOld, type Route, type RoutesRun, type SecurityWorld } from './helpers.js';

/** One attempt on the file T (its name in the workspace); D is the dir named like T, holding `f`. */
interface Attempt {
  name: string;
  script: (t: string, d: string) => string;
  /** Which route paths the refusal may name (default the target). */
  auditPaths?: (t: string, ws: string) => string[];
  /** A refusal of the supervisor's own (then not a policy verdict). */
  syscalls?: string[];
}

const ATTEMPTS: Attempt[] = [
  { name: 'write', script: (t) => `echo x > ${t}` },
  { name: 'append', script: (t) => `echo x >> ${t}` },
  { name: 'python', script: (t) => `python3 -c 'import sys; open(sys.argv[1], "r+")' ${t} 2>/dev/null` },
  { name: 'perl', script: (t) => `perl -e 'open(F, ">>", $ARGV[0]) or exit 1' ${t}` },
  { name: 'absolute', script: (t) => `echo x > "$PWD/${t}"` },
  { name: 'dotdot', script: (t) => `mkdir -p sub && echo x > sub/../${t}` },
  { name: 'symlink-before', script: (t) => `echo x > link-${t}`, auditPaths: (t, ws) => [path.join(ws, t), path.join(ws, `link-${t}`)] },
  { name: 'symlink-during', script: (t) => `ln -s ${t} made-${t} && echo x > made-${t}`, auditPaths: (t, ws) => [path.join(ws, t), path.join(ws, `made-${t}`)] },
  { name: 'symlink-dir', script: (_t, d) => `ln -s ${d} dlink-${d} && echo x > dlink-${d}/f`, auditPaths: (t, ws) => [path.join(ws, t.replace(/\.txt$/, '-dir'), 'f')] },
  { name: 'hardlink', script: (t) => `ln ${t} hard-${t} && echo x > hard-${t}`, auditPaths: (t, ws) => [path.join(ws, t), path.join(ws, `hard-${t}`)] },
  { name: 'rename-away', script: (t) => `mv ${t} moved-${t}` },
  { name: 'rename-over', script: (t) => `echo evil > decoy-${t} && mv decoy-${t} ${t}` },
  { name: 'unlink', script: (t) => `rm -f ${t}` },
  { name: 'proc-root', script: (t) => `echo x > "/proc/self/root$PWD/${t}"` },
  { name: 'proc-fd', script: (t) => `"$TOOLS/escape" fd proc-fd ${t}` },
  { name: 'proc-cwd', script: (t) => `echo x > /proc/self/cwd/${t}` },
  { name: 'openat2', script: (t) => `"$TOOLS/escape" openat2 ${t}` },
  { name: 'openat2-nosymlinks', script: (t) => `"$TOOLS/escape" openat2 ${t} nosymlinks nomagic` },
  { name: 'openat2-beneath', script: (t) => `"$TOOLS/escape" openat2 ${t} beneath at="$PWD"` },
  { name: 'openat2-in-root', script: (t) => `"$TOOLS/escape" openat2 ${t} inroot at="$PWD"`, syscalls: ['openat2'] },
  { name: 'at-openat', script: (t) => `"$TOOLS/escape" at openat "$PWD" ${t}` },
  { name: 'at-unlinkat', script: (t) => `"$TOOLS/escape" at unlinkat "$PWD" ${t}` },
  { name: 'at-renameat', script: (t) => `"$TOOLS/escape" at renameat "$PWD" ${t} at-moved-${t}` },
  { name: 'at-fchmodat', script: (t) => `"$TOOLS/escape" at fchmodat "$PWD" ${t}` },
  { name: 'tmpfile-linkat', script: (_t, d) => `"$TOOLS/escape" tmpfile "$TMPDIR" ${d}/new`, auditPaths: (t, ws) => [path.join(ws, t.replace(/\.txt$/, '-dir'), 'new')] },
  // A swap is refused by the sandbox itself (it would be judged and backed up as a plain rename).
  { name: 'exchange', script: (t) => `echo evil > swap-${t} && "$TOOLS/escape" at exchange "$PWD" ${t} "$PWD/swap-${t}"`, syscalls: ['renameat2'] },
  { name: 'flink', script: (t) => `"$TOOLS/escape" flink ${t} flinked-${t}`, auditPaths: (t, ws) => [path.join(ws, t), path.join(ws, `flinked-${t}`)] },
  { name: 'scratch-symlink', script: (t) => `ln -s "$PWD/${t}" "$TMPDIR/l-${t}" && echo x > "$TMPDIR/l-${t}"` },
  { name: 'scratch-symlink-dir', script: (_t, d) => `ln -s "$PWD/${d}" "$TMPDIR/d-${d}" && echo x > "$TMPDIR/d-${d}/f"`, auditPaths: (t, ws) => [path.join(ws, t.replace(/\.txt$/, '-dir'), 'f')] },
  { name: 'sibling-fd', script: (t) => `(exec 7<${t}; exec sleep 60) & p=$!; while [ ! -e /proc/$p/fd/7 ]; do sleep 0.05; done; echo x > /proc/$p/fd/7; r=$?; kill $p; (exit $r)` },
  { name: 'truncate', script: (t) => `"$TOOLS/escape" path truncate ${t}` },
  { name: 'chmod', script: (t) => `"$TOOLS/escape" path chmod ${t}` },
  { name: 'chown', script: (t) => `"$TOOLS/escape" path chown ${t}` },
  { name: 'utimes', script: (t) => `"$TOOLS/escape" path utimes ${t}` },
  { name: 'setxattr', script: (t) => `"$TOOLS/escape" path setxattr ${t}` },
  { name: 'fd-fchmod', script: (t) => `"$TOOLS/escape" fd fchmod ${t}` },
  { name: 'fd-fchown', script: (t) => `"$TOOLS/escape" fd fchown ${t}` },
  { name: 'fd-futimens', script: (t) => `"$TOOLS/escape" fd futimens ${t}` },
  { name: 'fd-fsetxattr', script: (t) => `"$TOOLS/escape" fd fsetxattr ${t}` },
  { name: 'fd-ftruncate', script: (t) => `"$TOOLS/escape" fd ftruncate ${t}`, syscalls: ['ftruncate'] },
  { name: 'fd-fallocate', script: (t) => `"$TOOLS/escape" fd fallocate ${t}`, syscalls: ['fallocate'] },
  { name: 'fd-mmap', script: (t) => `"$TOOLS/escape" fd mmap ${t}`, syscalls: ['mmap'] },
];

const KINDS = [
  { kind: 'deny', prefix: 'secret', verdict: 'deny' },
  { kind: 'prompt', prefix: 'ask', verdict: 'prompt' },
] as const;

/** Each attempt against its own deny file and its own prompt file (and their directories). */
function table(ws: string): Route[] {
  return KINDS.flatMap(({ kind, prefix, verdict }) =>
    ATTEMPTS.map((a): Route => {
      const t = `${prefix}-${a.name}.txt`;
      const d = `${prefix}-${a.name}-dir`;
      const targets = [path.join(ws, t), path.join(ws, d), path.join(ws, d, 'f')];
      const audit = a.syscalls ? { syscalls: a.syscalls } : { paths: a.auditPaths ? a.auditPaths(t, ws) : [path.join(ws, t)], verdict };
      return { name: `${kind}-${a.name}`, script: a.script(t, d), targets, audit };
    }),
  );
}

let world: SecurityWorld;
let routes: Route[];
let ran: RoutesRun;

beforeAll(async () => {
  world = await makeSecurityWorld('policy');
  routes = table(world.ws);
  const policy = path.join(world.base, 'policy.json');
  // The routes are writes: a deny rule for every access would also keep the files from being read, which some routes do first (sibling-fd).
  await fs.writeFile(policy, JSON.stringify({ rules: [{ pattern: 'secret-*', access: ['write', 'delete'], decision: 'deny' }, { pattern: 'ask-*', decision: 'prompt' }] }));
  for (const { prefix } of KINDS) {
    for (const a of ATTEMPTS) {
      const t = `${prefix}-${a.name}.txt`;
      await writeOld(path.join(world.ws, t), `${t} keep\n`, 0o640);
      await writeOld(path.join(world.ws, `${prefix}-${a.name}-dir`, 'f'), 'in the dir\n', 0o640);
      if (a.name === 'symlink-before') await fs.symlink(t, path.join(world.ws, `link-${t}`));
    }
  }
  ran = await runRoutes(world, routes, { policy, epilogue: ['echo fine > alive.txt; st alive'] });
}, 120_000);

afterAll(async () => {
  reportSummary('routes-policy', ran, routes);
  await removeWorld(world);
});

describe('escape suite: deny and prompt rules inside the workspace', () => {
  it('ends with 77 (approval needed, nobody to give it), lists the prompt paths, and the broker still answers', () => {
    expect(ran.result.status, ran.result.stderr).toBe(77);
    expect(ran.statuses.get('alive')).toBe(0);
    expect(ran.result.stderr).toContain(`brokered-shell: needs approval: write ${path.join(world.ws, 'ask-write.txt')}`);
    expect(ran.result.stderr).not.toContain(`needs approval: write ${path.join(world.ws, 'secret-write.txt')}`);
  });

  it('every prompt route is listed as needing approval (nothing was changed for it)', () => {
    const listed = new Set([...ran.result.stderr.matchAll(/^brokered-shell: needs approval: \S+ (\S+)/gm)].map((m) => m[1]));
    const missing = routes
      .filter((r) => r.name.startsWith('prompt-') && r.audit && 'paths' in r.audit)
      .filter((r) => !(r.audit && 'paths' in r.audit && r.audit.paths.some((p) => listed.has(p))))
      .map((r) => r.name);
    expect(missing, ran.result.stderr).toEqual([]);
  });

  it.each(table('/nowhere').map((r) => r.name))('%s: refused, unchanged, audited', (name) => {
    const route = routes.find((r) => r.name === name);
    if (!route) throw new Error(`no route ${name}`);
    const outcome = judge(ran, route);
    expect(outcome, outcome.detail).toMatchObject({ refused: true, unchanged: true, audited: true });
  });
});
