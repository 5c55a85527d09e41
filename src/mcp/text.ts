import type { Refusal } from '../agent/refusals.js';
import type { PromptReport, RunReport } from '../agent/run-report.js';
import type { TurnDiff } from '../agent/turn-diff.js';
import type { TurnJson } from '../agent/turn-json.js';
import type { RestoreReport } from '../backup/restore.js';
import { firstLine, printable } from '../core/printable.js';
import type { UnaskedAnswer } from './approver.js';

/** How the user can let through what was refused, by kind: said once under the refusals it applies to. */
function remedies(refusals: readonly Refusal[], unasked: UnaskedAnswer, canAsk: boolean): string[] {
  const kinds = new Set(refusals.map((refusal) => refusal.kind));
  const out: string[] = [];
  if (kinds.has('denied')) {
    out.push("A denial is the policy's answer, no question is put: only a change to the user's configuration (<home>/config.json, or --policy) allows it; the project's .brokered-shell.json may only narrow.");
  }
  if (!kinds.has('not-approved') && !kinds.has('needs-approval')) return out;
  if (!canAsk) {
    out.push(
      `Needs approval: this client cannot ask its user (it has no MCP elicitation), so the server answers ${unasked}. The user may start the server with --answer yes to approve such changes without a question, or run the command in a terminal with \`brokered-shell run\`, which asks.`,
    );
  } else if (kinds.has('not-approved')) {
    out.push('Not approved: the user said no (or did not answer in time). Run the command again if the user wants it: they are asked again.');
  } else {
    out.push('Needs approval: nobody answered.');
  }
  return out;
}

function refusalLine(refusal: Refusal): string {
  const verb = refusal.kind === 'denied' ? 'denied' : refusal.kind === 'not-approved' ? 'not approved' : 'needs approval';
  return `  ${verb}: ${printable(`${refusal.access} ${refusal.path}`)}: ${printable(refusal.reason)}`;
}

function promptLine(prompt: PromptReport): string {
  const answer = prompt.approved ? `approved (${prompt.scope ?? 'once'})` : prompt.coveredBy ? `covered by ${printable(prompt.coveredBy)}` : `refused (${prompt.refusal ?? 'no'})`;
  return `  ${printable(`${prompt.access} ${prompt.path}`)} by ${prompt.operation}: ${answer}`;
}

/** A run as the model reads it: status, output, the turn, what was refused and how it could be let through. */
export function runText(report: RunReport, unasked: UnaskedAnswer, canAsk: boolean): string {
  const lines = [`exit code: ${report.exitCode}${report.signal ? ` (signal ${report.signal})` : ''}${report.timedOut ? ' (timed out)' : ''}`];
  if (report.error) lines.push(`not run: ${report.error}`);
  if (!report.sandboxed && report.mode !== 'not-started') lines.push(`ran without the sandbox (${report.mode}): nothing was checked or backed up`);
  const stream = (name: string, text: string, truncated: boolean) => {
    if (text === '') return;
    lines.push(`${name}${truncated ? ' (truncated)' : ''}:`, text.endsWith('\n') ? text.slice(0, -1) : text);
  };
  stream('stdout', report.stdout, report.truncated.stdout);
  stream('stderr', report.stderr, report.truncated.stderr);
  if (report.summary) {
    lines.push(report.summary.text ?? (report.summary.committed ? `turn ${report.summary.turnId ?? ''}: no file backed up` : `the turn could not be committed: ${report.summary.error ?? 'unknown error'}`));
    for (const notice of report.summary.notices) lines.push(`warning: ${printable(notice)}`);
    for (const file of report.summary.unsaved) lines.push(`changed without a backup (over the size cap): ${printable(file)}`);
  }
  if (report.prompts.length > 0) lines.push('approval questions:', ...report.prompts.map(promptLine));
  if (report.refusals.length > 0) {
    lines.push('refused (nothing was changed for these):', ...report.refusals.map(refusalLine));
    if (report.unlistedRefusals > 0) lines.push(`  … and ${report.unlistedRefusals} more refused requests`);
    lines.push(...remedies(report.refusals, unasked, canAsk));
  }
  if (report.turnId) lines.push(`undo: restore_turn with turn "${report.turnId}"`);
  return lines.join('\n');
}

/** The turns of a workspace, one line each, newest last. */
export function turnsText(turns: readonly TurnJson[]): string {
  if (turns.length === 0) return 'no turns yet in this workspace';
  return turns
    .map((t) => {
      const created = t.structure.filter((entry) => entry.kind === 'absent').length;
      const kind = t.kind === 'restore' ? `[restore of ${t.restoreOf ?? '?'}] ` : '';
      return `${t.id}  ${t.committedAt ?? 'open'}  ${t.files.length} file(s), ${created} created  ${kind}${printable(firstLine(t.message ?? ''))}`;
    })
    .join('\n');
}

/** One turn: its message and each path it recorded. */
export function turnText(turn: TurnJson): string {
  const lines = [`turn ${turn.id} (session ${turn.sessionId})`, `message: ${printable(turn.message ?? '(not committed)')}`, `committed: ${turn.committedAt ?? 'no'}`];
  for (const file of turn.files) lines.push(`  ${file.operation} ${printable(file.path)} (${file.kind === 'symlink' ? 'symlink' : file.kind === 'metadata' ? 'metadata only' : file.skipped ? 'not saved: too large' : `${file.size} B`})`);
  for (const entry of turn.structure) lines.push(`  ${entry.operation} ${printable(entry.path)} (${entry.kind === 'absent' ? 'created' : entry.kind})`);
  if (turn.files.length + turn.structure.length === 0) lines.push('  no files were backed up in this turn');
  return lines.join('\n');
}

export function diffText(diff: TurnDiff): string {
  if (diff.files.length === 0) return `turn ${diff.turnId} backed up no files and left no file it created`;
  return diff.files.map((file) => file.diff).join('\n');
}

/** A restore: what came back, what was left alone and why, and how to undo it. */
export function restoreText(report: RestoreReport): string {
  const lines: string[] = [];
  const verb = report.dryRun ? 'would restore' : 'restored';
  for (const item of report.restored) lines.push(`${item.action === 'remove' ? (report.dryRun ? 'would remove' : 'removed') : verb} ${printable(item.path)}${item.action === 'remove' ? ' (created by the turn)' : ''}`);
  for (const item of report.conflicts) lines.push(`conflict ${printable(item.path)}: ${printable(item.detail)} (${item.reason}; force: true restores it anyway)`);
  for (const item of report.failed) lines.push(`failed ${printable(item.path)}: ${printable(item.message)} [${item.code}]`);
  for (const item of report.skipped) if (item.reason === 'too-large') lines.push(`not restored ${printable(item.path)}: ${printable(item.detail)}`);
  for (const path of report.notInTurn) lines.push(`not in turn ${report.turnId}: ${printable(path)} (nothing was restored)`);
  if (report.restored.length === 0 && report.conflicts.length === 0 && report.failed.length === 0) lines.push(`turn ${report.turnId}: everything is already as it was before the turn`);
  if (report.rescueTurnId) lines.push(`what was replaced is kept in turn ${report.rescueTurnId}: restore_turn it to undo this restore`);
  if (report.dryRun) lines.push('dry run: nothing was changed');
  return lines.join('\n');
}
