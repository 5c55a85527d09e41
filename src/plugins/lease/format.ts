import type { Lease } from './schema.js';

/**
 * A lease as the supervisor reads it (native/sandbox/lease.c): one item per line, a
 * keyword, a space, the rest of the line. Paths hold no newline (the schema says so).
 */
export function formatLease(lease: Lease): string {
  const lines = ['bsh-lease 1', `ops ${lease.ops.join(' ')}`, `setid ${lease.setIdRoundTrip ? 1 : 0}`];
  const each = (keyword: string, values: readonly string[]) => {
    for (const value of values) lines.push(`${keyword} ${value}`);
  };
  each('root', lease.roots);
  each('claim', lease.claims);
  each('anchor', lease.anchors);
  each('hold', lease.holds);
  each('name', lease.names);
  each('final', lease.finalNames);
  for (const glob of lease.globs) {
    lines.push(`glob ${glob.write ? 1 : 0} ${glob.delete ? 1 : 0}`);
    for (const program of glob.programs) {
      lines.push(`alt ${program.ops.length}`);
      program.ops.forEach((op, pc) => lines.push(`op ${op} ${program.a[pc]} ${program.b[pc]}`));
      for (const cls of program.classes) lines.push(`class ${cls.negated ? 1 : 0} ${cls.ranges.join(' ')}`.trimEnd());
      for (const need of program.needs) lines.push(`need ${Buffer.from(need, 'utf16le').toString('hex')}`);
    }
    lines.push('end');
  }
  if (lease.store) {
    lines.push(`turn ${lease.store.turnId}`, `durability ${lease.store.durability}`, `blobs ${lease.store.blobs}`, `journal ${lease.store.journal}`, `header ${lease.store.header}`);
  }
  return `${lines.join('\n')}\n`;
}
