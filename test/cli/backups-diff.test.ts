import { execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { ANSI, cli, cliBytes, makeTurn, tempDir, writeOld } from './helpers.js';
import { closeLater } from '../helpers/close-opened.js';

const TURN = '20260301-120000-d1ff00';

let home: string;
let work: string;
const at = (name: string) => path.join(work, name);

/** One turn that edits a text file, a binary file, a file it then leaves as it was, and deletes one. */
beforeEach(async () => {
  home = await tempDir('bsh-cli-home-');
  work = await tempDir('bsh-cli-work-');
  await writeOld(at('notes.txt'), 'one\ntwo\nthree\n-- a comment\nfive\n');
  await writeOld(at('image.bin'), Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x00, 0x01, 0x02]));
  await writeOld(at('same.txt'), 'left alone\n');
  await writeOld(at('gone.txt'), 'bye\nnow\n');
  await writeOld(at('mode.sh'), 'echo hi\n', 0o644);
  await makeTurn({
    home,
    sessionId: 'sess-d',
    turnId: TURN,
    message: 'edit things',
    at: '2026-03-01T12:00:00.000Z',
    backups: ['notes.txt', 'image.bin', 'same.txt', 'gone.txt', 'mode.sh'].map((name) => ({ path: at(name), operation: 'open' })),
    change: async () => {
      await fs.writeFile(at('notes.txt'), 'one\nTWO\nthree\nfive\nsix\n');
      await fs.writeFile(at('image.bin'), Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x00, 0xff]));
      await fs.unlink(at('gone.txt'));
      await fs.chmod(at('mode.sh'), 0o755);
    },
  });
});

const diff = (...args: string[]) => cli(['backups', 'diff', ...args], { home, cwd: work });

describe('backups diff', () => {
  it('a text file: a unified diff from the backup to now', () => {
    const result = diff(TURN, at('notes.txt'));
    expect(result.status).toBe(0);
    expect(result.stderr).toBe('');
    expect(result.stdout).toBe(
      [
        `--- ${at('notes.txt')} (backup)`,
        `+++ ${at('notes.txt')} (now)`,
        '@@ -1,5 +1,5 @@',
        ' one',
        '-two',
        '+TWO',
        ' three',
        '--- a comment',
        ' five',
        '+six',
        '',
      ].join('\n'),
    );
  });

  it('a relative PATH is taken from the current directory', () => {
    const result = diff(TURN, 'notes.txt');
    expect(result.status).toBe(0);
    expect(result.stdout).toContain('-two\n+TWO\n');
  });

  it('a PATH named through a symlinked directory finds the resolved path the turn recorded', async () => {
    const link = path.join(await tempDir('bsh-cli-link-'), 'ws');
    await fs.symlink(work, link);
    const result = diff(TURN, path.join(link, 'notes.txt'));
    expect(result.status).toBe(0);
    expect(result.stdout).toContain(`--- ${at('notes.txt')} (backup)`);
  });

  it('a binary file is detected, not dumped', () => {
    const result = diff(TURN, at('image.bin'));
    expect(result.status).toBe(0);
    expect(result.stdout).toBe(`Binary files ${at('image.bin')} (backup, 7 B) and ${at('image.bin')} (now, 6 B) differ\n`);
  });

  it('an unchanged file says so', () => {
    expect(diff(TURN, at('same.txt')).stdout).toBe(`${at('same.txt')}: unchanged since the backup\n`);
  });

  it('a deleted file: every line removed, diffed against /dev/null', () => {
    const result = diff(TURN, at('gone.txt'));
    expect(result.status).toBe(0);
    expect(result.stdout).toBe([`--- ${at('gone.txt')} (backup)`, '+++ /dev/null', '@@ -1,2 +0,0 @@', '-bye', '-now', ''].join('\n'));
  });

  it('a mode change with the same content is shown, not called unchanged', () => {
    expect(diff(TURN, at('mode.sh')).stdout).toBe(`${at('mode.sh')}: content unchanged since the backup\nold mode 0644\nnew mode 0755\n`);
  });

  it('without PATH: every file of the turn, in turn order', () => {
    const result = diff(TURN);
    expect(result.status).toBe(0);
    const order = ['notes.txt', 'image.bin', 'same.txt', 'gone.txt', 'mode.sh'].map((name) => result.stdout.indexOf(at(name)));
    expect(order.every((pos) => pos >= 0)).toBe(true);
    expect([...order].sort((x, y) => x - y)).toEqual(order);
    expect(result.stdout).not.toMatch(ANSI);
  });

  it('--color paints removed lines red and added lines green, headers only before the first hunk', () => {
    const result = diff(TURN, at('notes.txt'), '--color');
    expect(result.status).toBe(0);
    const lines = result.stdout.trimEnd().split('\n');
    expect(lines[0]).toBe(`\u001b[1m--- ${at('notes.txt')} (backup)\u001b[0m`);
    expect(lines[2]).toBe('\u001b[36m@@ -1,5 +1,5 @@\u001b[0m');
    expect(lines).toContain('\u001b[31m-two\u001b[0m');
    expect(lines).toContain('\u001b[32m+TWO\u001b[0m');
    // A removed line that begins with "--" reads "---" in the hunk: still a removal, red.
    expect(lines).toContain('\u001b[31m--- a comment\u001b[0m');
    expect(lines).toContain(' three');
  });

  it('--no-color (and a pipe by default) prints no escape codes', () => {
    for (const args of [['--no-color'], []]) {
      const result = diff(TURN, ...args);
      expect(result.status).toBe(0);
      expect(result.stdout).not.toMatch(ANSI);
      expect(result.stdout).toContain('-two\n+TWO\n');
    }
  });

  it('text that is not UTF-8 or holds escape sequences: exact bytes to a pipe, escapes with --color', async () => {
    const file = at('latin1.txt');
    await writeOld(file, Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x0a]));
    const turn = '20260301-130000-d1ff01';
    await makeTurn({
      home,
      sessionId: 'sess-d',
      turnId: turn,
      message: 'latin-1 edit',
      at: '2026-03-01T13:00:00.000Z',
      backups: [{ path: file, operation: 'open' }],
      change: () => fs.writeFile(file, Buffer.from([0x74, 0xe9, 0x0a, 0x1b, 0x5b, 0x31, 0x41, 0x0d, 0x0a])),
    });
    const piped = cliBytes(['backups', 'diff', turn, file], { home, cwd: work });
    expect(piped.status).toBe(0);
    const hunk = Buffer.from([...Buffer.from('@@ -1,1 +1,2 @@\n-caf'), 0xe9, ...Buffer.from('\n+t'), 0xe9, ...Buffer.from('\n+\u001b[1A\r\n')]);
    expect(piped.stdout.subarray(piped.stdout.indexOf('@@')).equals(hunk)).toBe(true);

    const shown = diff(turn, file, '--color');
    expect(shown.status).toBe(0);
    const lines = shown.stdout.trimEnd().split('\n');
    expect(lines).toContain('\u001b[31m-caf\\xe9\u001b[0m');
    expect(lines).toContain('\u001b[32m+t\\xe9\u001b[0m');
    expect(lines).toContain('\u001b[32m+\\x1b[1A\\r\u001b[0m');
  });

  it('a file whose folder was made a symlink to /proc since is not read through it', async () => {
    await fs.mkdir(at('q'));
    for (const name of ['version', 'kmsg']) await writeOld(at(`q/${name}`), 'a\n');
    const turn = '20260301-140000-d1ff02';
    await makeTurn({
      home,
      sessionId: 'sess-d',
      turnId: turn,
      message: 'append',
      at: '2026-03-01T14:00:00.000Z',
      backups: ['version', 'kmsg'].map((name) => ({ path: at(`q/${name}`), operation: 'open' })),
      change: async () => {
        for (const name of ['version', 'kmsg']) await fs.appendFile(at(`q/${name}`), 'b\n');
      },
    });
    await fs.rm(at('q'), { recursive: true });
    await fs.symlink('/proc', at('q'));
    const result = diff(turn);
    expect(result.status).toBe(0);
    expect(result.stdout).toBe(['version', 'kmsg'].map((name) => `${at(`q/${name}`)}: the folder above it now resolves to /proc; not read\n`).join(''));
  });

  it('a PATH the turn did not touch: exit 1, named on stderr', () => {
    const result = diff(TURN, at('never.txt'));
    expect(result.status).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toBe(`${at('never.txt')} was not touched in turn ${TURN}\n`);
  });

  it('an unknown turn: exit 1 naming the ref', () => {
    const result = diff('no-such-turn');
    expect(result.status).toBe(1);
    expect(result.stderr).toContain('"no-such-turn"');
  });

  it('a symlink backed up in a turn diffs its target, not the file it points to', async () => {
    await fs.symlink('notes.txt', at('link'));
    const turn = '20260301-130000-11a4c0';
    await makeTurn({
      home,
      sessionId: 'sess-d',
      turnId: turn,
      message: 'relink',
      at: '2026-03-01T13:00:00.000Z',
      backups: [{ path: at('link'), operation: 'rename' }],
      change: async () => {
        await fs.unlink(at('link'));
        await fs.symlink('image.bin', at('link'));
      },
    });
    const result = diff(turn);
    expect(result.status).toBe(0);
    expect(result.stdout).toBe([`--- ${at('link')} (backup)`, `+++ ${at('link')} (now)`, '-symlink -> notes.txt', '+symlink -> image.bin', ''].join('\n'));
  });

  it('what the turn created: diffed from /dev/null; created-and-gone and directories only when named', async () => {
    const { SessionBackupStore } = await import('../../src/backup/index.js');
    const store = closeLater(await SessionBackupStore.open({ home, sessionId: 'sess-d' }));
    const turn = '20260301-150000-c4ea7e';
    await store.beginTurn(turn);
    for (const name of ['made.txt', 'made-link', 'made-dir', 'temp.txt']) await store.recordCreated(at(name), { turnId: turn, operation: 'open' });
    await fs.writeFile(at('made.txt'), 'fresh\n');
    await fs.symlink('made.txt', at('made-link'));
    await fs.mkdir(at('made-dir'));
    await store.commitTurn(turn, 'create things');

    const whole = diff(turn);
    expect(whole.status).toBe(0);
    expect(whole.stdout).toBe(
      [
        '--- /dev/null',
        `+++ ${at('made.txt')} (now)`,
        '@@ -0,0 +1,1 @@',
        '+fresh',
        '--- /dev/null',
        `+++ ${at('made-link')} (now)`,
        '+symlink -> made.txt',
        '',
      ].join('\n'),
    );
    expect(diff(turn, at('made-dir')).stdout).toBe(`${at('made-dir')}: created by the turn; now a directory\n`);
    expect(diff(turn, at('temp.txt')).stdout).toBe(`${at('temp.txt')}: created by the turn, gone again\n`);
  });

  it('a directory or special file the turn recorded, when named: said so, not called untouched', async () => {
    const { SessionBackupStore } = await import('../../src/backup/index.js');
    const store = closeLater(await SessionBackupStore.open({ home, sessionId: 'sess-d' }));
    const turn = '20260301-160000-5bec1a';
    await fs.mkdir(at('kept-dir'));
    execFileSync('mkfifo', [at('pipe')]);
    await store.beginTurn(turn);
    await store.recordDirectory(at('kept-dir'), { turnId: turn, operation: 'chmod' });
    await store.backup(at('pipe'), { turnId: turn, operation: 'delete' });
    await fs.rm(at('pipe'));
    await store.commitTurn(turn, 'chmod kept-dir; rm pipe');

    const dir = diff(turn, at('kept-dir'));
    expect(dir.status).toBe(0);
    expect(dir.stdout).toBe(`${at('kept-dir')}: a directory before the turn, no content to diff; now a directory\n`);
    const pipe = diff(turn, at('pipe'));
    expect(pipe.status).toBe(0);
    expect(pipe.stdout).toBe(`${at('pipe')}: a fifo before the turn, no content to diff; now nothing\n`);
    // The whole turn names the special file too (directories are many and left out).
    expect(diff(turn).stdout).toBe(pipe.stdout);
  });

  it('a file skipped as too large: no content to diff, said plainly', async () => {
    const big = await writeOld(at('big.dat'), Buffer.alloc(2 * 1024 * 1024, 0x61));
    const { SessionBackupStore } = await import('../../src/backup/index.js');
    const store = closeLater(await SessionBackupStore.open({ home, sessionId: 'sess-d', settings: { enabled: true, fileBackupMaxSizeMB: 1, oversize: 'skip' } }));
    const turn = '20260301-140000-b19000';
    await store.beginTurn(turn);
    await store.backup(big, { turnId: turn, operation: 'open' });
    await fs.writeFile(big, 'small now');
    await store.commitTurn(turn, 'shrink');
    const result = diff(turn, big);
    expect(result.status).toBe(0);
    expect(result.stdout).toBe(`${big}: no content was backed up (over the size cap when the turn ran); nothing to diff\n`);
  });
});
