#!/usr/bin/env node
// @ts-check
/**
 * `/bsh-rewind` for Claude Code (commands/bsh-rewind.md runs it): undo the latest command
 * brokered-shell ran in this workspace and not undone yet, byte for byte, through the
 * library; again, the one before it. Files changed since are left alone unless `--force`;
 * what the restore replaces is kept in a new turn, so `--undo` takes the last one back.
 *
 *   node rewind.mjs [--workspace DIR] [--force] [--undo]
 */
import { realpathSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { TurnHistory, openBackupHome, workspaceSessions } from 'brokered-shell';

const { values } = parseArgs({ options: { workspace: { type: 'string' }, force: { type: 'boolean' }, undo: { type: 'boolean' } } });
const workspace = realpathSync(values.workspace ?? process.env.CLAUDE_PROJECT_DIR ?? process.cwd());
const home = openBackupHome(process.env.BROKERED_SHELL_HOME || undefined);
const history = new TurnHistory(home, () => workspaceSessions(home, workspace));
/**
 * The newest committed turn of a command that is not undone. A restore turn undoes the
 * turn it names; restoring that restore turn (--undo) does it again, and so on: whichever
 * came last, oldest first, decides.
 */
async function lastNotUndone() {
  const turns = await history.list();
  const byId = new Map(turns.map((t) => [t.id, t]));
  const undone = new Set();
  for (const turn of turns) {
    let hops = 0;
    let target = turn;
    while (target?.kind === 'restore' && target.restoreOf !== undefined && hops < turns.length) {
      target = byId.get(target.restoreOf);
      hops += 1;
    }
    if (hops === 0 || target?.kind !== 'turn') continue;
    if (hops % 2 === 1) undone.add(target.id);
    else undone.delete(target.id);
  }
  const left = turns.filter((t) => t.kind === 'turn' && t.committedAt !== null && !undone.has(t.id));
  const last = left.at(-1);
  if (!last) throw new Error('no command of this workspace is left to undo');
  return last.id;
}

try {
  const force = values.force === true;
  const report = values.undo ? await history.undoLast({ force }) : await history.restore(await lastNotUndone(), { force });
  for (const item of report.restored) console.log(`${item.action === 'remove' ? 'removed' : 'restored'} ${item.path}`);
  for (const item of report.conflicts) console.log(`left alone ${item.path}: ${item.detail} (--force restores it anyway)`);
  for (const item of report.failed) console.log(`failed ${item.path}: ${item.message}`);
  if (report.rescueTurnId) console.log(`turn ${report.turnId} undone; what it replaced is kept in turn ${report.rescueTurnId} (--undo takes this back)`);
  process.exitCode = report.failed.length > 0 ? 1 : report.conflicts.length > 0 ? 3 : 0;
} catch (error) {
  console.log(`nothing to undo: ${error instanceof Error ? error.message : String(error)}`);
  process.exitCode = 1;
}
