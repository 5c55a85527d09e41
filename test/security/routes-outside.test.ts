/**
 * Escape suite, paths outside the writable roots: every way we know to name a file in a
 * sibling temp dir (absolute, `..`, symlinks made before and during the command, hard
 * links, renames both ways, /proc magic links, openat2 with and without RESOLVE_*,
 * dirfd-relative calls, O_TMPFILE + linkat) is refused, leaves the file as it was, and
 * is in the audit trail. Run by bash, python3, perl and a C program.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { judge, makeSecurityWorld, removeWorld, reportSummary, runRoutes, writeOld, type Route, type RoutesRun, type SecurityWorld } from './helpers.js';

let world: SecurityWorld;
let routes: Route[];
let ran: RoutesRun;

/** The routes for a world's paths (names only need any paths: the test list is made before the world). */
function table(w: Pick<SecurityWorld, 'outside' | 'ws'>): Route[] {
  const out = (name: string) => path.join(w.outside, name);
  const ws = (name: string) => path.join(w.ws, name);
  /** The outside file a route aims at: `$OUT/<route>`, made before the run. */
  const file = (name: string): Route['targets'] => [out(name)];
  const o = (name: string) => `"$OUT/${name}"`;
  return [
    { name: 'bash-absolute', script: `echo x > ${o('bash-absolute')}`, targets: file('bash-absolute') },
    { name: 'bash-append', script: `echo x >> ${o('bash-append')}`, targets: file('bash-append') },
    { name: 'python-absolute', script: `python3 -c 'import sys; open(sys.argv[1], "w")' ${o('python-absolute')} 2>/dev/null`, targets: file('python-absolute') },
    { name: 'perl-absolute', script: `perl -e 'open(F, ">", $ARGV[0]) or exit 1' ${o('perl-absolute')}`, targets: file('perl-absolute') },
    { name: 'c-absolute', script: `"$TOOLS/escape" path truncate ${o('c-absolute')}`, targets: file('c-absolute') },
    { name: 'dotdot', script: `echo x > "../${path.basename(w.outside)}/dotdot"`, targets: file('dotdot') },
    { name: 'dotdot-deep', script: `mkdir -p a/b && echo x > "a/b/../../../${path.basename(w.outside)}/dotdot-deep"`, targets: file('dotdot-deep') },
    { name: 'symlink-before', script: 'echo x > link-file', targets: file('symlink-before'), audit: { paths: [ws('link-file'), out('symlink-before')] } },
    { name: 'symlink-dir-before', script: 'echo x > link-dir/symlink-dir-before', targets: file('symlink-dir-before') },
    { name: 'symlink-during', script: `ln -s ${o('symlink-during')} made-link && echo x > made-link`, targets: file('symlink-during'), audit: { paths: [ws('made-link'), out('symlink-during')] } },
    { name: 'symlink-dir-during', script: 'ln -s "$OUT" made-dir && echo x > made-dir/symlink-dir-during', targets: file('symlink-dir-during') },
    { name: 'dangling-symlink', script: 'ln -s "$OUT/dangling-new" dangling && echo x > dangling', targets: [w.outside], audit: { paths: [out('dangling-new')] } },
    { name: 'symlink-then-dotdot', script: `ln -s "$OUT/sub" link-sub && echo x > link-sub/../symlink-then-dotdot`, targets: file('symlink-then-dotdot') },
    { name: 'symlink-python', script: `python3 -c 'import os, sys; os.symlink(sys.argv[1], "py-link"); open("py-link", "w")' ${o('symlink-python')} 2>/dev/null`, targets: file('symlink-python'), audit: { paths: [ws('py-link'), out('symlink-python')] } },
    { name: 'hardlink-before', script: 'echo x > hard', targets: file('hardlink-before'), audit: { paths: [ws('hard')] } },
    { name: 'hardlink-during', script: `ln ${o('hardlink-during')} made-hard && echo x > made-hard`, targets: file('hardlink-during'), audit: { paths: [ws('made-hard'), out('hardlink-during')] } },
    { name: 'hardlink-truncate', script: `ln ${o('hardlink-truncate')} made-hard2; "$TOOLS/escape" path truncate made-hard2`, targets: file('hardlink-truncate'), audit: { paths: [ws('made-hard2'), out('hardlink-truncate')] } },
    { name: 'rename-in', script: `mv ${o('rename-in')} ./stolen && mv ./stolen ${o('rename-in')}`, targets: file('rename-in') },
    { name: 'rename-over', script: `echo evil > decoy && mv decoy ${o('rename-over')}`, targets: file('rename-over') },
    { name: 'rename-dir-in', script: 'mv "$OUT/dir-in" ./dir-stolen', targets: [out('dir-in'), out('dir-in/f')], audit: { paths: [out('dir-in')] } },
    { name: 'unlink', script: `rm -f ${o('unlink')}`, targets: file('unlink') },
    { name: 'proc-root', script: `echo x > "/proc/self/root$OUT/proc-root"`, targets: file('proc-root') },
    { name: 'proc-fd', script: `"$TOOLS/escape" fd proc-fd ${o('proc-fd')}`, targets: file('proc-fd') },
    { name: 'proc-fd-bash', script: `(exec 3<${o('proc-fd-bash')}; echo x > /proc/self/fd/3)`, targets: file('proc-fd-bash') },
    { name: 'proc-fd-opath', script: `python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_PATH); os.open("/proc/self/fd/%d" % fd, os.O_WRONLY)' ${o('proc-fd-opath')} 2>/dev/null`, targets: file('proc-fd-opath') },
    { name: 'proc-cwd', script: '(cd "$OUT" && echo x > /proc/self/cwd/proc-cwd)', targets: file('proc-cwd') },
    { name: 'cwd-outside', script: '(cd "$OUT" && echo x > cwd-outside)', targets: file('cwd-outside') },
    { name: 'openat2-plain', script: `"$TOOLS/escape" openat2 ${o('openat2-plain')}`, targets: file('openat2-plain') },
    { name: 'openat2-nosymlinks', script: `"$TOOLS/escape" openat2 ${o('openat2-nosymlinks')} nosymlinks nomagic`, targets: file('openat2-nosymlinks') },
    { name: 'openat2-beneath', script: `"$TOOLS/escape" openat2 openat2-beneath beneath at="$OUT"`, targets: file('openat2-beneath') },
    { name: 'openat2-in-root', script: `"$TOOLS/escape" openat2 openat2-in-root inroot at="$OUT"`, targets: file('openat2-in-root'), audit: { syscalls: ['openat2'] } },
    { name: 'openat2-symlink', script: `"$TOOLS/escape" openat2 link-openat2`, targets: file('openat2-symlink'), audit: { paths: [ws('link-openat2'), out('openat2-symlink')] } },
    { name: 'at-openat', script: '"$TOOLS/escape" at openat "$OUT" at-openat', targets: file('at-openat') },
    { name: 'at-unlinkat', script: '"$TOOLS/escape" at unlinkat "$OUT" at-unlinkat', targets: file('at-unlinkat') },
    { name: 'at-renameat', script: '"$TOOLS/escape" at renameat "$OUT" at-renameat renamed', targets: [out('at-renameat'), out('renamed')], audit: { paths: [out('at-renameat')] } },
    { name: 'at-fchmodat', script: '"$TOOLS/escape" at fchmodat "$OUT" at-fchmodat', targets: file('at-fchmodat') },
    { name: 'at-mkdirat', script: '"$TOOLS/escape" at mkdirat "$OUT" at-mkdirat', targets: [w.outside], audit: { paths: [out('at-mkdirat')] } },
    { name: 'at-symlinkat', script: '"$TOOLS/escape" at symlinkat "$OUT" at-symlinkat', targets: [w.outside], audit: { paths: [out('at-symlinkat')] } },
    { name: 'tmpfile-linkat', script: '"$TOOLS/escape" tmpfile "$TMPDIR" "$OUT/tmpfile-linkat"', targets: [w.outside], audit: { paths: [out('tmpfile-linkat')] } },
    { name: 'tmpfile-in-outside', script: '"$TOOLS/escape" tmpfile-in "$OUT"', targets: [w.outside], audit: { paths: [w.outside] } },
    { name: 'new-file', script: 'echo x > "$OUT/new-file"', targets: [w.outside], audit: { paths: [out('new-file')] } },
    { name: 'tmpfile-proc-fd', script: '"$TOOLS/escape" tmpfile-proc "$OUT"', targets: [w.outside], audit: { paths: [w.outside] } },
    { name: 'flink', script: `"$TOOLS/escape" flink ${o('flink')} flinked`, targets: file('flink'), audit: { paths: [ws('flinked'), out('flink')] } },
    { name: 'exchange', script: `echo evil > swap && "$TOOLS/escape" at exchange "$OUT" exchange "$PWD/swap"`, targets: file('exchange') },
    { name: 'fchmodat-empty-dir', script: '"$TOOLS/escape" at fchmodat-empty "$OUT" -', targets: [w.outside] },
    // The command's temp dir is its own, but a link there must not lead out.
    { name: 'scratch-symlink', script: `ln -s ${o('scratch-symlink')} "$TMPDIR/l1" && echo x > "$TMPDIR/l1"`, targets: file('scratch-symlink') },
    { name: 'scratch-symlink-dir', script: 'ln -s "$OUT" "$TMPDIR/d1" && echo x > "$TMPDIR/d1/scratch-symlink-dir"', targets: file('scratch-symlink-dir') },
    { name: 'scratch-symlink-truncate', script: `ln -s ${o('scratch-symlink-truncate')} "$TMPDIR/l2" && "$TOOLS/escape" path truncate "$TMPDIR/l2"`, targets: file('scratch-symlink-truncate') },
    { name: 'scratch-symlink-rm', script: 'ln -s "$OUT" "$TMPDIR/d2" && rm "$TMPDIR/d2/scratch-symlink-rm"', targets: file('scratch-symlink-rm') },
    { name: 'scratch-dangling', script: 'ln -s "$OUT/scratch-dangling-new" "$TMPDIR/l3" && echo x > "$TMPDIR/l3"', targets: [w.outside], audit: { paths: [out('scratch-dangling-new')] } },
    { name: 'scratch-flink', script: `"$TOOLS/escape" flink ${o('scratch-flink')} "$TMPDIR/h2"`, targets: file('scratch-flink'), audit: { syscalls: ['linkat'] } },
    { name: 'scratch-hardlink', script: `ln ${o('scratch-hardlink')} "$TMPDIR/h1"`, targets: file('scratch-hardlink'), audit: { syscalls: ['link', 'linkat'] } },
    { name: 'scratch-rename-out', script: `echo evil > "$TMPDIR/r1" && mv "$TMPDIR/r1" ${o('scratch-rename-out')}`, targets: file('scratch-rename-out') },
    { name: 'sibling-fd', script: `(exec 7<${o('sibling-fd')}; exec sleep 60) & p=$!; while [ ! -e /proc/$p/fd/7 ]; do sleep 0.05; done; echo x > /proc/$p/fd/7; r=$?; kill $p; (exit $r)`, targets: file('sibling-fd') },
    { name: 'supervisor-root', script: `echo x > "/proc/$SUP/root$OUT/supervisor-root"`, targets: file('supervisor-root') },
  ];
}

beforeAll(async () => {
  world = await makeSecurityWorld('outside');
  routes = table(world);
  for (const route of routes) {
    const own = path.join(world.outside, route.name);
    if (route.targets.includes(own)) await writeOld(own, `${route.name} outside\n`, 0o644);
  }
  const out = (name: string) => path.join(world.outside, name);
  const ws = (name: string) => path.join(world.ws, name);
  await writeOld(out('dir-in/f'), 'in a dir\n', 0o644);
  await fs.mkdir(out('sub'));
  await fs.symlink(out('symlink-before'), ws('link-file'));
  await fs.symlink(world.outside, ws('link-dir'));
  await fs.symlink(out('openat2-symlink'), ws('link-openat2'));
  await fs.link(out('hardlink-before'), ws('hard'));
  ran = await runRoutes(world, routes, { epilogue: ['echo fine > alive.txt; st alive'] });
}, 120_000);

afterAll(async () => {
  reportSummary('routes-outside', ran, routes);
  await removeWorld(world);
});

describe('escape suite: files outside the writable roots', () => {
  it('the run finished and the broker still answers after every route', () => {
    expect(ran.statuses.get('alive'), ran.result.stderr).toBe(0);
  });

  it.each(table({ outside: '/nowhere/out', ws: '/nowhere/ws' }).map((r) => r.name))('%s: refused, unchanged, audited', (name) => {
    const route = routes.find((r) => r.name === name);
    if (!route) throw new Error(`no route ${name}`);
    const outcome = judge(ran, route);
    expect(outcome, outcome.detail).toMatchObject({ refused: true, unchanged: true, audited: true });
  });
});
