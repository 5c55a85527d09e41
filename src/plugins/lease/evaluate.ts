import type { GlobProgramData, Lease, LeasedOp } from './schema.js';

/**
 * What the supervisor decides under a lease (native/sandbox/lease.c), written again here
 * for the tests: both must agree on every case of test/fixtures/lease-vectors.json. True
 * only when the change certainly goes through the broker's pipeline as allowed (so the
 * supervisor may make it itself); false sends it the round trip.
 */
export interface LeaseQuestion {
  op: LeasedOp;
  /** Absolute, as the supervisor walked it (no symlink, no `.` or `..`). */
  path: string;
  access: 'write' | 'delete';
  /** The mode a create, mkdir or chmod gives. */
  mode?: number;
  directory?: boolean;
}

const isWithin = (p: string, base: string) => base === '/' || p === base || p.startsWith(`${base}/`);
const isBeneath = (p: string, base: string) => p !== base && isWithin(p, base);

export function leaseAllows(lease: Lease, question: LeaseQuestion): boolean {
  const { path: p, access } = question;
  if (!lease.ops.includes(question.op)) return false;
  if (!p.startsWith('/') || p.length > 1 && p.endsWith('/') || /\/\/|\/\.\.?(\/|$)/.test(p)) return false;
  const inside = access === 'delete' ? isBeneath : isWithin;
  if (!lease.roots.some((root) => inside(p, root))) return false;
  if (lease.claims.some((claim) => isWithin(p, claim)) || lease.anchors.some((anchor) => isWithin(p, anchor))) return false;
  if (lease.holds.includes(p)) return false;
  const parts = p.split('/').slice(1);
  if (parts.some((part) => lease.names.includes(part)) || lease.finalNames.includes(parts.at(-1) ?? '')) return false;
  for (const glob of lease.globs) {
    if (!(access === 'write' ? glob.write : glob.delete)) continue;
    if (glob.programs.some((program) => runWithin(program, p))) return false;
  }
  if (lease.setIdRoundTrip && question.mode !== undefined && ((question.mode & 0o4000) !== 0 || ((question.mode & 0o2000) !== 0 && !question.directory))) return false;
  return true;
}

const SLASH = 0x2f;

/** glob.ts's runProgram with ancestors, over a program as the lease carries it. */
export function runWithin(program: GlobProgramData, p: string): boolean {
  if (!program.needs.every((text) => p.includes(text))) return false;
  const { ops, a, b } = program;
  const closure = (pc: number, into: Set<number>, matched: { value: boolean }) => {
    const pending = [pc];
    const seen = new Set<number>();
    for (let at = pending.pop(); at !== undefined; at = pending.pop()) {
      if (seen.has(at)) continue;
      seen.add(at);
      const op = ops[at];
      if (op === 4) pending.push(b[at] as number, a[at] as number);
      else if (op === 5) pending.push(a[at] as number);
      else if (op === 6) matched.value = true;
      else into.add(at);
    }
  };
  let current = new Set<number>();
  closure(0, current, { value: false });
  for (let i = 0; i < p.length; i += 1) {
    const unit = p.charCodeAt(i);
    const next = new Set<number>();
    const matched = { value: false };
    for (const pc of current) {
      const op = ops[pc];
      const cls = op === 3 ? program.classes[a[pc] as number] : undefined;
      const inClass = cls !== undefined && unit !== SLASH && cls.ranges.some((_, k) => k % 2 === 0 && (cls.ranges[k] as number) <= unit && unit <= (cls.ranges[k + 1] as number)) !== cls.negated;
      const passes = op === 0 ? a[pc] === unit : op === 1 ? unit !== SLASH : op === 2 || inClass;
      if (passes) closure(pc + 1, next, matched);
    }
    current = next;
    const consumed = i + 1;
    if (matched.value && (consumed === p.length || consumed === 1 || p.charCodeAt(consumed) === SLASH)) return true;
    if (current.size === 0) return false;
  }
  return false;
}
