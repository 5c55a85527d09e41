/**
 * An agent's loop around brokered-shell, in a throwaway directory:
 *
 *   load the configuration → open a session → begin a turn for the user's message →
 *   run the model's commands, streaming their output (and guard the agent's own Write
 *   tool) → tell the model what was refused and why → end the turn → list what the turn
 *   backed up, diff it → restore it, then undo the restore.
 *
 * Run it:  node --import tsx examples/agent-loop.ts
 * (the real kernel sandbox: needs the native build, see the README's "Set up").
 */
import { mkdir, mkdtemp, readFile, realpath, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createSandboxSession, loadConfig, sessionConfigOf, type Approver } from 'brokered-shell';

const base = await realpath(await mkdtemp(path.join(os.tmpdir(), 'brokered-shell-agent-loop-')));
const home = path.join(base, 'home'); // the brokered-shell home: config.json and the backups
const ws = path.join(base, 'project');
const say = (line: string) => console.log(line);
const show = (file: string) => readFile(path.join(ws, file), 'utf8').then((text) => JSON.stringify(text));

try {
  await mkdir(home);
  await mkdir(ws);
  await writeFile(path.join(ws, 'notes.txt'), 'first draft\n');
  await writeFile(path.join(ws, 'todo.txt'), 'write the notes\n');
  await writeFile(path.join(ws, 'README.md'), '# project\n');
  await writeFile(path.join(ws, 'plan.md'), 'old plan\n');
  await writeFile(path.join(ws, 'server.pem'), 'not a real key\n');
  // The user's config may set anything; the project's file may only narrow it.
  await writeFile(path.join(home, 'config.json'), JSON.stringify({ fileBackup: { maxSizeMB: 5 } }));
  await writeFile(path.join(ws, '.brokered-shell.json'), JSON.stringify({ fileSafety: { rules: [{ pattern: '*.pem', decision: 'deny' }] } }));

  const loaded = await loadConfig({ workspace: ws, home });
  // A person would be asked here, while the change waits; this one says no to everything.
  const approver: Approver = (request) => {
    if (request.kind === 'path') say(`approval asked: ${request.block.access} ${path.basename(request.block.normalisedPath)} -> no`);
    return false;
  };
  const session = await createSandboxSession({
    home,
    workspace: ws,
    // sessionConfigOf: the config plus the rule that keeps .brokered-shell.json from the commands.
    config: sessionConfigOf(loaded),
    approver,
    // Deleted files go to this trash, not the user's.
    env: { ...process.env, XDG_DATA_HOME: path.join(base, 'xdg') },
  });
  try {
    const turn = await session.beginTurn({ userMessage: 'tidy up the notes' });
    say(`turn ${turn.turnId} begun, backup ${turn.backup.enabled ? 'on' : 'off'}`);

    const commands: Array<[string, string]> = [
      ['call-1', 'cat notes.txt && echo "second draft" > notes.txt'],
      ['call-2', 'sed -i "s/write/wrote/" todo.txt && rm README.md && ls'],
      ['call-3', 'echo "{}" > .brokered-shell.json'],
      ['call-4', 'echo "leaked" > server.pem'],
    ];
    for (const [toolCallId, command] of commands) {
      // A live view gets each chunk as it comes; the result still holds all of it.
      const live: string[] = [];
      const result = await session.execute(command, { toolCallId, onStdout: (chunk) => live.push(chunk.toString('utf8')) });
      say(
        `${toolCallId}: exit ${result.exitCode}; backed up [${result.backups.map((b) => path.basename(b.path)).join(', ')}]; ` +
          `needs approval [${result.promptBlocks.map((b) => path.basename(b.normalisedPath)).join(', ')}]`,
      );
      if (result.stdout) say(`${toolCallId} stdout: ${JSON.stringify(result.stdout)} (streamed in ${live.length} chunk${live.length === 1 ? '' : 's'})`);
      // What the model is told, so it can adjust instead of retrying blindly.
      for (const refusal of result.refusals) say(`${toolCallId} refused: ${refusal.kind} ${refusal.access} ${path.basename(refusal.path)}: ${refusal.reason.replaceAll(base, '…')}`);
    }

    // The agent's own Write tool: guarded (checked and backed up) before it writes.
    const plan = path.join(ws, 'plan.md');
    const guard = await session.guardWrite(plan, { tool: 'Write', toolCallId: 'call-5' });
    say(`guard Write plan.md: allowed ${guard.allowed}, backed up ${guard.backedUp}`);
    if (guard.allowed) await writeFile(plan, 'new plan, by the Write tool\n');

    const ended = await session.endTurn();
    say(`turn ended: ok ${ended.ok}, ${ended.files} files backed up`);
    say(`now: notes.txt ${await show('notes.txt')}, plan.md ${await show('plan.md')}, server.pem ${await show('server.pem')}`);
    say(`now: .brokered-shell.json ${await show('.brokered-shell.json')}`);

    // A person looks at the turn and undoes it: the session's own turns, no store to open.
    const [turn1] = await session.turns();
    for (const file of turn1?.files ?? []) say(`backed up: ${path.basename(file.path)} (${file.operation}, ${file.size} bytes)`);
    const diff = await session.diff(ended.turnId ?? 'latest', { path: path.join(ws, 'notes.txt') });
    say(`diff notes.txt: ${diff.files[0]?.diff.split('\n').filter((line) => /^[-+][^-+]/.test(line)).join(' ')}`);
    const report = await session.restore(ended.turnId ?? 'latest', { force: true });
    // Directories whose names changed get their times back too; count them apart.
    const directories = report.restored.filter((item) => item.kind === 'directory').length;
    say(`restored ${report.restored.length - directories} files and the times of ${directories} ${directories === 1 ? 'directory' : 'directories'}`);
    say(`after restore: notes.txt ${await show('notes.txt')}, todo.txt ${await show('todo.txt')}, README.md ${await show('README.md')}, plan.md ${await show('plan.md')}`);
    // Changed their mind: the restore kept what it replaced, and undoLast puts it back.
    await session.undoLast({ force: true });
    say(`after undoLast: notes.txt ${await show('notes.txt')}, plan.md ${await show('plan.md')}`);
  } finally {
    await session.close();
  }
} finally {
  await rm(base, { recursive: true, force: true });
}
