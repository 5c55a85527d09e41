import { z } from 'zod';

/**
 * A lease: the session's policy, compiled for the kernel supervisor, which decides, backs
 * up and performs the changes it covers itself and sends the records on (PROTOCOL.md).
 * It says only where a change certainly goes through: anything it does not allow makes
 * the full round trip to the broker. So every list but `roots` widens the round trip.
 */
const absolute = z
  .string()
  .min(1)
  .max(4095)
  .refine((p) => p.startsWith('/') && !/[\n\r\0]/.test(p), 'an absolute path on one line');
const name = z
  .string()
  .min(1)
  .max(255)
  .refine((n) => !n.includes('/') && !/[\n\r\0 ]/.test(n), 'one component without spaces');

/** One brace-free alternative of a glob, compiled as glob.ts runs it (the supervisor runs the same program). */
export const globProgramSchema = z.strictObject({
  ops: z.array(z.number().int().min(0).max(6)),
  a: z.array(z.number().int()),
  b: z.array(z.number().int()),
  classes: z.array(z.strictObject({ negated: z.boolean(), ranges: z.array(z.number().int().min(0).max(0xffff)) })),
  /** Texts every matching path contains: a path without one of them is not run through the program. */
  needs: z.array(z.string()),
});
export type GlobProgramData = z.infer<typeof globProgramSchema>;

/** The changes a lease can cover, as the supervisor names them. */
export const leasedOpSchema = z.enum(['create', 'mkdir', 'unlink', 'rmdir', 'rename', 'link', 'chmod', 'chown', 'utimes']);
export type LeasedOp = z.infer<typeof leasedOpSchema>;

export const leaseSchema = z.strictObject({
  version: z.literal(1),
  /** Writes are allowed at or below these (real paths), deletes strictly below. */
  roots: z.array(absolute),
  /** Paths at or below these make the round trip (a plugin's scope, a cache root, the broker's own files). */
  claims: z.array(absolute),
  /** Paths at or below these are protected: the round trip. */
  anchors: z.array(absolute),
  /** These paths themselves (directories above something protected): the round trip. */
  holds: z.array(absolute),
  /** A path with any component of these names: the round trip. */
  names: z.array(name),
  /** A path whose last component is one of these names: the round trip. */
  finalNames: z.array(name),
  /** Paths these globs match (or a directory above them), for these accesses: the round trip. */
  globs: z.array(z.strictObject({ write: z.boolean(), delete: z.boolean(), programs: z.array(globProgramSchema) })),
  /** A mode with set-uid, or set-gid on anything but a directory: the round trip. */
  setIdRoundTrip: z.boolean(),
  /** The changes the supervisor may decide itself; any other makes the round trip. */
  ops: z.array(leasedOpSchema),
  /** Where records go; absent when backups are off (nothing is recorded). */
  store: z
    .strictObject({
      turnId: z.string().regex(/^[\w.-]{1,128}$/),
      /** The journal the supervisor appends its records to (JSON lines, journal.ts's format). */
      journal: absolute,
      /** The journal's first line, written when the supervisor creates it. */
      header: z.string().refine((line) => line.startsWith('{') && !line.includes('\n')),
      /** Blobs go to `<blobs>/<2 hex>/<sha-256>`. */
      blobs: absolute,
      durability: z.enum(['each', 'turn']),
    })
    .optional(),
});
export type Lease = z.infer<typeof leaseSchema>;

/** A lease that covers nothing: every change makes the round trip. */
export function emptyLease(): Lease {
  return { version: 1, roots: [], claims: [], anchors: [], holds: [], names: [], finalNames: [], globs: [], setIdRoundTrip: true, ops: [] };
}
