/**
 * A rename over a protected file that leaves its bytes and mode as they are (git's
 * rewrite of `.git/config` for `git branch -D`) is not asked about; anything else still
 * is. Before the answer the broker puts its own copy in the source's place, so a writer
 * holding the source open cannot change what lands.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Broker, ErrorCodes, PolicyStage, createLogger, type BrokerPlugin, type Outcome } from '../../src/core/index.js';
import { FileSafetyPlugin, type FileSafetyOptions } from '../../src/plugins/file-safety/index.js';
import { PathResolutionPlugin } from '../../src/plugins/path-resolution/index.js';

const CONFIG = '[core]\n\trepositoryformatversion = 0\n\tbare = false\n';
let base: string;
let git: string;

beforeEach(async () => {
  base = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'bsh-unchanged-')));
  git = path.join(base, 'ws', '.git');
  await fs.mkdir(path.join(git, 'hooks'), { recursive: true });
  await fs.writeFile(path.join(git, 'config'), CONFIG, { mode: 0o644 });
  await fs.chmod(path.join(git, 'config'), 0o644);
});

afterEach(() => fs.rm(base, { recursive: true, force: true }));

function broker(rules: FileSafetyOptions['rules'] = [], ...more: BrokerPlugin[]): Broker {
  const logger = createLogger({ level: 'silent' });
  const options: FileSafetyOptions = { writableRoots: [path.join(base, 'ws')], rules, protectedPaths: [], home: path.join(base, 'home') };
  return new Broker({ sessionId: 's1', logger }).use(new PathResolutionPlugin({ home: path.join(base, 'home') }), new FileSafetyPlugin(options), ...more);
}

/** What git does: write the lock, give it the config's mode, then ask to rename it over. */
async function lockWith(content: string | Buffer, mode = 0o644): Promise<string> {
  const lock = path.join(git, 'config.lock');
  await fs.writeFile(lock, content);
  await fs.chmod(lock, mode);
  return lock;
}

function renameOver(b: Broker, from: string, to = path.join(git, 'config')): Promise<Outcome> {
  return b.handle({
    origin: 'kernel',
    action: 'check',
    operation: 'rename',
    sessionId: 's1',
    targets: [
      { role: 'from', path: from, access: 'delete' },
      { role: 'to', path: to, access: 'write' },
    ],
  });
}

describe('a rename that leaves a protected file as it is', () => {
  it('is allowed, and the source is replaced by a copy nobody holds open: a late write through an old fd does not land', async () => {
    const lock = await lockWith(CONFIG);
    const held = await fs.open(lock, 'r+');
    const before = await fs.stat(lock);
    try {
      const outcome = await renameOver(broker(), lock);
      expect(outcome.ok, JSON.stringify(outcome.decision)).toBe(true);
      expect(outcome.decision.verdict).toBe('sandbox');
      const after = await fs.stat(lock);
      expect(after.ino).not.toBe(before.ino);
      expect(after.mode & 0o7777).toBe(0o644);
      // The command writes through the fd it kept, then the supervisor renames.
      await held.write(Buffer.from('[core]\n\tfsmonitor = "touch planted"\n'), 0, undefined, 0);
    } finally {
      await held.close();
    }
    await fs.rename(lock, path.join(git, 'config'));
    expect(await fs.readFile(path.join(git, 'config'), 'utf8')).toBe(CONFIG);
    expect((await fs.readdir(git)).sort()).toEqual(['config', 'hooks']);
  });

  it.each<[string, string | Buffer, number]>([
    ['other bytes', `${CONFIG}[core]\n\tfsmonitor = x\n`, 0o644],
    ['the same bytes but one more', `${CONFIG}\n`, 0o644],
    ['the same bytes, another mode', CONFIG, 0o755],
    ['no bytes', '', 0o644],
  ])('with %s it is asked about as before', async (_label, content, mode) => {
    const lock = await lockWith(content, mode);
    const inode = (await fs.stat(lock)).ino;
    const outcome = await renameOver(broker(), lock);
    expect(outcome).toMatchObject({ ok: false, decision: { verdict: 'prompt' } });
    expect((await fs.stat(lock)).ino).toBe(inode);
  });

  it('is asked about when the source is a symlink to a copy, or a FIFO', async () => {
    const copy = path.join(base, 'ws', 'copy');
    await fs.writeFile(copy, CONFIG, { mode: 0o644 });
    await fs.chmod(copy, 0o644);
    await fs.symlink(copy, path.join(git, 'link.lock'));
    expect(await renameOver(broker(), path.join(git, 'link.lock'))).toMatchObject({ ok: false, decision: { verdict: 'prompt' } });
    const { execFileSync } = await import('node:child_process');
    execFileSync('mkfifo', [path.join(git, 'fifo.lock')]);
    expect(await renameOver(broker(), path.join(git, 'fifo.lock'))).toMatchObject({ ok: false, decision: { verdict: 'prompt' } });
  });

  it('is asked about for a file larger than any config', async () => {
    const big = Buffer.alloc(300 * 1024, 'x');
    await fs.writeFile(path.join(git, 'config'), big);
    await fs.chmod(path.join(git, 'config'), 0o644);
    expect(await renameOver(broker(), await lockWith(big))).toMatchObject({ ok: false, decision: { verdict: 'prompt' } });
  });

  it('still meets the rules: a deny rule denies, a prompt rule asks', async () => {
    const lock = await lockWith(CONFIG);
    expect(await renameOver(broker([{ pattern: '.git/config', decision: 'deny' }]), lock)).toMatchObject({ ok: false, decision: { verdict: 'deny' } });
    expect(await renameOver(broker([{ pattern: '.git/config', decision: 'prompt' }]), lock)).toMatchObject({ ok: false, decision: { verdict: 'prompt' } });
    expect(await renameOver(broker([{ pattern: '*.lock', decision: 'deny', access: ['delete'] }]), lock)).toMatchObject({ ok: false, decision: { verdict: 'deny' } });
  });

  it('is refused when the destination changes between the look and the answer', async () => {
    const lock = await lockWith(CONFIG);
    // A plugin after the protections stands for anything that changes the file in that gap.
    const meddler: BrokerPlugin = {
      name: 'meddler',
      apply: (b) =>
        b.hooks.evaluatePolicy.tapPromise({ name: 'meddler', stage: PolicyStage.MANDATORY + 1 }, async (target) => {
          if (target.role === 'to') await fs.appendFile(target.resolved, '# changed\n');
          return undefined;
        }),
    };
    const outcome = await renameOver(broker([], meddler), lock);
    expect(outcome).toMatchObject({ ok: false, error: { code: ErrorCodes.POLICY_DENIED } });
    expect(await fs.readFile(lock, 'utf8')).toBe(CONFIG);
    expect((await fs.readdir(git)).sort()).toEqual(['config', 'config.lock', 'hooks']);
  });

  it('a hook moved over an identical hook is still asked about: its source is protected too', async () => {
    await fs.writeFile(path.join(git, 'hooks', 'pre-commit'), '#!/bin/sh\n', { mode: 0o755 });
    await fs.writeFile(path.join(git, 'hooks', 'pre-commit.new'), '#!/bin/sh\n', { mode: 0o755 });
    const outcome = await renameOver(broker(), path.join(git, 'hooks', 'pre-commit.new'), path.join(git, 'hooks', 'pre-commit'));
    expect(outcome).toMatchObject({ ok: false, decision: { verdict: 'prompt' } });
  });
});
