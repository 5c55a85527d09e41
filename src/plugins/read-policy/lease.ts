import { foldersAbove, programsOf } from '../file-safety/lease.js';
import { unique } from '../file-safety/patterns.js';
import type { Lease } from '../lease/schema.js';
import type { ReadPolicy } from './policy.js';
import type { UnreadablePath } from './unreadable.js';

/**
 * What the read policy adds to a lease. The supervisor never judges a read (those stay in
 * the kernel), but a change can hand over what may not be read: a rename of a denied path
 * or of a folder holding one, a hard link of it, an open that could read it. So every
 * change at or below a denied path (the secret list, and what the rules matched when the
 * last command started), or to a folder above one, makes the round trip, and so does any
 * change a read-deny rule's glob matches (a file made later that matches is judged at once).
 */
export function readPolicyLease(policy: ReadPolicy, lastUnreadable: readonly UnreadablePath[], lease: Lease): void {
  const denied = unique([...policy.entries.flatMap((entry) => [entry.path, entry.real]), ...lastUnreadable.map((entry) => entry.path)]);
  lease.anchors.push(...denied);
  lease.holds.push(...unique(denied.flatMap(foldersAbove)));
  for (const rule of policy.rules) lease.globs.push({ write: true, delete: true, programs: programsOf(rule.pattern, policy.homes) });
}
