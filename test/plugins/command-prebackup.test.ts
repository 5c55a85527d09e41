import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BackupHome } from '../../src/backup/index.js';
import { Broker, BrokerError, ErrorCodes } from '../../src/core/index.js';
import {
  COMMAND_PREBACKUP,
  CommandPrebackupPlugin,
  type CommandPrebackupAnswer,
  type CommandPrebackupOptions,
} from '../../src/plugins/command-prebackup/index.js';
import { ModifyBackupPlugin } from '../../src/plugins/modify-backup/index.js';
import { PathResolutionPlugin } from '../../src/plugins/path-resolution/index.js';
import { SessionGuardPlugin } from '../../src/plugins/session-guard.js';
import { fixedPolicy } from '../helpers/bare-broker.js';
import { closeLater, closeOpened } from '../helpers/close-opened.js';
import { tempDir } from '../helpers/serve-process.js';

let base: string;
let ws: string;
let home: string;
beforeEach(() => {
  base = tempDir('bsh-command-prebackup-');
  ws = path.join(base, 'ws');
  home = path.join(base, 'home');
  mkdirSync(path.join(ws, 'sub'), { recursive: true });
  for (const name of ['a', 'f', 'g', 'keep.bin', 'sub/f']) writeFileSync(path.join(ws, name), `old ${name}`);
});
afterEach(async () => {
  await closeOpened();
  rmSync(base, { recursive: true, force: true });
});

/** Writes inside the workspace are allowed, except keep.bin; everything else is denied. */
const workspacePolicy = () =>
  fixedPolicy((resolved) => {
    if (path.basename(resolved) === 'keep.bin') return { verdict: 'deny', reason: 'keep.bin is kept', source: 'test' };
    if (resolved === ws || resolved.startsWith(`${ws}/`)) return { verdict: 'sandbox', source: 'test' };
    return { verdict: 'deny', reason: 'outside the workspace', source: 'test' };
  });

function setup(options: CommandPrebackupOptions = {}) {
  const broker = closeLater(new Broker({ sessionId: 's1' })).use(
    new SessionGuardPlugin(),
    new PathResolutionPlugin(),
    workspacePolicy(),
    new ModifyBackupPlugin({ home }),
    new CommandPrebackupPlugin(options),
  );
  const announce = async (argv: unknown, extra: Record<string, unknown> = {}) =>
    (await broker.clientCommand(COMMAND_PREBACKUP, { argv, cwd: ws, sessionId: 's1', toolCallId: 't1', brokerTraceId: 'tr1', ...extra })) as CommandPrebackupAnswer;
  return { broker, announce };
}

async function backedUp(broker: Broker): Promise<Record<string, string>> {
  const answer = await broker.control('CommitModifyBackup', { commitMsg: 'turn' });
  expect(answer).toMatchObject({ ok: true });
  const { store, manifest } = await new BackupHome({ home }).findTurn(String(answer.turnId));
  const files: Record<string, string> = {};
  for (const entry of manifest.files) files[path.relative(ws, entry.path)] = entry.sha256 === null ? '(no content)' : (await store.readBlob(entry.sha256)).toString();
  return files;
}

const rel = (answer: CommandPrebackupAnswer) => answer.targets.map((t) => path.relative(ws, t.normalisedPath));

describe('CommandPrebackupPlugin', () => {
  it.each<[string, string[], string, string[]]>([
    ['dd with of= writes that file', ['dd', 'if=a', 'of=f', 'bs=1M'], '.', ['f']],
    ['dd without of= writes to stdout: no target', ['dd', 'if=a', 'bs=1M', 'count=1'], '.', []],
    ['dd of= is relative to cwd', ['dd', 'if=../a', 'of=f'], 'sub', ['sub/f']],
    ['dd of= with .. resolves like the kernel', ['dd', 'of=sub/../g'], '.', ['g']],
    ['dd named by path is still dd', ['/usr/bin/dd', 'of=g'], '.', ['g']],
    ['dd with an empty of= names nothing', ['dd', 'of='], '.', []],
    ['a new dd target is checked but has nothing to back up', ['dd', 'of=new.bin'], '.', ['new.bin']],
    ['truncate -s SIZE FILE', ['truncate', '-s', '0', 'f'], '.', ['f']],
    ['truncate -sSIZE with several files', ['truncate', '-s0', 'f', 'g', 'sub/f'], '.', ['f', 'g', 'sub/f']],
    ['truncate --size=SIZE', ['truncate', '--size=10', 'f'], '.', ['f']],
    ['truncate --size SIZE', ['truncate', '--size', '10', 'g'], '.', ['g']],
    ['truncate -c and -o are flags; -cs takes the next argument', ['truncate', '-c', '-o', '-cs', '+1', 'f'], '.', ['f']],
    ['truncate -r REF reads REF, writes FILE', ['truncate', '-r', 'a', 'g'], '.', ['g']],
    ['truncate --reference=REF and an abbreviated --ref REF', ['truncate', '--reference=a', 'f', '--ref', 'a', 'g'], '.', ['f', 'g']],
    ['truncate options after operands still count', ['truncate', 'f', '-s', '0'], '.', ['f']],
    ['truncate: -- ends options', ['truncate', '-s', '0', '--', '-odd'], '.', ['-odd']],
    ['tee -a with two files', ['tee', '-a', 'f', 'g'], '.', ['f', 'g']],
    ['tee long options and clustered flags', ['tee', '--append', '-ip', '--output-error=warn', 'f'], '.', ['f']],
    ['tee names a file twice: checked once', ['tee', 'f', './f'], '.', ['f']],
    ['tee to a stream is not a file', ['tee', '/dev/null', 'g', '/dev/fd/2'], '.', ['g']],
    ['an unknown command has no targets', ['cat', 'f'], '.', []],
    ['sed is not announced by default', ['sed', '-i', 's/a/b/', 'f'], '.', []],
  ])('%s', async (_label, argv, cwd, expected) => {
    const { broker, announce } = setup();
    const answer = await announce(argv, { cwd: path.join(ws, cwd) });
    expect(answer).toMatchObject({ ok: true });
    expect(answer.targets.filter((t) => t.decision !== 'stream').map((t) => path.relative(ws, t.normalisedPath))).toEqual(expected);
    expect(answer.targets.filter((t) => t.decision !== 'stream').every((t) => t.decision === 'sandbox')).toBe(true);
    // Every existing target's bytes are in the turn, before anything ran.
    const files = await backedUp(broker);
    const existing = expected.filter((name) => name !== 'new.bin' && name !== '-odd');
    expect(Object.keys(files).sort()).toEqual([...existing].sort());
    for (const name of existing) expect(files[name]).toBe(`old ${name}`);
  });

  it('reports each target with the operand, the absolute path and the resolved path', async () => {
    const { announce } = setup();
    const answer = await announce(['dd', 'if=../a', 'of=./f'], { cwd: path.join(ws, 'sub') });
    expect(answer).toEqual({
      ok: true,
      command: 'dd',
      targets: [{ operand: './f', path: path.join(ws, 'sub') + '/./f', normalisedPath: path.join(ws, 'sub', 'f'), decision: 'sandbox' }],
    });
  });

  it('a stream target is reported but never checked', async () => {
    const { broker, announce } = setup();
    const answer = await announce(['dd', 'if=f', 'of=/dev/null']);
    expect(answer).toEqual({ ok: true, command: 'dd', targets: [{ operand: '/dev/null', path: '/dev/null', normalisedPath: '/dev/null', decision: 'stream' }] });
    expect(await backedUp(broker)).toEqual({});
  });

  it.each<[string, string[]]>([
    ['dd of= a denied file', ['dd', 'if=a', 'of=keep.bin']],
    ['tee with one denied file among allowed ones', ['tee', 'f', 'keep.bin']],
    ['truncate outside the workspace', ['truncate', '-s', '0', '../outside.txt']],
  ])('%s → ok:false, the refused target named, the file untouched', async (_label, argv) => {
    const { broker, announce } = setup();
    const answer = await announce(argv);
    expect(answer.ok).toBe(false);
    expect(answer.errorCode).toBe(ErrorCodes.POLICY_DENIED);
    const refused = answer.targets.filter((t) => t.decision === 'deny');
    expect(refused).toHaveLength(1);
    expect(answer.error).toContain(refused[0]?.operand);
    expect(refused[0]?.error).toMatch(/kept|outside/);
    expect(readFileSync(path.join(ws, 'keep.bin'), 'utf8')).toBe('old keep.bin');
    // Allowed targets of the same command were still checked (and backed up), so one answer names them all.
    const allowed = answer.targets.filter((t) => t.decision === 'sandbox').map((t) => path.relative(ws, t.normalisedPath));
    expect(Object.keys(await backedUp(broker)).sort()).toEqual(allowed.sort());
  });

  it('refuses a command announced for another session', async () => {
    const { broker, announce } = setup();
    const answer = await announce(['dd', 'of=f'], { sessionId: 'other' });
    expect(answer).toMatchObject({ ok: false, errorCode: ErrorCodes.SESSION_MISMATCH, targets: [{ decision: 'deny' }] });
    expect(await backedUp(broker)).toEqual({});
  });

  it.each<[string, Record<string, unknown>, RegExp]>([
    ['argv is not an array', { argv: 'dd of=f' }, /argv/],
    ['argv holds a number', { argv: ['dd', 3] }, /argv/],
    ['argv is empty', { argv: [] }, /argv/],
    ['an argument holds a NUL byte', { argv: ['dd', 'of=f\0x'] }, /NUL/],
    ['cwd is relative', { cwd: 'ws' }, /cwd must be absolute/],
    ['cwd holds a NUL byte', { cwd: '/some\0/dir' }, /NUL/],
    ['no session id', { sessionId: undefined }, /sessionId/],
  ])('a bad payload (%s) → ok:false with a clear error', async (_label, override, message) => {
    const { broker } = setup();
    const payload = { argv: ['dd', 'of=f'], cwd: ws, sessionId: 's1', ...override };
    const answer = (await broker.clientCommand(COMMAND_PREBACKUP, payload)) as CommandPrebackupAnswer;
    expect(answer).toMatchObject({ ok: false, errorCode: ErrorCodes.BAD_REQUEST, targets: [] });
    expect(answer.error).toMatch(message);
    expect(readFileSync(path.join(ws, 'f'), 'utf8')).toBe('old f');
  });

  it('a caller adds a command spec through options, no core edit', async () => {
    const { broker, announce } = setup({ commands: { sponge: { operandTargets: true, shortWithValue: 'x' } } });
    const answer = await announce(['sponge', '-a', '-x', 'skip', 'g']);
    expect(rel(answer)).toEqual(['g']);
    expect(await backedUp(broker)).toEqual({ g: 'old g' });
  });

  it('a caller replaces a built-in spec', async () => {
    const { announce } = setup({ commands: { dd: { keyTargets: ['of', 'log'], options: false } } });
    expect(rel(await announce(['dd', 'of=f', 'log=g']))).toEqual(['f', 'g']);
  });

  it('refuses a command line naming more files than maxTargets', async () => {
    const { announce } = setup({ maxTargets: 2 });
    const answer = await announce(['tee', 'f', 'g', 'a']);
    expect(answer).toMatchObject({ ok: false, errorCode: ErrorCodes.BAD_REQUEST, targets: [] });
  });

  it.each<[string, unknown]>([
    ['an unknown key', { command: {} }],
    ['a spec with an unknown field', { commands: { x: { writes: true } } }],
    ['a command name that is a path', { commands: { '/bin/x': {} } }],
    ['a relative stream path', { streamPaths: ['dev/null'] }],
  ])('rejects options with %s', (_label, options) => {
    expect(() => new CommandPrebackupPlugin(options as CommandPrebackupOptions)).toThrow(BrokerError);
  });
});
