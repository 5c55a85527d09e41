/**
 * Protections that follow each repository's git config: the hooks folder core.hooksPath
 * names, the files it includes, and what its commands run (git-config-watch.ts). Real
 * repositories made with git in temp dirs, judged by the plugin on a bare broker.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, realpathSync, writeFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Broker, createLogger, type Access, type BrokerRequestInput, type Decision } from '../../src/core/index.js';
import { FileSafetyPlugin, type FileSafetyOptions } from '../../src/plugins/file-safety/index.js';
import { parseGitConfig } from '../../src/plugins/file-safety/git-config-parse.js';
import { commandWords } from '../../src/plugins/file-safety/git-config-references.js';
import { PathResolutionPlugin } from '../../src/plugins/path-resolution/index.js';
import { SessionGrantsPlugin } from '../../src/plugins/session-grants.js';

/** git as a person runs it, with no config of the machine's. */
const GIT_ENV = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/nonexistent-bsh-home', GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null', GIT_AUTHOR_NAME: 'a', GIT_AUTHOR_EMAIL: 'a@example.com', GIT_COMMITTER_NAME: 'a', GIT_COMMITTER_EMAIL: 'a@example.com' };
const git = (cwd: string, ...args: string[]) => execFileSync('git', args, { cwd, env: GIT_ENV, stdio: ['ignore', 'pipe', 'pipe'] }).toString();

let base: string;
let ws: string;
let home: string;
beforeEach(async () => {
  base = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'bsh-git-config-')));
  ws = path.join(base, 'ws');
  home = path.join(base, 'home');
  await fs.mkdir(ws);
  await fs.mkdir(home);
  git(ws, 'init', '-q', '.');
});
afterEach(() => fs.rm(base, { recursive: true, force: true }));

function build(extra: Partial<FileSafetyOptions> = {}): { broker: Broker; grants: SessionGrantsPlugin } {
  const grants = new SessionGrantsPlugin();
  const broker = new Broker({ sessionId: 's1', logger: createLogger({ level: 'silent' }) }).use(
    new PathResolutionPlugin({ home }),
    grants,
    new FileSafetyPlugin({ writableRoots: [ws], home, ...extra }),
  );
  return { broker, grants };
}

async function decide(broker: Broker, file: string, access: Access = 'write'): Promise<Decision> {
  await fs.mkdir(path.dirname(file), { recursive: true });
  const request: BrokerRequestInput = { origin: 'api', action: 'check', operation: access === 'delete' ? 'delete' : 'open', sessionId: 's1', targets: [{ role: 'path', path: file, access }] };
  return (await broker.handle(request)).decision;
}

/** A fresh broker's answer at the start of its first turn. */
async function verdictAfterTurnStart(file: string, access: Access = 'write', extra: Partial<FileSafetyOptions> = {}): Promise<Decision> {
  const { broker } = build(extra);
  await broker.beginTurn();
  return decide(broker, file, access);
}

describe('the hooks folder core.hooksPath names', () => {
  it('a hook written there needs approval; with no such setting the folder is the rules\'', async () => {
    expect((await verdictAfterTurnStart(path.join(ws, '.githooks/pre-commit'))).verdict).toBe('sandbox');
    git(ws, 'config', 'core.hooksPath', '.githooks');
    const decision = await verdictAfterTurnStart(path.join(ws, '.githooks/pre-commit'));
    expect(decision).toMatchObject({ verdict: 'prompt', source: 'file-safety:mandatory:git-config-references' });
    expect(decision.reason).toContain('core.hooksPath');
    expect(decision.reason).toContain(path.join(ws, '.git/config'));
  });

  it("husky's .husky/_, gitignored and made by npm install, needs approval too", async () => {
    git(ws, 'config', 'core.hooksPath', '.husky/_');
    expect((await verdictAfterTurnStart(path.join(ws, '.husky/_/pre-commit'))).verdict).toBe('prompt');
  });

  it('an absolute hooks folder elsewhere, and one under ~, are followed', async () => {
    git(ws, 'config', 'core.hooksPath', path.join(ws, 'tools/hooks'));
    expect((await verdictAfterTurnStart(path.join(ws, 'tools/hooks/post-checkout'))).verdict).toBe('prompt');
    git(ws, 'config', 'core.hooksPath', '~/githooks');
    expect((await verdictAfterTurnStart(path.join(home, 'githooks/pre-push'), 'write', { writableRoots: [ws, home] })).verdict).toBe('prompt');
  });

  it('removing or renaming a folder that holds it asks', async () => {
    git(ws, 'config', 'core.hooksPath', 'tools/hooks');
    await fs.mkdir(path.join(ws, 'tools/hooks'), { recursive: true });
    expect((await verdictAfterTurnStart(path.join(ws, 'tools'), 'delete')).verdict).toBe('prompt');
  });

  it('a path reaching it through a symlink is judged where it lands', async () => {
    git(ws, 'config', 'core.hooksPath', '.githooks');
    await fs.mkdir(path.join(ws, '.githooks'));
    await fs.symlink('.githooks', path.join(ws, 'shortcut'));
    expect((await verdictAfterTurnStart(path.join(ws, 'shortcut/pre-commit'))).verdict).toBe('prompt');
  });
});

describe('files the config includes are protected as config, and what they name too', () => {
  it('include.path relative to the including file, recursively, and includeIf whatever its condition', async () => {
    await fs.appendFile(path.join(ws, '.git/config'), '[include]\n\tpath = ../team.gitconfig\n[includeIf "gitdir:/nowhere/"]\n\tpath = ../only-sometimes.gitconfig\n');
    writeFileSync(path.join(ws, 'team.gitconfig'), '[include]\n\tpath = nested/more.gitconfig\n');
    await fs.mkdir(path.join(ws, 'nested'));
    writeFileSync(path.join(ws, 'nested/more.gitconfig'), '[core]\n\tfsmonitor = tools/fsmonitor.sh\n');
    for (const file of ['team.gitconfig', 'only-sometimes.gitconfig', 'nested/more.gitconfig']) {
      const decision = await verdictAfterTurnStart(path.join(ws, file));
      expect([file, decision.verdict]).toEqual([file, 'prompt']);
      expect(decision.reason).toMatch(/config included by .* git reads it as configuration/);
    }
    const fsmonitor = await verdictAfterTurnStart(path.join(ws, 'tools/fsmonitor.sh'));
    expect(fsmonitor.verdict).toBe('prompt');
    expect(fsmonitor.reason).toContain('core.fsmonitor');
  });

  it("a global config's includes and relative hooks folder apply to every repository", async () => {
    writeFileSync(path.join(home, '.gitconfig'), '[include]\n\tpath = ~/dotfiles/git.inc\n[core]\n\thooksPath = .hooks\n');
    expect((await verdictAfterTurnStart(path.join(home, 'dotfiles/git.inc'), 'write', { writableRoots: [ws, home] })).verdict).toBe('prompt');
    expect((await verdictAfterTurnStart(path.join(ws, '.hooks/pre-commit'))).verdict).toBe('prompt');
  });
});

describe('files named in values git runs as commands', () => {
  it.each<[string, string, string]>([
    ['core.fsmonitor', 'scripts/fsmonitor', 'scripts/fsmonitor'],
    ['core.sshCommand', 'sh ./bin/ssh-wrap -v', 'bin/ssh-wrap'],
    ['core.editor', '"tools/my editor"', 'tools/my editor'],
    ['core.pager', 'tools/pager.sh', 'tools/pager.sh'],
    ['core.askPass', 'tools/askpass', 'tools/askpass'],
    ['sequence.editor', 'tools/seq-edit', 'tools/seq-edit'],
    ['diff.external', 'tools/difftool', 'tools/difftool'],
    ['diff.pdf.textconv', 'tools/pdf2txt', 'tools/pdf2txt'],
    ['merge.ours.driver', 'tools/merge %O %A %B', 'tools/merge'],
    ['filter.crypt.smudge', 'tools/decrypt', 'tools/decrypt'],
    ['filter.crypt.process', 'python3 tools/filter.py', 'tools/filter.py'],
    ['credential.helper', '!f() { ./cred.sh "$@"; }; f', 'cred.sh'],
    ['gpg.program', 'bin/gpg', 'bin/gpg'],
    ['gpg.ssh.program', 'bin/ssh-keygen', 'bin/ssh-keygen'],
    ['alias.st', '!sh scripts/st.sh', 'scripts/st.sh'],
    ['alias.ci', '-c core.hooksPath=hooks2 commit', 'hooks2/pre-commit'],
    ['alias.fs', '-c core.fsmonitor=tools/alias-fsmonitor status', 'tools/alias-fsmonitor'],
    ['pager.log', 'tools/logpager', 'tools/logpager'],
    ['interactive.diffFilter', 'tools/filter', 'tools/filter'],
    ['mergetool.mine.cmd', 'tools/mt "$LOCAL"', 'tools/mt'],
    ['difftool.mine.path', 'tools/dt', 'tools/dt'],
    ['remote.origin.uploadpack', 'tools/upload-pack', 'tools/upload-pack'],
    ['submodule.lib.update', '!tools/update-sub', 'tools/update-sub'],
  ])('%s = %s: writing %s needs approval', async (key, value, file) => {
    git(ws, 'config', key, value);
    const decision = await verdictAfterTurnStart(path.join(ws, file));
    expect(decision).toMatchObject({ verdict: 'prompt', source: 'file-safety:mandatory:git-config-references' });
    expect(decision.reason).toContain(key.split('.').slice(0, 1)[0]);
  });

  it.each<[string, string, string]>([
    ['user.name', 'tools/x', 'tools/x'],
    ['remote.origin.url', '../other', 'src/other'],
    ['core.excludesFile', 'tools/ignore', 'tools/ignore'],
    ['commit.template', 'tools/template', 'tools/template'],
  ])('%s = %s is data: %s stays the rules\'', async (key, value, file) => {
    git(ws, 'config', key, value);
    expect((await verdictAfterTurnStart(path.join(ws, file))).verdict).toBe('sandbox');
  });

  it('splits commands into words as a shell does', () => {
    expect(commandWords(`!f() { "./a b" 'c;d' e\\ f; }; f --flag=g/h -x $HOME/i`)).toEqual(['f', './a b', 'c;d', 'e f', 'f', 'g/h']);
  });
});

describe('every repository in the roots, and the one a written path is in', () => {
  it("a submodule's, relative to its own work tree", async () => {
    const upstream = path.join(base, 'upstream');
    await fs.mkdir(upstream);
    git(upstream, 'init', '-q', '.');
    git(upstream, 'commit', '-q', '--allow-empty', '-m', 'one');
    git(ws, '-c', 'protocol.file.allow=always', 'submodule', 'add', '-q', upstream, 'lib');
    git(path.join(ws, 'lib'), 'config', 'core.hooksPath', '.lib-hooks');
    expect((await verdictAfterTurnStart(path.join(ws, 'lib/.lib-hooks/pre-commit'))).verdict).toBe('prompt');
  });

  it("a linked worktree's, relative to its own top", async () => {
    git(ws, 'commit', '-q', '--allow-empty', '-m', 'one');
    git(ws, 'worktree', 'add', '-q', path.join(ws, 'wt2'));
    git(ws, 'config', 'core.hooksPath', '.githooks');
    expect((await verdictAfterTurnStart(path.join(ws, 'wt2/.githooks/pre-commit'))).verdict).toBe('prompt');
  });

  it('a nested repository found in the roots, even what it names outside its own tree', async () => {
    const nested = path.join(ws, 'vendor/lib');
    await fs.mkdir(nested, { recursive: true });
    git(nested, 'init', '-q', '.');
    git(nested, 'config', 'include.path', '../../../shared.gitconfig');
    // ws/shared.gitconfig: no write in vendor/lib would make the nested repository known otherwise.
    expect((await verdictAfterTurnStart(path.join(ws, 'shared.gitconfig'))).verdict).toBe('prompt');
  });

  it('a repository outside the roots, met when a rule lets a path in it be written', async () => {
    const cached = path.join(home, '.cache/repo');
    await fs.mkdir(cached, { recursive: true });
    git(cached, 'init', '-q', '.');
    git(cached, 'config', 'core.hooksPath', '.hooks');
    const rules = [{ pattern: '~/.cache/**', decision: 'grant-token' as const }];
    expect((await verdictAfterTurnStart(path.join(cached, 'notes.txt'), 'write', { rules })).verdict).toBe('grant-token');
    expect((await verdictAfterTurnStart(path.join(cached, '.hooks/pre-commit'), 'write', { rules })).verdict).toBe('prompt');
  });
});

describe('a config that cannot be read fails closed', () => {
  it.each<[string, (config: string) => Promise<void>]>([
    ['a line git does not read', (config) => fs.appendFile(config, '[core\n\thooksPath = x\n')],
    ['an unknown escape', (config) => fs.appendFile(config, '[core]\n\tpager = "a\\qb"\n')],
    ['an include of a directory', async (config) => {
      await fs.mkdir(path.join(ws, 'a-dir'));
      await fs.appendFile(config, '[include]\n\tpath = ../a-dir\n');
    }],
    ['a NUL byte', (config) => fs.appendFile(config, '[core]\n\tpager = a\0b\n')],
  ])('%s: every file of the repository needs approval', async (_what, spoil) => {
    await spoil(path.join(ws, '.git/config'));
    const decision = await verdictAfterTurnStart(path.join(ws, 'src/main.c'));
    expect(decision.verdict).toBe('prompt');
    expect(decision.reason).toMatch(/could not be read: what git runs in this repository is not known/);
  });

  it('a FIFO where an include points is not opened, and counts as unreadable', async () => {
    execFileSync('mkfifo', [path.join(ws, 'fifo.gitconfig')]);
    await fs.appendFile(path.join(ws, '.git/config'), '[include]\n\tpath = ../fifo.gitconfig\n');
    expect((await verdictAfterTurnStart(path.join(ws, 'a.txt'))).reason).toMatch(/not a regular file/);
  });
});

describe('read again when a change the turn makes touches config', () => {
  it('a config written after approval protects the hooks folder it names from the next request on', async () => {
    const { broker, grants } = build();
    await broker.beginTurn();
    const config = path.join(ws, '.git/config');
    expect((await decide(broker, config)).verdict).toBe('prompt');
    grants.grant([{ normalisedPath: config, access: 'write', operation: 'open' }]);
    expect((await decide(broker, config)).verdict).toBe('grant-token');
    // What the approved write puts there.
    await fs.appendFile(config, '[core]\n\thooksPath = newhooks\n');
    expect((await decide(broker, path.join(ws, 'newhooks/pre-commit'))).verdict).toBe('prompt');
  });

  it('and keeps looking for the rest of the turn, as a file held open is written later', async () => {
    const { broker, grants } = build();
    await broker.beginTurn();
    const config = path.join(ws, '.git/config');
    grants.grant([{ normalisedPath: config, access: 'write', operation: 'open' }]);
    await decide(broker, config);
    expect((await decide(broker, path.join(ws, 'later/pre-commit'))).verdict).toBe('sandbox');
    await fs.appendFile(config, '[core]\n\thooksPath = later\n');
    expect((await decide(broker, path.join(ws, 'later/post-commit'))).verdict).toBe('prompt');
  });
});

describe("the config reader agrees with git's", () => {
  /** `git config --list` of one file, as [key, value] pairs, or 'error'. */
  const gitList = (file: string): Array<[string, string | null]> | 'error' => {
    try {
      const out = execFileSync('git', ['config', '--file', file, '--no-includes', '--null', '--list'], { cwd: '/', env: { ...GIT_ENV, GIT_DIR: path.join(base, 'no-repository') }, stdio: ['ignore', 'pipe', 'ignore'] });
      return out
        .toString('utf8')
        .split('\0')
        .slice(0, -1)
        .map((record) => (record.includes('\n') ? [record.slice(0, record.indexOf('\n')), record.slice(record.indexOf('\n') + 1)] : [record, null]));
    } catch {
      return 'error';
    }
  };
  const fragments = [
    '[core]', '[Core]', '[a "B c"]', '[a "x\\"y"]', '[a.B]', '[a "un', '[]', '[a b]', '[a "q"] k = v', '[ "s"]', '[a\n"nl"]', '[a "b\\\\c"]', '[a.b "c"]', '[a-b.C_d]', '[a "" ]',
    'k = v', 'K=v', 'key', 'k_x = 1', '1k = x', 'k.x = y', 'k\t=\tv', 'k # c', 'k = a = b', 'k=',
    'k = "quoted ; x"', 'k = a ; comment', 'k = a # c', 'k = x\\\n  y', 'k = "x\\\ny"', 'k = "\\t"', 'k=\\n\\b', 'k = \\q', 'k = "open', 'k = "a""b"', 'k= "a" "b"', 'k = "a \\" b"',
    '  k  =  a   b  ', 'k = a\\', 'k = x\r', 'k = \x0b x', 'k-1 = é', '# comment', '; c', '# "q', '', '\t', '\r',
  ];
  it('on random files of its grammar and just outside it', () => {
    const file = path.join(base, 'random.gitconfig');
    fc.assert(
      fc.property(fc.boolean(), fc.boolean(), fc.array(fc.constantFrom(...fragments), { maxLength: 6 }), (bom, crlf, parts) => {
        const text = (bom ? '\ufeff' : '') + parts.join(crlf ? '\r\n' : '\n');
        writeFileSync(file, text);
        const parsed = parseGitConfig(Buffer.from(text, 'utf8'));
        const ours = 'error' in parsed ? 'error' : parsed.entries.map((entry) => [entry.key, entry.value]);
        expect([text, ours]).toEqual([text, gitList(file)]);
      }),
      { numRuns: 600, seed: 31 },
    );
  });
});
