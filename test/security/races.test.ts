/**
 * Escape suite, races: a thread swaps the path string (open, chmod, unlink, rename) or
 * the directory behind a dirfd number (dup2) while the main thread repeats the call,
 * once against an outside file and once against a file a `deny` rule protects. The
 * supervisor reads each argument once and acts on exactly what the broker checked, so
 * the denied side is refused every time and never changes. Then a bounded fork bomb of
 * writers (50 processes) at an outside file and a denied one: all refused, the broker
 * still answers afterwards.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeRun, judge, makeSecurityWorld, removeWorld, reportSummary, runRoutes, writeOld, type Route, type RoutesRun, type SecurityWorld } from './helpers.js';

const ITERATIONS = 400;
const WRITERS = 50;
const KINDS = ['open', 'chmod', 'unlink', 'rename', 'dirfd', 'swap-file', 'swap-dir'] as const;
type Kind = (typeof KINDS)[number];

/** The allowed and the denied side of one race. */
interface Sides {
  allowed: string;
  /** What race.c gets as DENIED: the denied path, or (swap) the symlink that leads to it. */
  denied: string;
  /** What must not change: the denied file (dirfd, swap-dir: the file in the denied dir). */
  target: string;
}

/** The same length as `denied`, in the workspace (path races swap bytes in place). */
const sameLength = (ws: string, denied: string, tag: string) => path.join(ws, tag + 'x'.repeat(denied.length - ws.length - 1 - tag.length));

function sides(w: Pick<SecurityWorld, 'outside' | 'ws'>, kind: Kind, where: 'outside' | 'policy'): Sides {
  const deniedIn = where === 'outside' ? w.outside : w.ws;
  const deniedName = where === 'outside' ? `race-${kind}` : `denied-${kind}`;
  if (kind === 'dirfd' || kind === 'swap-dir') {
    const denied = path.join(deniedIn, deniedName);
    const allowed = path.join(w.ws, `permit-${kind}-${where}`);
    return { allowed, denied: kind === 'dirfd' ? denied : `${allowed}-link`, target: path.join(denied, 'f') };
  }
  if (kind === 'swap-file') {
    const allowed = path.join(w.ws, `permit-${kind}-${where}`);
    return { allowed, denied: `${allowed}-link`, target: path.join(deniedIn, deniedName) };
  }
  if (where === 'policy') {
    const denied = path.join(w.ws, `denied-${kind}.txt`);
    return { allowed: path.join(w.ws, `permit-${kind}.txt`.padEnd(path.basename(denied).length, '_')), denied, target: denied };
  }
  const denied = path.join(w.outside, `race-${kind}`);
  return { allowed: sameLength(w.ws, denied, kind), denied, target: denied };
}

function table(w: Pick<SecurityWorld, 'outside' | 'ws'>): Route[] {
  const races = (['outside', 'policy'] as const).flatMap((where) =>
    KINDS.map((kind): Route => {
      const s = sides(w, kind, where);
      const name = `race-${kind}-${where}`;
      // Status 1: the race ran, both sides were tried and the denied side was refused.
      const script = [
        `r=$("$TOOLS/race" ${kind.startsWith('swap') ? 'swap' : kind} '${s.allowed}' '${s.denied}' ${ITERATIONS}); echo "${name} $r"`,
        'case "$r" in "done 0 "*|*" refused 0"|"") (exit 2);; *) (exit 1);; esac',
      ].join('\n');
      // The denied file, and the directory holding it when nothing else may change there (no new names).
      const holder = kind === 'dirfd' || kind === 'swap-dir' || where === 'outside' ? [path.dirname(s.target)] : [];
      return { name, script, targets: [s.target, ...holder], audit: { paths: [s.denied, s.target] } };
    }),
  );
  const bomb = (name: string, target: string): Route => ({
    name,
    // Each writer tries 4 times and logs how many got through; status 1 when all 50 logged 0.
    script: [
      `for i in $(seq ${WRITERS}); do ( n=0; for j in 1 2 3 4; do echo x >> '${target}' 2>/dev/null && n=$((n+1)); done; echo "w $i $n" >> "$TMPDIR/${name}.log" ) & done; wait`,
      `if [ "$(grep -c ' 0$' "$TMPDIR/${name}.log")" = ${WRITERS} ]; then (exit 1); else cat "$TMPDIR/${name}.log"; (exit 2); fi`,
    ].join('\n'),
    targets: [target],
  });
  return [...races, bomb('bomb-outside', path.join(w.outside, 'bomb')), bomb('bomb-policy', path.join(w.ws, 'denied-bomb.txt'))];
}

const NAMES = table({ outside: '/nowhere/out', ws: '/nowhere/ws' }).map((r) => r.name);

let world: SecurityWorld;
let routes: Route[];
let ran: RoutesRun;

beforeAll(async () => {
  world = await makeSecurityWorld('races', ['race']);
  routes = table(world);
  const policy = path.join(world.base, 'policy.json');
  await fs.writeFile(policy, JSON.stringify({ rules: [{ pattern: 'denied-*', decision: 'deny' }] }));
  for (const where of ['outside', 'policy'] as const) {
    for (const kind of KINDS) {
      const s = sides(world, kind, where);
      if (kind === 'dirfd' || kind === 'swap-dir') {
        await writeOld(path.join(s.allowed, 'f'), 'allowed\n', 0o640);
        await writeOld(s.target, 'denied side\n', 0o640);
        if (kind === 'swap-dir') await fs.symlink(path.dirname(s.target), s.denied);
      } else if (kind === 'swap-file') {
        await writeOld(s.allowed, 'allowed\n', 0o640);
        await writeOld(s.target, 'denied side\n', 0o640);
        await fs.symlink(s.target, s.denied);
      } else {
        await writeOld(s.allowed, 'allowed\n', 0o640);
        await writeOld(s.denied, 'denied side\n', 0o640);
      }
    }
  }
  await writeOld(path.join(world.outside, 'bomb'), 'bomb outside\n', 0o644);
  await writeOld(path.join(world.ws, 'denied-bomb.txt'), 'bomb denied\n', 0o640);
  ran = await runRoutes(world, routes, { policy, epilogue: ['echo fine > alive.txt; st alive'] });
}, 180_000);

afterAll(async () => {
  reportSummary('races', ran, routes);
  await removeWorld(world);
});

describe('escape suite: racing threads and a fork bomb of writers', () => {
  it('the broker survived: a write after all of it works', async () => {
    expect(ran.statuses.get('alive'), describeRun(ran.result)).toBe(0);
    expect(await fs.readFile(path.join(world.ws, 'alive.txt'), 'utf8')).toBe('fine\n');
  });

  it('every race ran its iterations, with calls on both sides', () => {
    for (const name of NAMES.filter((n) => n.startsWith('race-'))) {
      const match = new RegExp(`^${name} done (\\d+) refused (\\d+)$`, 'm').exec(ran.result.out);
      expect(match, `${name}\n${describeRun(ran.result)}`).not.toBeNull();
      const [done, refused] = [Number(match?.[1]), Number(match?.[2])];
      expect(done + refused).toBe(ITERATIONS);
      expect(done, name).toBeGreaterThan(0);
      expect(refused, name).toBeGreaterThan(0);
    }
  });

  it.each(NAMES)('%s: refused, unchanged, audited', (name) => {
    const route = routes.find((r) => r.name === name);
    if (!route) throw new Error(`no route ${name}`);
    const outcome = judge(ran, route);
    expect(outcome, outcome.detail).toMatchObject({ refused: true, unchanged: true, audited: true });
  });
});
