import type { ResolvedRequest, ResolvedTarget } from '../core/index.js';

/** A directory a request takes along whole, and what it does to what is inside. */
export interface TakenTree {
  /** The directory whose entries go along. */
  dir: string;
  /** Where those entries end up: `dir` itself (removed or moved away), or the destination. */
  landsUnder: string;
  /** `delete`: removed or moved away; `write`: brought to `landsUnder` (moved in, tree-copied). */
  access: 'delete' | 'write';
}

/**
 * The directory this target of the request takes along as a whole, if any: the target
 * itself for a delete or the source side of a rename; for the destination of a rename or
 * a recursive copy, the source directory, whose entries land under the destination (which
 * need not exist yet). Every check of "what a whole-directory operation reaches" asks
 * here, so the policy and the approvals cannot disagree about it.
 */
export function takenTree(target: ResolvedTarget, resolved: ResolvedRequest): TakenTree | undefined {
  const { operation, options } = resolved.request;
  if (operation === 'delete' || (operation === 'rename' && target.role === 'from')) {
    return target.kind === 'directory' ? { dir: target.resolved, landsUnder: target.resolved, access: 'delete' } : undefined;
  }
  const bringsTree = operation === 'rename' || (operation === 'copy' && options.recursive === true);
  if (!bringsTree || target.role !== 'to') return undefined;
  const from = resolved.targets.find((t) => t.role === 'from');
  return from?.kind === 'directory' ? { dir: from.resolved, landsUnder: target.resolved, access: 'write' } : undefined;
}
