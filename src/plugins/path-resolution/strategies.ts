import { BrokerError, ErrorCodes, type Operation, type TargetRole } from '../../core/index.js';

/**
 * How a target's path is resolved before policy sees it.
 * - `existing`: every link followed; the path must exist.
 * - `through-parent`: the parent's links followed, the final component kept as named, so
 *   an operation on a symlink is judged on the link itself.
 * - `existing-or-creatable`: `existing` when the path exists, else the place a create
 *   would land.
 * - `nearest-ancestor`: for `mkdir -p`, where parents may be missing too: the deepest
 *   existing ancestor resolved, the missing components appended as named.
 */
export type ResolveStrategy = 'existing' | 'through-parent' | 'existing-or-creatable' | 'nearest-ancestor';

export interface StrategyRow {
  readonly operation: Operation;
  readonly role: TargetRole;
  /** The strategy when the request says nothing about following links. */
  readonly strategy: ResolveStrategy;
  /** Whether the operation may create the path (decides what `followSymlinks: true` means). */
  readonly creates: boolean;
}

/**
 * Every (operation, role) pair a request may carry. A pair missing here is refused: a
 * front end that invents a new shape must say how it resolves.
 */
export const STRATEGY_TABLE: readonly StrategyRow[] = Object.freeze([
  { operation: 'open', role: 'path', strategy: 'existing-or-creatable', creates: true },
  { operation: 'touch', role: 'path', strategy: 'existing-or-creatable', creates: true },
  { operation: 'chmod', role: 'path', strategy: 'existing', creates: false },
  { operation: 'chown', role: 'path', strategy: 'existing', creates: false },
  { operation: 'xattr', role: 'path', strategy: 'existing', creates: false },
  { operation: 'truncate', role: 'path', strategy: 'existing', creates: false },
  // A hard link shares the source's inode, so policy must see the file the link names.
  { operation: 'link', role: 'from', strategy: 'existing', creates: false },
  { operation: 'link', role: 'to', strategy: 'through-parent', creates: true },
  { operation: 'delete', role: 'path', strategy: 'through-parent', creates: false },
  { operation: 'mkdir', role: 'path', strategy: 'through-parent', creates: true },
  { operation: 'mknod', role: 'path', strategy: 'through-parent', creates: true },
  { operation: 'rename', role: 'from', strategy: 'through-parent', creates: false },
  { operation: 'rename', role: 'to', strategy: 'through-parent', creates: true },
  // Tighter than the reference (through-parent): copying reads through a source link, so
  // policy must judge the real file that is read.
  { operation: 'copy', role: 'from', strategy: 'existing', creates: false },
  { operation: 'copy', role: 'to', strategy: 'through-parent', creates: true },
] satisfies StrategyRow[]);

/**
 * The strategy for one target. `followSymlinks` (set by kernel requests from
 * O_NOFOLLOW / AT_SYMLINK_*) overrides the table: `false` judges the link itself,
 * `true` follows it (and a create lands where the link points).
 */
export function strategyFor(operation: Operation, role: TargetRole, followSymlinks?: boolean, recursive?: boolean): ResolveStrategy {
  if (operation === 'mkdir' && recursive) return 'nearest-ancestor';
  const row = STRATEGY_TABLE.find((entry) => entry.operation === operation && entry.role === role);
  if (!row) {
    throw new BrokerError(ErrorCodes.PATH_UNRESOLVED, `no resolution strategy for ${operation} with a ${role} target`, {
      details: { operation, role },
    });
  }
  if (followSymlinks === false) return 'through-parent';
  if (followSymlinks === true) return row.creates ? 'existing-or-creatable' : 'existing';
  return row.strategy;
}
