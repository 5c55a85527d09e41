import { execFileSync } from 'node:child_process';
import { linkSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  Broker,
  BrokerError,
  ErrorCodes,
  createLogger,
  type Access,
  type BrokerRequestInput,
  type TargetRole,
  type Verdict,
} from '../../src/core/index.js';
import {
  FileSafetyPlugin,
  FILE_SAFETY_TAPS,
  PLUGIN_NAME,
  compileFileSafety,
  evaluateFileSafety,
  isWithin,
  type FileSafetyOptions,
} from '../../src/plugins/file-safety/index.js';
import { buildProtections } from '../../src/plugins/file-safety/mandatory.js';
import { PathResolutionPlugin } from '../../src/plugins/path-resolution/index.js';

// Made when the module loads (not in beforeAll) because the it.each tables name paths in it.
// os.tmpdir() may sit behind links: everything is compared against the real path.
const base = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'bsh-safety-')));
/** A path in the temp tree, kept as written. */
const at = (relative: string) => `${base}/${relative}`;
const ws = at('ws');
const home = at('home');
const store = at('home/.brokered-shell');
const socketDir = at('run');

beforeAll(async () => {
  const files = [
    'ws/a.txt',
    'ws/key.pem',
    'ws/secrets/token',
    'ws/docs/readme.md',
    'ws/docs/a.txt',
    'ws/build/out.js',
    'ws/.git/HEAD',
    'ws/.git/config',
    'ws/.git/index',
    'ws/.git/hooks/pre-commit',
    'ws/.git/objects/ab/cdef',
    'ws/.git/refs/heads/main',
    'ws/.git/logs/HEAD',
    'ws/sub/.git/config',
    'ws/.git/worktrees/wt/gitdir',
    'ws/.git/remotes/.keep',
    'ws/.git/branches/.keep',
    'ws/bare/HEAD',
    'ws/bare/config',
    'ws/bare/objects/ab/cdef',
    'ws/bare/hooks/pre-commit',
    'ws/bare/remotes/.keep',
    'ws/bare/logs/.keep',
    'ws/bare/logs/refs/heads/.keep',
    'ws/bare/worktrees/wt/gitdir',
    'ws/bare/modules/sub/.keep',
    'ws/.git/worktrees/wt/modules/sub/.keep',
    'ws/bare/refs/remotes/origin/.keep',
    'ws/bare/refs/heads/.keep',
    'ws/plain/config',
    'ws/plain/hooks/useThing.ts',
    'outside/target.txt',
    'outside/allowed.txt',
    'home/.bashrc',
    'home/.bashrc.d/.keep',
    'home/.local/bin/.keep',
    'home/.local/share/.keep',
    'home/.ssh/.keep',
    'home/.config/fish/functions/.keep',
    'home/.config/environment.d/.keep',
    'home/.config/systemd/user/.keep',
    'home/.cache/tool/data',
    'home/.brokered-shell/workspace/blob',
    'run/broker.sock',
  ];
  for (const file of files) {
    await fs.mkdir(path.dirname(at(file)), { recursive: true });
    // A config git cannot read would make its repository's every file ask (file-safety-git-config.test.ts).
    await fs.writeFile(at(file), file.endsWith('/config') ? '[core]\n\tbare = false\n' : file);
  }
  await fs.mkdir(at('outside/dir'), { recursive: true });
  await fs.mkdir(at('home/.config/fish'), { recursive: true });
  await fs.symlink(at('outside/target.txt'), at('ws/link-out'));
  await fs.symlink(at('outside/dir'), at('ws/link-dir'));
  await fs.symlink('a.txt', at('ws/link-in'));
  await fs.symlink(at('outside/nothing-yet.txt'), at('ws/dangling-out'));
  await fs.symlink(at('outside/allowed.txt'), at('ws/link-allowed'));
});

afterAll(async () => {
  await fs.rm(base, { recursive: true, force: true });
});

function options(extra: Partial<FileSafetyOptions> = {}): FileSafetyOptions {
  return { writableRoots: [ws], rules: [], protectedPaths: [store, socketDir], home, ...extra };
}

interface Built {
  broker: Broker;
  logs: Array<Record<string, unknown>>;
}

function build(extra: Partial<FileSafetyOptions> = {}): Built {
  const logs: Array<Record<string, unknown>> = [];
  const logger = createLogger({ level: 'warn', destination: { write: (line: string) => void logs.push(JSON.parse(line)) } });
  const broker = new Broker({ sessionId: 's1', logger }).use(new PathResolutionPlugin({ home }), new FileSafetyPlugin(options(extra)));
  return { broker, logs };
}

/** The operation a kernel or shell client would send for this access. */
function request(access: Access, relative: string): BrokerRequestInput {
  return {
    origin: 'api',
    action: 'check',
    operation: access === 'delete' ? 'delete' : 'open',
    sessionId: 's1',
    targets: [{ role: 'path', path: at(relative), access }],
  };
}

async function verdictOf(built: Built, access: Access, relative: string): Promise<{ verdict: Verdict; reason: string; source: string }> {
  const outcome = await built.broker.handle(request(access, relative));
  expect(outcome.error?.code).not.toBe(ErrorCodes.PATH_NOT_FOUND);
  return { verdict: outcome.decision.verdict, reason: outcome.decision.reason ?? '', source: outcome.decision.source ?? '' };
}

describe('writable roots', () => {
  it.each<[string, Partial<FileSafetyOptions>, Access, string, Verdict]>([
    ['write inside the root', {}, 'write', 'ws/a.txt', 'sandbox'],
    ['create inside the root', {}, 'write', 'ws/new.txt', 'sandbox'],
    ['delete inside the root', {}, 'delete', 'ws/a.txt', 'sandbox'],
    ['delete the root itself', {}, 'delete', 'ws', 'deny'],
    ['write outside', {}, 'write', 'outside/target.txt', 'deny'],
    ['create outside', {}, 'write', 'outside/new.txt', 'deny'],
    ['delete outside', {}, 'delete', 'outside/target.txt', 'deny'],
    ['write outside, outsideRoots prompt', { outsideRoots: 'prompt' }, 'write', 'outside/new.txt', 'prompt'],
    ['read outside', {}, 'read', 'outside/target.txt', 'sandbox'],
    ['read inside', {}, 'read', 'ws/a.txt', 'sandbox'],
    ['a sibling that shares the prefix is not inside', { writableRoots: [`${base}/ws`] }, 'write', 'ws2-new.txt', 'deny'],
  ])('%s → %s', async (_label, extra, access, relative, expected) => {
    const { verdict, source } = await verdictOf(build(extra), access, relative);
    expect(verdict).toBe(expected);
    expect(source).toBe('file-safety:roots');
  });

  it('names the path when it denies outside the roots', async () => {
    const { reason } = await verdictOf(build(), 'write', 'outside/new.txt');
    expect(reason).toContain(at('outside/new.txt'));
  });
});

describe('rules', () => {
  const rules: FileSafetyOptions['rules'] = [
    { pattern: '*.pem', decision: 'prompt', reason: 'keys need approval' },
    { pattern: 'secrets/**', decision: 'deny' },
    { pattern: '~/.cache/**', decision: 'grant-token' },
    { pattern: 'build/**', access: ['delete'], decision: 'deny' },
    { pattern: 'notes.txt', decision: 'deny' },
  ];

  it.each<[string, Access, string, Verdict]>([
    ['*.pem at the top', 'write', 'ws/key.pem', 'prompt'],
    ['*.pem at any depth, new file', 'write', 'ws/docs/new.pem', 'prompt'],
    // A prompt without access is about writes and deletes: a command's reads never reach the broker to be asked about.
    ['a prompt rule does not ask about reads', 'read', 'ws/key.pem', 'sandbox'],
    ['secrets/** write', 'write', 'ws/secrets/token', 'deny'],
    ['secrets/** read', 'read', 'ws/secrets/token', 'deny'],
    ['secrets/** delete', 'delete', 'ws/secrets/token', 'deny'],
    ['~/.cache/** outside the roots', 'write', 'home/.cache/tool/data', 'grant-token'],
    ['~/.cache/** new file', 'write', 'home/.cache/tool/new', 'grant-token'],
    ['no rule under home', 'write', 'home/other.txt', 'deny'],
    ['delete-only rule on delete', 'delete', 'ws/build/out.js', 'deny'],
    ['delete-only rule does not touch writes', 'write', 'ws/build/out.js', 'sandbox'],
    ['a BSD sed temp name matches its real name', 'write', 'ws/.!4242!notes.txt', 'deny'],
    ['no rule at all', 'write', 'ws/a.txt', 'sandbox'],
  ])('%s → %s', async (_label, access, relative, expected) => {
    expect((await verdictOf(build({ rules }), access, relative)).verdict).toBe(expected);
  });

  it('reports the rule reason and which rule decided', async () => {
    const decision = await verdictOf(build({ rules }), 'write', 'ws/key.pem');
    expect(decision).toMatchObject({ reason: 'keys need approval', source: 'file-safety:rules[0]' });
  });

  const grantDocs = { pattern: `${base}/ws/docs/**`, decision: 'grant-token' as const };
  const promptMarkdown = { pattern: '*.md', decision: 'prompt' as const };
  it.each<[string, FileSafetyOptions['rules'], string, Verdict]>([
    ['grant then prompt', [grantDocs, promptMarkdown], 'ws/docs/readme.md', 'prompt'],
    ['prompt then grant', [promptMarkdown, grantDocs], 'ws/docs/readme.md', 'prompt'],
    ['only the grant matches', [promptMarkdown, grantDocs], 'ws/docs/a.txt', 'grant-token'],
    ['deny beats prompt', [promptMarkdown, { pattern: 'docs', decision: 'deny' }], 'ws/docs/readme.md', 'deny'],
    ['sandbox loses to grant-token', [{ pattern: 'docs/**', decision: 'sandbox' }, grantDocs], 'ws/docs/a.txt', 'grant-token'],
  ])('most restrictive matching rule wins, not the last: %s', async (_label, ruleList, relative, expected) => {
    expect((await verdictOf(build({ rules: ruleList }), 'write', relative)).verdict).toBe(expected);
  });
});

describe('mandatory protections', () => {
  const rcFiles = [
    '.bashrc',
    '.bash_profile',
    '.bash_login',
    '.bash_logout',
    '.profile',
    '.zshrc',
    '.zshenv',
    '.zprofile',
    '.zlogin',
    '.zlogout',
    '.inputrc',
    '.config/fish/config.fish',
  ];
  const grantHome = { writableRoots: [ws, `${base}/home`], rules: [{ pattern: '~/**', decision: 'grant-token' as const }] };

  it.each([
    '.bash_aliases',
    '.bashrc.d/10-path.sh',
    '.bash_completion',
    '.local/bin/git',
    '.ssh/config',
    '.ssh/authorized_keys',
    '.config/fish/functions/ls.fish',
    '.config/environment.d/path.conf',
    '.config/systemd/user/x.service',
  ])(
    '%s → prompt even when a rule grants home: the shell, PATH or ssh takes commands from it',
    async (file) => {
      const { verdict, source } = await verdictOf(build(grantHome), 'write', `home/${file}`);
      expect([verdict, source]).toEqual(['prompt', 'file-safety:mandatory:home-code']);
    },
  );

  it('leaves the rest of ~/.ssh and ~/.local to the rules', async () => {
    for (const file of ['.ssh/known_hosts', '.local/share/x', '.local/bin2']) expect((await verdictOf(build(grantHome), 'write', `home/${file}`)).verdict).toBe('grant-token');
  });

  it.each(rcFiles.flatMap((file) => (['write', 'delete'] as const).map((access) => [file, access] as const)))(
    '%s (%s) → prompt even when a rule grants home',
    async (file, access) => {
      const { verdict, source } = await verdictOf(build(grantHome), access, `home/${file}`);
      expect(verdict).toBe('prompt');
      expect(source).toBe('file-safety:mandatory:shell-startup');
    },
  );

  it.each<[string, FileSafetyOptions['rules'], string | undefined]>([
    // The store lives under home here: the strictest protection is the one named.
    ['a grant on all of home', [{ pattern: '~/**', decision: 'grant-token' }], 'broker-files'],
    ['a grant on home config', [{ pattern: '~/.config/**', decision: 'grant-token' }], 'shell-startup'],
    ['a grant on one rc file', [{ pattern: '~/.zshrc', decision: 'sandbox' }], 'shell-startup'],
    ['a grant on .git', [{ pattern: '.git/**', decision: 'sandbox' }], 'git-hooks-config'],
    ['a grant on the whole workspace', [{ pattern: `${base}/ws/**`, decision: 'grant-token' }], 'git-hooks-config'],
    ['a grant on the backup store', [{ pattern: '~/.brokered-shell/**', decision: 'grant-token' }], 'broker-files'],
    ['a read-only grant', [{ pattern: '~/**', access: ['read'], decision: 'grant-token' }], undefined],
    ['a deny on an rc file', [{ pattern: '~/.bashrc', decision: 'deny' }], undefined],
    ['a grant that touches nothing protected', [{ pattern: '*.pem', decision: 'grant-token' }], undefined],
  ])('warns at construction about a rule that cannot lift a protection: %s', (_label, rules, protection) => {
    const { logs } = build({ rules });
    const warnings = logs.filter((line) => line.plugin === PLUGIN_NAME);
    if (!protection) {
      expect(warnings).toEqual([]);
      return;
    }
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ level: 40, phase: 'policy', pattern: rules?.[0]?.pattern, protection });
    expect(String(warnings[0]?.msg)).toMatch(/cannot lift/);
  });

  it.each<[string, Partial<FileSafetyOptions>, Access, string, Verdict]>([
    ['reads of rc files are not restricted by the mandatory list', {}, 'read', 'home/.bashrc', 'sandbox'],
    ['reads of rc files follow the rules', grantHome, 'read', 'home/.bashrc', 'grant-token'],
    ['a deny rule on an rc file still denies', { rules: [{ pattern: '~/.bashrc', decision: 'deny' }] }, 'write', 'home/.bashrc', 'deny'],
    ['a BSD sed temp of an rc file', grantHome, 'write', 'home/.!99!.zshrc', 'prompt'],
    ['a git hook', {}, 'write', 'ws/.git/hooks/pre-commit', 'prompt'],
    ['a new git hook', {}, 'write', 'ws/.git/hooks/post-checkout', 'prompt'],
    ['the hooks directory', {}, 'delete', 'ws/.git/hooks', 'prompt'],
    ['git config', {}, 'write', 'ws/.git/config', 'prompt'],
    ['git config at any depth', {}, 'write', 'ws/sub/.git/config', 'prompt'],
    ['replacing a whole .git', {}, 'delete', 'ws/.git', 'prompt'],
    ['git hooks even with a rule granting .git', { rules: [{ pattern: '.git/**', decision: 'sandbox' }] }, 'write', 'ws/.git/hooks/pre-commit', 'prompt'],
    ['a commondir, which moves config and hooks elsewhere', {}, 'write', 'ws/.git/commondir', 'prompt'],
    ["a worktree's commondir", {}, 'write', 'ws/.git/worktrees/wt/commondir', 'prompt'],
    ["a worktree's config", {}, 'write', 'ws/.git/worktrees/wt/config.worktree', 'prompt'],
    ['a HEAD outside .git makes a git directory', {}, 'write', 'ws/docs/HEAD', 'prompt'],
    ["a separate git dir's reflog of HEAD is git's own", {}, 'write', 'ws/bare/logs/HEAD', 'sandbox'],
    ['even with a rule granting it', { rules: [{ pattern: '**', decision: 'sandbox' }] }, 'write', 'ws/docs/HEAD', 'prompt'],
    ["removing a bare repository's HEAD would unprotect its config", {}, 'delete', 'ws/bare/HEAD', 'prompt'],
    ["the reflog's HEAD is data", {}, 'delete', 'ws/bare/logs/HEAD', 'sandbox'],
    ['a branch called commondir is data', {}, 'write', 'ws/.git/refs/heads/commondir', 'sandbox'],
    ["a bare repository's config", {}, 'write', 'ws/bare/config', 'prompt'],
    ["a bare repository's new hook", {}, 'write', 'ws/bare/hooks/post-checkout', 'prompt'],
    ["a bare repository's hooks directory", {}, 'delete', 'ws/bare/hooks', 'prompt'],
    ["a bare repository's commondir", {}, 'write', 'ws/bare/commondir', 'prompt'],
    ["a bare repository's objects", {}, 'write', 'ws/bare/objects/ab/new-object', 'sandbox'],
    ["a bare repository's remotes", {}, 'write', 'ws/bare/remotes/origin', 'prompt'],
    ['a remote git reads from a file', {}, 'write', 'ws/.git/remotes/origin', 'prompt'],
    ['a remote in the older branches form', {}, 'write', 'ws/.git/branches/origin', 'prompt'],
    ['the remotes folder itself: a symlink there would name any folder of remotes', {}, 'write', 'ws/.git/remotes', 'prompt'],
    ['the branches folder itself', {}, 'delete', 'ws/.git/branches', 'prompt'],
    ['a config in a folder without HEAD', {}, 'write', 'ws/plain/config', 'sandbox'],
    ['a hooks folder of source code', {}, 'write', 'ws/plain/hooks/useThing.ts', 'sandbox'],
    ['the backup store', {}, 'write', 'home/.brokered-shell/workspace/blob', 'deny'],
    ['the backup store with a grant rule', grantHome, 'write', 'home/.brokered-shell/workspace/new', 'deny'],
    ['deleting the backup store', grantHome, 'delete', 'home/.brokered-shell', 'deny'],
    ['deleting a directory that holds the backup store', grantHome, 'delete', 'home', 'deny'],
    ['the socket directory', { writableRoots: [ws, `${base}/run`] }, 'write', 'run/broker.sock', 'deny'],
    ['reading the backup store is left to the sandbox', {}, 'read', 'home/.brokered-shell/workspace/blob', 'sandbox'],
  ])('%s → %s', async (_label, extra, access, relative, expected) => {
    expect((await verdictOf(build(extra), access, relative)).verdict).toBe(expected);
  });

  it.each([
    '.git/objects/ab/cdef',
    '.git/objects/ab/new-object',
    '.git/refs/heads/main',
    '.git/refs/heads/feature',
    '.git/index',
    '.git/index.lock',
    '.git/logs/HEAD',
    '.git/COMMIT_EDITMSG',
    '.git/ORIG_HEAD',
    '.git/packed-refs',
  ])('git can still commit: %s → sandbox', async (file) => {
    for (const access of ['write', 'delete'] as const) {
      expect((await verdictOf(build(), access, `ws/${file}`)).verdict).toBe('sandbox');
    }
  });

  it('git can still update HEAD (a rename over it); removing it asks', async () => {
    expect((await verdictOf(build(), 'write', 'ws/.git/HEAD')).verdict).toBe('sandbox');
    expect((await verdictOf(build(), 'delete', 'ws/.git/HEAD')).verdict).toBe('prompt');
  });
});

describe('symlink escapes', () => {
  it.each<[string, Partial<FileSafetyOptions>, Access, string, Verdict]>([
    ['a link in the root to a file outside', {}, 'write', 'ws/link-out', 'deny'],
    ['the same with outsideRoots prompt', { outsideRoots: 'prompt' }, 'write', 'ws/link-out', 'deny'],
    ['a new file through a link to a directory outside', {}, 'write', 'ws/link-dir/new.txt', 'deny'],
    ['deleting through a link to a directory outside', {}, 'delete', 'ws/link-dir/x', 'deny'],
    ['creating through a dangling link that points outside', {}, 'write', 'ws/dangling-out', 'deny'],
    ['deleting the link itself stays inside', {}, 'delete', 'ws/link-out', 'sandbox'],
    ['a grant on the link own path does not reach its target', { rules: [{ pattern: `${base}/ws/link-out`, decision: 'grant-token' }] }, 'write', 'ws/link-out', 'deny'],
    ['a deny on the link own path, target allowed', { rules: [{ pattern: `${base}/ws/link-in`, decision: 'deny' }] }, 'write', 'ws/link-in', 'deny'],
    ['a deny on the target applies through the link', { rules: [{ pattern: `${base}/ws/a.txt`, decision: 'deny' }] }, 'write', 'ws/link-in', 'deny'],
    ['a target the rules allow is allowed through a link', { rules: [{ pattern: `${base}/outside/allowed.txt`, decision: 'grant-token' }] }, 'write', 'ws/link-allowed', 'grant-token'],
    ['a link to a file inside the root', {}, 'write', 'ws/link-in', 'sandbox'],
  ])('%s → %s', async (_label, extra, access, relative, expected) => {
    expect((await verdictOf(build(extra), access, relative)).verdict).toBe(expected);
  });

  it('says the path resolves outside the writable roots', async () => {
    const { reason } = await verdictOf(build(), 'write', 'ws/link-out');
    expect(reason).toMatch(/resolves to .* outside the writable roots/);
    expect(reason).toContain(at('outside/target.txt'));
  });

  it.each<[string, string, Verdict]>([
    ['a hard link to a file outside the roots', 'outside/target.txt', 'deny'],
    ['a hard link to a file inside the roots', 'ws/a.txt', 'sandbox'],
  ])('%s is judged as a write on its source → %s', async (_label, source, expected) => {
    const outcome = await build().broker.handle({
      origin: 'api',
      action: 'check',
      operation: 'link',
      sessionId: 's1',
      targets: [
        { role: 'from', path: at(source), access: 'read' },
        { role: 'to', path: at('ws/hard-link.txt'), access: 'write' },
      ],
    });
    expect(outcome.decision.verdict).toBe(expected);
  });

  it('denies a rename whose source is fine but whose target escapes', async () => {
    const outcome = await build().broker.handle({
      origin: 'api',
      action: 'check',
      operation: 'rename',
      sessionId: 's1',
      targets: [
        { role: 'from', path: at('ws/a.txt'), access: 'delete' },
        { role: 'to', path: at('ws/link-dir/moved.txt'), access: 'write' },
      ],
    });
    expect(outcome).toMatchObject({ ok: false, decision: { verdict: 'deny' }, error: { code: ErrorCodes.POLICY_DENIED } });
  });
});

describe('symlinks into .git', () => {
  const symlink = (linkTarget: string): BrokerRequestInput => ({
    origin: 'kernel',
    action: 'check',
    operation: 'link',
    sessionId: 's1',
    targets: [{ role: 'to', path: at('ws/new-link'), access: 'write' }],
    options: { symbolic: true, linkTarget },
  });

  it.each(['.git/stage/sub', '.git', '../ws/.git/worktrees/x', `${base}/ws/.git/hooks`, 'a/.GIT/b', '/elsewhere/.git/'])('%s needs approval', async (linkTarget) => {
    const outcome = await build().broker.handle(symlink(linkTarget));
    expect(outcome.decision).toMatchObject({ verdict: 'prompt', source: 'file-safety:mandatory:git-symlink' });
  });

  it.each(['bare', 'bare/objects', `${base}/ws/bare/refs/heads`, '../ws/bare'])('%s, in a git directory not named .git, needs approval', async (linkTarget) => {
    const outcome = await build().broker.handle(symlink(linkTarget));
    expect(outcome.decision).toMatchObject({ verdict: 'prompt', source: 'file-safety:mandatory:git-symlink' });
  });

  it.each(['a.txt', '.gitignore', 'x.git/y', '.github/workflows', 'git/.gitkeep', 'plain/hooks', 'docs'])('%s is judged as any symlink', async (linkTarget) => {
    expect((await build().broker.handle(symlink(linkTarget))).decision.verdict).toBe('sandbox');
  });

  it.each(['.git/rebase-merge', '.git/rebase-merge/git-rebase-todo', '.git/sequencer', '.git/worktrees/wt/rebase-apply/next'])(
    'a symlink at %s, where git keeps a stopped operation, needs approval wherever it leads',
    async (where) => {
      const folder = path.dirname(at(`ws/${where}`));
      const made = await fs.mkdir(folder, { recursive: true });
      try {
        const outcome = await build().broker.handle({ ...symlink('../../stash'), targets: [{ role: 'to', path: at(`ws/${where}`), access: 'write' }] });
        expect(outcome.decision).toMatchObject({ verdict: 'prompt', source: 'file-safety:mandatory:git-symlink' });
        expect(outcome.decision.reason).toContain("git's record of a stopped rebase");
      } finally {
        if (made) await fs.rm(made, { recursive: true });
      }
    },
  );

  it('a folder named like one outside any git directory is judged as any symlink', async () => {
    await fs.mkdir(at('ws/src'), { recursive: true });
    const outcome = await build().broker.handle({ ...symlink('a.txt'), targets: [{ role: 'to', path: at('ws/src/sequencer'), access: 'write' }] });
    expect(outcome.decision.verdict).toBe('sandbox');
  });

  it('a hard link of a symlink is judged by the symlink it copies', async () => {
    await fs.symlink('.git/stage/sub', at('ws/into-git'));
    const hardLink = (from: string): BrokerRequestInput => ({
      origin: 'kernel',
      action: 'check',
      operation: 'link',
      sessionId: 's1',
      targets: [
        { role: 'from', path: at(from), access: 'read' },
        { role: 'to', path: at('ws/new-hard-link'), access: 'write' },
      ],
      options: { followSymlinks: false },
    });
    try {
      expect((await build().broker.handle(hardLink('ws/into-git'))).decision).toMatchObject({ verdict: 'prompt', source: 'file-safety:mandatory:git-symlink' });
      expect((await build().broker.handle(hardLink('ws/link-in'))).decision.verdict).toBe('sandbox');
      expect((await build().broker.handle(hardLink('ws/a.txt'))).decision.verdict).toBe('sandbox');
    } finally {
      await fs.rm(at('ws/into-git'));
    }
  });

  it('a symlink moved elsewhere is judged where it lands, alone or in a directory moved whole', async () => {
    // From ws, ../bare names a folder beside ws; from ws/plain it names ws/bare, a git directory.
    await fs.symlink('../bare', at('ws/moving-link'));
    await fs.mkdir(at('ws/moving-dir'));
    await fs.symlink('../../bare', at('ws/moving-dir/docs'));
    const rename = (from: string, to: string): BrokerRequestInput => ({
      origin: 'kernel',
      action: 'check',
      operation: 'rename',
      sessionId: 's1',
      targets: [
        { role: 'from', path: at(from), access: 'delete' },
        { role: 'to', path: at(to), access: 'write' },
      ],
    });
    try {
      expect((await build().broker.handle(rename('ws/moving-link', 'ws/plain/l'))).decision).toMatchObject({ verdict: 'prompt', source: 'file-safety:mandatory:git-symlink' });
      expect((await build().broker.handle(rename('ws/moving-link', 'ws/l2'))).decision.verdict).toBe('sandbox');
      const whole = await build().broker.handle(rename('ws/moving-dir', 'ws/plain/moved'));
      expect(whole.decision).toMatchObject({ verdict: 'prompt', source: 'file-safety:mandatory:git-symlink' });
      expect(whole.decision.reason).toContain('would then hold');
    } finally {
      await fs.rm(at('ws/moving-link'));
      await fs.rm(at('ws/moving-dir'), { recursive: true });
    }
  });

  it('a deny rule on the link still denies', async () => {
    const outcome = await build({ rules: [{ pattern: 'new-link', decision: 'deny' }] }).broker.handle(symlink('.git/x'));
    expect(outcome.decision.verdict).toBe('deny');
  });
});

describe('hard links', () => {
  it('refuses in-place writes to a file with another name, but not replacing or removing that name', async () => {
    const built = build();
    const inside = at('ws/twin.txt');
    writeFileSync(at('outside-twin.txt'), 'outside');
    linkSync(at('outside-twin.txt'), inside);
    const write = await verdictOf(built, 'write', 'ws/twin.txt');
    expect(write).toMatchObject({ verdict: 'deny', source: 'file-safety:mandatory' });
    expect(write.reason).toMatch(/2 hard links/);
    expect((await verdictOf(built, 'delete', 'ws/twin.txt')).verdict).toBe('sandbox');
    const renameOver = await built.broker.handle({
      origin: 'api',
      action: 'check',
      operation: 'rename',
      sessionId: 's1',
      targets: [
        { role: 'from', path: at('ws/file.txt'), access: 'delete' },
        { role: 'to', path: inside, access: 'write' },
      ],
    });
    expect(renameOver.decision.verdict).toBe('sandbox');
  });

  it('refuses changing the mode or times of a FIFO with another name, but lets data be written through it', async () => {
    const built = build();
    execFileSync('mkfifo', [at('ws/pipe')]);
    linkSync(at('ws/pipe'), at('outside-pipe'));
    const metadata = async (operation: 'chmod' | 'touch') =>
      (await built.broker.handle({ origin: 'api', action: 'check', operation, sessionId: 's1', targets: [{ role: 'path', path: at('ws/pipe'), access: 'write' }] })).decision;
    expect(await metadata('chmod')).toMatchObject({ verdict: 'deny', reason: expect.stringMatching(/2 hard links/) });
    expect((await metadata('touch')).verdict).toBe('deny');
    expect((await verdictOf(built, 'write', 'ws/pipe')).verdict).toBe('sandbox');
    rmSync(at('outside-pipe'));
    expect((await metadata('chmod')).verdict).toBe('sandbox');
    rmSync(at('ws/pipe'));
  });
});

describe('taps', () => {
  it('registers one tap per stage under its own name', () => {
    const { broker } = build();
    const names = broker.hooks.evaluatePolicy.taps.map((tap) => tap.name);
    expect(names).toEqual([FILE_SAFETY_TAPS.protected, FILE_SAFETY_TAPS.mandatory, FILE_SAFETY_TAPS.tree, FILE_SAFETY_TAPS.rules, FILE_SAFETY_TAPS.roots]);
  });
});

describe('evaluateFileSafety (pure)', () => {
  it.each<[string, Access, string, string, Verdict]>([
    ['inside', 'write', 'ws/x', 'ws/x', 'sandbox'],
    ['escape', 'write', 'ws/x', 'outside/x', 'deny'],
    ['rc file', 'write', 'home/.zshrc', 'home/.zshrc', 'prompt'],
    ['read', 'read', 'outside/x', 'outside/x', 'sandbox'],
  ])('%s → %s', (_label, access, lexical, resolved, expected) => {
    const policy = compileFileSafety(options());
    const target = { access, lexical: at(lexical), resolved: at(resolved), ruleForm: at(resolved) };
    expect(evaluateFileSafety(target, policy).verdict).toBe(expected);
  });
});

describe('invalid options', () => {
  it.each<[string, unknown, string]>([
    ['a relative root', { writableRoots: ['relative/dir'] }, 'writableRoots.0'],
    ['a root that does not exist', { writableRoots: ['/definitely/not/here/bsh'] }, 'writableRoots.0'],
    ['a bad decision word', { writableRoots: [], rules: [{ pattern: '*.pem', decision: 'allow' }] }, 'rules.0.decision'],
    ['a bad access word', { writableRoots: [], rules: [{ pattern: '*.pem', access: ['exec'], decision: 'deny' }] }, 'rules.0.access'],
    ['an unknown key', { writableRoots: [], colour: 'red' }, 'colour'],
    ['an unknown rule key', { writableRoots: [], rules: [{ pattern: 'x', decision: 'deny', effect: 'x' }] }, 'effect'],
    ['a ~user pattern', { writableRoots: [], rules: [{ pattern: '~bob/x', decision: 'deny' }] }, 'rules.0.pattern'],
    ['a negated pattern', { writableRoots: [], rules: [{ pattern: '!*.txt', decision: 'grant-token' }] }, 'rules.0.pattern'],
    ['a pattern no path can match', { writableRoots: [], rules: [{ pattern: '**/../**', decision: 'deny' }] }, 'rules.0.pattern'],
    ['a pattern ending in a newline', { writableRoots: [], rules: [{ pattern: '*.pem', decision: 'deny' }, { pattern: '*.key\n', decision: 'deny' }] }, 'rules.1.pattern'],
    ['an extglob', { writableRoots: [], rules: [{ pattern: '@(a|b).txt', decision: 'deny' }] }, 'rules.0.pattern'],
    ['a bad outsideRoots', { writableRoots: [], outsideRoots: 'sandbox' }, 'outsideRoots'],
    ['a relative protected path', { writableRoots: [], protectedPaths: ['store'] }, 'protectedPaths.0'],
    ['missing roots', {}, 'writableRoots'],
  ])('%s → INVALID_OPTIONS naming %s', (_label, input, key) => {
    let error: unknown;
    try {
      new FileSafetyPlugin(input as FileSafetyOptions);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(BrokerError);
    expect((error as BrokerError).code).toBe(ErrorCodes.INVALID_OPTIONS);
    expect((error as BrokerError).message).toContain(key);
  });
});

describe('whole-directory operations are judged by what is inside', () => {
  const hostOp = (operation: 'delete' | 'rename' | 'copy', targets: Array<[TargetRole, string, Access]>, recursive = true): BrokerRequestInput => ({
    origin: 'api',
    action: 'check',
    operation,
    sessionId: 's1',
    options: { recursive },
    targets: targets.map(([role, relative, access]) => ({ role, path: at(relative), access })),
  });

  it.each<[string, BrokerRequestInput, Verdict]>([
    ['rm -r of a directory holding a denied file', hostOp('delete', [['path', 'ws/tree', 'delete']]), 'deny'],
    ['moving that directory away', hostOp('rename', [['from', 'ws/tree', 'delete'], ['to', 'ws/moved', 'write']]), 'deny'],
    ['rm -r of a directory holding only a prompted file', hostOp('delete', [['path', 'ws/keys', 'delete']]), 'prompt'],
    ['rm -r of a directory holding nothing restricted', hostOp('delete', [['path', 'ws/plain', 'delete']]), 'sandbox'],
    ['a tree copy over a denied file', hostOp('copy', [['from', 'ws/plain', 'read'], ['to', 'ws/tree', 'write']]), 'deny'],
    // A rule that denies writing config/prod.json also denies bringing one there in a moved directory.
    ['a directory moved in where a file it holds may not be written', hostOp('rename', [['from', 'ws/staged', 'delete'], ['to', 'ws/config', 'write']]), 'deny'],
    ['the same, over an empty directory already there', hostOp('rename', [['from', 'ws/staged', 'delete'], ['to', 'ws/empty', 'write']]), 'deny'],
    ['a directory moved in where nothing it holds is restricted', hostOp('rename', [['from', 'ws/staged', 'delete'], ['to', 'ws/elsewhere', 'write']]), 'sandbox'],
    // A link inside is taken along as a link: what it names is not looked through.
    ['rm -r of a directory holding only a link to one with a prompted file', hostOp('delete', [['path', 'ws/holder', 'delete']]), 'sandbox'],
  ])('%s → %s', async (_label, request, verdict) => {
    for (const dir of ['ws/tree/sub', 'ws/keys', 'ws/plain/sub', 'ws/staged', 'ws/empty']) await fs.mkdir(at(dir), { recursive: true });
    await fs.writeFile(at('ws/staged/prod.json'), '{}');
    await fs.mkdir(at('ws/holder'), { recursive: true });
    await fs.symlink('../keys', at('ws/holder/link')).catch(() => undefined);
    await fs.writeFile(at('ws/tree/sub/secret.txt'), 's');
    await fs.writeFile(at('ws/keys/id.pem'), 'k');
    await fs.writeFile(at('ws/plain/sub/secret.txt'), 'p');
    await fs.writeFile(at('ws/plain/note.txt'), 'n');
    const built = build({
      rules: [
        { pattern: `${ws}/tree/sub/secret.txt`, decision: 'deny' },
        { pattern: '*.pem', access: ['delete'], decision: 'prompt' },
        { pattern: `${ws}/config/prod.json`, access: ['write'], decision: 'deny' },
        { pattern: `${ws}/empty/prod.json`, access: ['write'], decision: 'deny' },
      ],
    });
    const outcome = await built.broker.handle(request);
    expect(outcome.decision.verdict).toBe(verdict);
    if (verdict !== 'sandbox') expect(outcome.decision.reason).toMatch(/ (contains|would then hold) /);
  });
});

describe('a prompt rule on a link name does not loosen the file it points to', () => {
  it('stays denied when the link resolves outside the roots', async () => {
    await fs.writeFile(at('outside-notes.txt'), 'x');
    await fs.symlink(at('outside-notes.txt'), at('ws/notes-link')).catch(() => undefined);
    const built = build({ rules: [{ pattern: 'notes-link', decision: 'prompt' }] });
    expect((await verdictOf(built, 'write', 'ws/notes-link')).verdict).toBe('deny');
  });

  it('still asks when the rule names the file itself', async () => {
    await fs.writeFile(at('ws/real-notes.txt'), 'x');
    const built = build({ rules: [{ pattern: 'real-notes.txt', decision: 'prompt' }] });
    expect((await verdictOf(built, 'write', 'ws/real-notes.txt')).verdict).toBe('prompt');
  });
});

describe('git protections by pattern and on the disk', () => {
  it('leaves the git protections exact', () => {
    const [git] = buildProtections({ homes: ['/home/u'], protectedPaths: [] }).filter((p) => p.id === 'git-hooks-config');
    const covered = ['/w/.git/hooks', '/w/.git/hooks/pre-commit', '/w/.git/config', '/w/a/.git/modules/m/hooks/x', '/w/.git/modules/a/b/config'];
    const notCovered = ['/w/.git/HEAD', '/w/git/hooks', '/w/.gitx/hooks', '/w/x.git/hooks', '/w/.git\\hooks', '/w/.git/objects/ab/tmp_obj_x'];
    for (const form of covered) expect([form, git?.covers(form, 'write')]).toEqual([form, true]);
    for (const form of notCovered) expect([form, git?.covers(form, 'write')]).toEqual([form, false]);
  });

  it('covers every commondir and worktree config in .git, and nothing else new', () => {
    const [git] = buildProtections({ homes: ['/home/u'], protectedPaths: [] }).filter((p) => p.id === 'git-hooks-config');
    const covered = ['/w/.git/commondir', '/w/.git/config.worktree', '/w/.git/worktrees/wt/commondir', '/w/.git/worktrees/wt/config.worktree', '/w/.git/modules/m/commondir'];
    const notCovered = ['/w/.git/worktrees/wt/HEAD', '/w/.git/worktrees/wt/gitdir', '/w/commondir', '/w/.git/commondir2', '/w/.git/info/exclude'];
    for (const form of covered) expect([form, git?.covers(form, 'write')]).toEqual([form, true]);
    for (const form of notCovered) expect([form, git?.covers(form, 'write')]).toEqual([form, false]);
  });

  it('takes a HEAD written outside any git directory for a new one', () => {
    const [head] = buildProtections({ homes: ['/home/u'], protectedPaths: [] }).filter((p) => p.id === 'git-directory-head');
    const writes = ['/w/docs/HEAD', '/w/x.git/HEAD', '/HEAD', at('ws/docs/HEAD'), at('ws/plain/HEAD')];
    // In a git directory already (a `.git`, or where a HEAD is at or above: a separate git dir), git keeps HEADs of its own.
    const inGitDir = [at('ws/bare/HEAD'), at('ws/bare/logs/HEAD'), at('ws/bare/refs/remotes/origin/HEAD')];
    const notWrites = ['/w/.git/HEAD', '/w/.git/worktrees/wt/HEAD', '/w/a/.git/modules/m/HEAD', '/w/docs/HEADS', '/w/docs/ORIG_HEAD', '/w/docs/head', '/w/HEAD/x', 'HEAD', ...inGitDir];
    for (const form of writes) expect([form, head?.covers(form, 'write')]).toEqual([form, true]);
    for (const form of notWrites) expect([form, head?.covers(form, 'write')]).toEqual([form, false]);
  });

  it("asks before a HEAD is removed, but a remote's HEAD or the reflog: without it a folder's config and hooks would be unprotected", () => {
    const [head] = buildProtections({ homes: ['/home/u'], protectedPaths: [] }).filter((p) => p.id === 'git-directory-head');
    const asks = [at('ws/bare/HEAD'), at('ws/.git/HEAD'), at('ws/.git/worktrees/wt/HEAD'), at('ws/docs/HEAD')];
    const data = [at('ws/bare/logs/HEAD'), at('ws/bare/refs/remotes/origin/HEAD'), at('ws/.git/logs/HEAD')];
    for (const form of asks) expect([form, head?.covers(form, 'delete')]).toEqual([form, true]);
    for (const form of data) expect([form, head?.covers(form, 'delete')]).toEqual([form, false]);
  });

  it("a HEAD planted inside a git directory does not make a nested git dir's config its data: the outermost decides", async () => {
    const [files] = buildProtections({ homes: ['/home/u'], protectedPaths: [] }).filter((p) => p.id === 'git-directory-files');
    // A submodule at src/objects/lib keeps its git dir at modules/src/objects/lib; a HEAD at modules/src would see it under objects/.
    await fs.mkdir(at('ws/bare/modules/src/objects/lib'), { recursive: true });
    await fs.writeFile(at('ws/bare/modules/src/objects/lib/HEAD'), 'ref: refs/heads/main\n');
    await fs.writeFile(at('ws/bare/modules/src/HEAD'), 'planted\n');
    try {
      expect(files?.covers(at('ws/bare/modules/src/objects/lib/config'), 'write')).toBe(true);
      expect(files?.covers(at('ws/bare/modules/src/objects/lib/hooks/post-checkout'), 'write')).toBe(true);
    } finally {
      await fs.rm(at('ws/bare/modules/src'), { recursive: true });
    }
  });

  it('below a git directory, its nested git dirs keep these names protected without a HEAD of their own; refs, logs and objects hold data', () => {
    const [files] = buildProtections({ homes: ['/home/u'], protectedPaths: [] }).filter((p) => p.id === 'git-directory-files');
    // wt and sub hold no HEAD here, as after a command removed it to rewrite their config.
    const covered = ['ws/bare/worktrees/wt/commondir', 'ws/bare/worktrees/wt/config.worktree', 'ws/bare/modules/sub/config', 'ws/bare/modules/sub/hooks/x', 'ws/.git/worktrees/wt/modules/sub/config', 'ws/.git/worktrees/wt/modules/sub/hooks'];
    const data = ['ws/bare/refs/heads/hooks', 'ws/bare/refs/heads/config', 'ws/bare/logs/refs/heads/config', 'ws/.git/refs/heads/remotes', 'ws/bare/objects/ab/config'];
    for (const relative of covered) expect([relative, files?.covers(at(relative), 'write')]).toEqual([relative, true]);
    for (const relative of data) expect([relative, files?.covers(at(relative), 'write')]).toEqual([relative, false]);
  });

  it("looks for a HEAD beside a config, commondir or hooks: there, they are a git directory's", () => {
    const [files] = buildProtections({ homes: ['/home/u'], protectedPaths: [] }).filter((p) => p.id === 'git-directory-files');
    const covered = ['ws/bare/config', 'ws/bare/config.worktree', 'ws/bare/commondir', 'ws/bare/hooks', 'ws/bare/hooks/pre-commit', 'ws/bare/hooks/new/deeper'];
    const notCovered = ['ws/bare/HEAD', 'ws/bare/objects/ab/cdef', 'ws/bare/config/x', 'ws/bare/description', 'ws/plain/config', 'ws/plain/hooks/useThing.ts', 'ws/missing/config', 'ws/a.txt/config'];
    for (const relative of covered) expect([relative, files?.covers(at(relative), 'delete')]).toEqual([relative, true]);
    for (const relative of notCovered) expect([relative, files?.covers(at(relative), 'write')]).toEqual([relative, false]);
    // A rule form is not looked up; .git's own are covered by its HEAD as well as by the patterns.
    expect([files?.covers(at('ws/.git/config'), 'write'), files?.covers('~/bare/config', 'write')]).toEqual([true, false]);
  });
});

describe('isWithin: at a component boundary, without building a string', () => {
  it('agrees with "the base itself or base + / as a prefix" on every short path', () => {
    const alphabet = ['/', 'a', 'b'];
    const strings = [''];
    for (let length = 1; length <= 4; length += 1) {
      for (const prefix of strings.filter((s) => s.length === length - 1)) strings.push(...alphabet.map((c) => prefix + c));
    }
    const naive = (p: string, base: string) => (base === '/' ? p.startsWith('/') : p === base || p.startsWith(`${base}/`));
    const differing = strings.flatMap((p) => strings.filter((base) => isWithin(p, base) !== naive(p, base)).map((base) => [p, base]));
    expect(differing).toEqual([]);
    expect([isWithin('/root2', '/root'), isWithin('/root/x', '/root'), isWithin('/root', '/root')]).toEqual([false, true, true]);
  });
});
