import fs from 'node:fs/promises';
import path from 'node:path';
import { BrokerError, ErrorCodes } from '../core/errors.js';
import { isDirectoryState, stateDifference } from './file-state.js';
import { lstatOrUndefined } from './fs-util.js';
import type { AfterState, RenamedEntry, TurnEntry } from './manifest-schema.js';
import { isAtOrUnder, liveRenames } from './renames.js';
import type { TreeView } from './restore-view.js';

/**
 * A directory the turn renamed whole goes back in one rename, before anything else of the
 * turn is restored: then every other entry finds its file under the name it had before
 * the turn. Newest first, so a directory renamed twice comes back through both names.
 */
export interface RenameBack {
  entry: RenamedEntry;
  /** What stands at `entry.to` as planned (the directory to move back). */
  current: AfterState;
  forced: boolean;
}

export interface RenameConflict {
  path: string;
  detail: string;
  /** Only --force would move it back (the directory at `to` changed since the turn). */
  forceable: boolean;
}

export interface RenameBacksPlan {
  backs: RenameBack[];
  conflicts: RenameConflict[];
  /** Names whose entries cannot be restored: a directory renamed away from there stays where it is. */
  blocked: string[];
}

/** The turn's rename records among `entries` that go back whole (not expanded), in the order they were made. */
export function renamesOf(entries: readonly TurnEntry[]): RenamedEntry[] {
  return liveRenames(entries);
}

/**
 * Plans each rename back on `view`, newest first, moving the directory there in the view
 * when it can go: the directory must still be at `to` (the same one, unless forced) and
 * nothing may stand at its old name.
 */
export async function planRenameBacks(renames: readonly RenamedEntry[], view: TreeView, force: boolean): Promise<RenameBacksPlan> {
  const plan: RenameBacksPlan = { backs: [], conflicts: [], blocked: [] };
  for (const entry of [...renames].reverse()) {
    const seen = await view.observe(entry.to);
    const ino = await view.inodeOf(entry.to);
    const current: AfterState = seen.type === 'other' && ino !== undefined ? Object.assign({}, seen, { ino }) : seen;
    const refuse = (detail: string, forceable: boolean) => {
      plan.conflicts.push({ path: entry.path, detail, forceable });
      plan.blocked.push(entry.path);
    };
    if (!isDirectoryState(current)) {
      refuse(`the directory the turn renamed to ${entry.to} is not there any more`, false);
      continue;
    }
    if ((await view.kindOf(entry.path)) !== 'absent') {
      refuse(`something stands at ${entry.path} again, where the directory renamed to ${entry.to} would go back`, false);
      continue;
    }
    const changed = entry.after === null ? 'the turn was never committed' : differs(entry.after, current);
    if (changed !== undefined && !force) {
      refuse(`${entry.to}: ${changed}`, true);
      continue;
    }
    plan.backs.push({ entry, current, forced: changed !== undefined });
    view.move(entry.to, entry.path);
  }
  return plan;
}

/** Why the directory at `to` is not the one the turn left there. */
function differs(after: AfterState, current: AfterState): string | undefined {
  if (after.type === 'other' && current.type === 'other' && after.ino !== undefined && current.ino !== undefined && after.ino !== current.ino) {
    return 'another directory stands there now';
  }
  return stateDifference(after, current);
}

/** Whether an entry lies where a directory that stays renamed was taken from. */
export function isBlocked(entry: TurnEntry, blocked: readonly string[]): boolean {
  return blocked.some((dir) => isAtOrUnder(entry.path, dir));
}

/** The paths a rename back takes away from `to` (created there by the turn) and brings back under the old name. */
export function renameBackPaths(entry: RenamedEntry): { removed: string[]; recreated: Array<{ path: string; directory: boolean }> } {
  const removed = [entry.to];
  const recreated = [{ path: entry.path, directory: true }];
  for (const item of entry.tree) {
    const directory = item.endsWith('/');
    const rel = directory ? item.slice(0, -1) : item;
    removed.push(path.join(entry.to, rel));
    recreated.push({ path: path.join(entry.path, rel), directory });
  }
  return { removed, recreated };
}

/** The rename itself, if what is at `to` is still the directory planned. */
export async function renameBack(back: RenameBack): Promise<void> {
  const { entry } = back;
  const now = await lstatOrUndefined(entry.to);
  const planned = back.current.type === 'other' ? back.current.ino : undefined;
  if (!now?.isDirectory() || (planned !== undefined && now.ino.toString() !== planned)) {
    throw new BrokerError(ErrorCodes.HOST_OP_FAILED, `${entry.to} changed during the restore; left where it is`);
  }
  if (await lstatOrUndefined(entry.path)) throw new BrokerError(ErrorCodes.HOST_OP_FAILED, `${entry.path} appeared during the restore; ${entry.to} left where it is`);
  await fs.rename(entry.to, entry.path);
}
