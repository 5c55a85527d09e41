import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { BackupHome } from '../../src/backup/index.js';
import { waitFor } from '../helpers/wait-for.js';
import { connect, tempDir } from './helpers.js';

/** A home and a workspace with a text file and a file of every byte value. */
async function setUp() {
  const home = await tempDir('bsh-mcp-home-');
  const workspace = await tempDir('bsh-mcp-ws-');
  const binary = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
  await fs.writeFile(path.join(workspace, 'notes.txt'), 'first draft\n');
  await fs.writeFile(path.join(workspace, 'data.bin'), binary);
  await fs.chmod(path.join(workspace, 'data.bin'), 0o640);
  return { home, workspace, binary };
}

describe('brokered-shell mcp, driven by the SDK client over stdio', () => {
  it('lists its tools', async () => {
    const { home, workspace } = await setUp();
    const mcp = await connect({ home, workspace });
    const { tools } = await mcp.client.listTools();
    expect(tools.map((tool) => tool.name).sort()).toEqual(['diff_turn', 'list_turns', 'restore_turn', 'run', 'show_turn']);
    expect(tools.find((tool) => tool.name === 'run')?.inputSchema.required).toEqual(['command']);
  });

  it('run edits and deletes as one turn; list, diff, and restore latest put the files back byte for byte', async () => {
    const { home, workspace, binary } = await setUp();
    const mcp = await connect({ home, workspace });
    const run = await mcp.call('run', { command: "cat notes.txt; echo 'second draft' > notes.txt; rm data.bin; echo new > made.txt; echo oops >&2" });
    expect(run.isError).toBe(false);
    expect(run.structured).toMatchObject({ exitCode: 0, signal: null, stdout: 'first draft\n', stderr: 'oops\n', refusals: [], sandboxed: true });
    const turnId = run.structured.turnId as string;
    expect(turnId).toMatch(/\S/);
    expect(run.structured.summary).toMatchObject({ committed: true, turnId, files: 2 });
    expect(run.text).toContain('exit code: 0');
    expect(run.text).toContain(`turn ${turnId} backed up 2 files`);
    expect(await fs.readFile(path.join(workspace, 'notes.txt'), 'utf8')).toBe('second draft\n');
    expect(existsSync(path.join(workspace, 'data.bin'))).toBe(false);

    const list = await mcp.call('list_turns');
    const turns = list.structured.turns as Array<{ id: string; message: string; files: Array<{ path: string; operation: string }> }>;
    expect(turns.map((t) => t.id)).toEqual([turnId]);
    expect(turns[0]?.message).toContain('second draft');
    expect(turns[0]?.files.map((f) => path.basename(f.path)).sort()).toEqual(['data.bin', 'notes.txt']);
    expect(list.text).toContain(turnId);

    const shown = await mcp.call('show_turn', { turn: turnId.slice(0, 12) });
    expect(shown.structured).toMatchObject({ id: turnId });
    expect(shown.text).toContain('made.txt (created)');

    const diff = await mcp.call('diff_turn', { turn: 'latest', path: 'notes.txt' });
    expect(diff.text).toContain('-first draft');
    expect(diff.text).toContain('+second draft');
    const whole = await mcp.call('diff_turn', { turn: 'latest' });
    expect(whole.structured.files).toHaveLength(3);

    const restore = await mcp.call('restore_turn', { turn: 'latest' });
    expect(restore.isError).toBe(false);
    expect(restore.structured).toMatchObject({ turnId, conflicts: [], failed: [] });
    expect(restore.text).toContain('restore_turn it to undo this restore');
    expect(await fs.readFile(path.join(workspace, 'notes.txt'), 'utf8')).toBe('first draft\n');
    expect(await fs.readFile(path.join(workspace, 'data.bin'))).toEqual(binary);
    expect((await fs.stat(path.join(workspace, 'data.bin'))).mode & 0o7777).toBe(0o640);
    expect(existsSync(path.join(workspace, 'made.txt'))).toBe(false);
  });

  it('a refused write is in the result with its reason, and what would allow it', async () => {
    const { home, workspace } = await setUp();
    const mcp = await connect({ home, workspace });
    const outside = path.join(await tempDir('bsh-mcp-outside-'), 'f.txt');
    const run = await mcp.call('run', { command: `echo x > ${outside}` });
    expect(run.structured.exitCode).toBe(1);
    expect(run.structured.refusals).toEqual([
      { kind: 'denied', access: 'write', path: outside, operation: expect.any(String), reason: expect.stringContaining(`in ${path.join(home, 'config.json')} would allow it`) },
    ]);
    expect(run.text).toContain(`denied: write ${outside}: ${outside} is outside the writable roots`);
    expect(run.text).toContain("A denial is the policy's answer");
    expect(existsSync(outside)).toBe(false);
  });

  it('without elicitation a change that needs approval is refused by default, and the result says how to approve it', async () => {
    const { home, workspace } = await setUp();
    const mcp = await connect({ home, workspace });
    const run = await mcp.call('run', { command: 'echo "{}" > .brokered-shell.json' });
    expect(run.structured.refusals).toEqual([expect.objectContaining({ kind: 'not-approved', access: 'write', path: path.join(workspace, '.brokered-shell.json'), reason: expect.stringContaining("holds this project's restrictions") })]);
    expect(run.text).toContain('--answer yes');
    expect(existsSync(path.join(workspace, '.brokered-shell.json'))).toBe(false);
  });

  it('--answer yes approves what the client cannot be asked about', async () => {
    const { home, workspace } = await setUp();
    const mcp = await connect({ home, workspace, args: ['--answer', 'yes'] });
    const run = await mcp.call('run', { command: 'echo "{}" > .brokered-shell.json' });
    expect(run.structured).toMatchObject({ exitCode: 0, refusals: [] });
    expect(run.structured.prompts).toEqual([expect.objectContaining({ path: path.join(workspace, '.brokered-shell.json'), approved: true })]);
    expect(await fs.readFile(path.join(workspace, '.brokered-shell.json'), 'utf8')).toBe('{}\n');
  });

  it('asks the client through elicitation: a yes lets the change through, a decline refuses it', async () => {
    const { home, workspace } = await setUp();
    const answers: Array<'once' | 'decline'> = ['once', 'decline'];
    const mcp = await connect({
      home,
      workspace,
      elicit: () => {
        const next = answers.shift();
        return next === 'once' ? { action: 'accept', content: { answer: 'once' } } : { action: 'decline' };
      },
    });
    const file = path.join(workspace, '.brokered-shell.json');
    const approved = await mcp.call('run', { command: 'echo "{}" > .brokered-shell.json' });
    expect(approved.structured).toMatchObject({ exitCode: 0, refusals: [] });
    expect(await fs.readFile(file, 'utf8')).toBe('{}\n');
    expect(mcp.elicitations).toHaveLength(1);
    expect(mcp.elicitations[0]?.message).toContain(`write ${file}`);
    expect(mcp.elicitations[0]?.message).toContain('Command: echo "{}" > .brokered-shell.json');

    const declined = await mcp.call('run', { command: 'echo "{\\"x\\": 1}" > .brokered-shell.json' });
    expect(declined.structured.exitCode).toBe(1);
    expect(declined.structured.refusals).toEqual([expect.objectContaining({ kind: 'not-approved', path: file })]);
    expect(declined.text).toContain('Not approved: the user said no');
    expect(await fs.readFile(file, 'utf8')).toBe('{}\n');
    expect(mcp.elicitations).toHaveLength(2);
  });

  it("lists only the workspace's turns, from every server run there", async () => {
    const { home, workspace } = await setUp();
    const other = await tempDir('bsh-mcp-other-');
    const first = await connect({ home, workspace });
    const one = await first.call('run', { command: 'echo one > notes.txt' });
    await first.close();
    const elsewhere = await connect({ home, workspace: other });
    const away = await elsewhere.call('run', { command: 'echo away > away.txt' });
    const again = await connect({ home, workspace });
    const two = await again.call('run', { command: 'echo two > notes.txt' });
    const ids = ((await again.call('list_turns')).structured.turns as Array<{ id: string }>).map((t) => t.id);
    expect(ids).toEqual([one.structured.turnId, two.structured.turnId]);
    expect(((await elsewhere.call('list_turns')).structured.turns as Array<{ id: string }>).map((t) => t.id)).toEqual([away.structured.turnId]);
    const foreign = await again.call('show_turn', { turn: away.structured.turnId as string });
    expect(foreign.isError).toBe(true);
    expect(foreign.text).toContain('[BSH_TURN_NOT_FOUND]');
    // A prefix both of the workspace's turns share (their ids begin with the date) names neither.
    const ambiguous = await again.call('show_turn', { turn: (one.structured.turnId as string).slice(0, 2) });
    expect(ambiguous.isError).toBe(true);
    expect(ambiguous.text).toContain('is ambiguous; it matches:');
    expect(ambiguous.text).toContain(one.structured.turnId as string);
    expect(ambiguous.text).not.toContain(away.structured.turnId as string);
  });

  it('an unknown turn is a tool error with its code', async () => {
    const { home, workspace } = await setUp();
    const mcp = await connect({ home, workspace });
    const restore = await mcp.call('restore_turn', { turn: 'latest' });
    expect(restore.isError).toBe(true);
    expect(restore.text).toMatch(/no committed turn.*\[BSH_TURN_NOT_FOUND\]/);
  });

  it('when the client leaves mid-command, the command is stopped and its turn committed', async () => {
    const { home, workspace } = await setUp();
    const mcp = await connect({ home, workspace });
    const running = mcp.call('run', { command: 'echo started > started.txt; echo changed > notes.txt; sleep 30; echo late > late.txt' }).catch((error: unknown) => error);
    await waitFor('the command to start', () => (existsSync(path.join(workspace, 'started.txt')) ? true : undefined));
    await mcp.close();
    await running;
    expect(existsSync(path.join(workspace, 'late.txt'))).toBe(false);
    const turns = await new BackupHome({ home }).listTurns();
    expect(turns).toHaveLength(1);
    expect(turns[0]).toMatchObject({ message: expect.stringContaining('sleep 30'), committedAt: expect.any(String) });
    expect(turns[0]?.files.map((file) => path.basename(file.path))).toEqual(['notes.txt']);
  });
});
