/**
 * The places other tools later take code from (code-paths.ts): in home, and in any folder
 * (editor, agent and hook configuration). Creating, changing, renaming or deleting one
 * needs approval whatever the rules say; files that are only data stay the rules'.
 */
import fs from 'node:fs/promises';
import { mkdtempSync, realpathSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Broker, ErrorCodes, createLogger, type Access, type BrokerRequestInput } from '../../src/core/index.js';
import { FileSafetyPlugin, HOME_CODE_PATHS, WORKSPACE_CODE_PATTERNS, type FileSafetyOptions } from '../../src/plugins/file-safety/index.js';
import { PathResolutionPlugin } from '../../src/plugins/path-resolution/index.js';

const base = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'bsh-code-paths-')));
const home = path.join(base, 'home');
const ws = path.join(base, 'ws');

/** Each home entry itself (a Python version for its `*`), relative to home; what is inside a folder entry is tested below. */
const homeSamples = Object.keys(HOME_CODE_PATHS).map((name) => name.replace('*', '3.11'));
/** A file each workspace pattern covers, nested in a package. */
const workspaceSamples = Object.keys(WORKSPACE_CODE_PATTERNS).map((pattern) => `packages/app/${pattern.replace('*', 'team')}`);

beforeAll(async () => {
  for (const relative of [...homeSamples.map((s) => `home/${s}`), ...workspaceSamples.map((s) => `ws/${s}`), 'ws/.vscode/settings.json', 'ws/.claude/settings.json', 'ws/moving/.vscode/tasks.json', 'ws/plain/readme.md']) {
    await fs.mkdir(path.dirname(path.join(base, relative)), { recursive: true });
  }
  await fs.writeFile(path.join(ws, 'moving/.vscode/tasks.json'), '{}');
  await fs.writeFile(path.join(ws, 'plain/readme.md'), 'x');
  await fs.mkdir(path.join(home, '.cache'), { recursive: true });
  await fs.mkdir(path.join(home, '.local/share'), { recursive: true });
});
afterAll(() => fs.rm(base, { recursive: true, force: true }));

/** Home a writable root, and a rule granting all of it: what is still asked is mandatory. */
function build(extra: Partial<FileSafetyOptions> = {}): Broker {
  const logger = createLogger({ level: 'silent' });
  return new Broker({ sessionId: 's1', logger }).use(
    new PathResolutionPlugin({ home }),
    new FileSafetyPlugin({ writableRoots: [ws, home], rules: [{ pattern: '~/**', decision: 'grant-token' }, { pattern: `${ws}/**`, decision: 'grant-token' }], home, ...extra }),
  );
}

async function decide(broker: Broker, access: Access, file: string) {
  const request: BrokerRequestInput = { origin: 'api', action: 'check', operation: access === 'delete' ? 'delete' : 'open', sessionId: 's1', targets: [{ role: 'path', path: file, access }] };
  const outcome = await broker.handle(request);
  expect(outcome.error?.code).not.toBe(ErrorCodes.PATH_NOT_FOUND);
  return outcome.decision;
}

describe('home: every place a shell, PATH, the desktop or a common tool takes code from', () => {
  it.each(homeSamples.flatMap((sample) => (['write', 'delete'] as const).map((access) => [sample, access] as const)))('~/%s (%s) needs approval', async (sample, access) => {
    const decision = await decide(build(), access, path.join(home, sample));
    expect(decision).toMatchObject({ verdict: 'prompt', source: 'file-safety:mandatory:home-code' });
  });

  it.each([
    ['bin/ls', "Debian's .profile puts it on PATH"],
    ['.vimrc', 'vim runs it'],
    ['.tmux.conf', 'tmux runs'],
    ['.npmrc', 'node-options'],
    ['.local/lib/python3.12/site-packages/evil.pth', '.pth files'],
    ['.cargo/config.toml', 'rustc wrappers'],
    ['.aws/config', 'credential_process'],
    ['.vim/plugin/x.vim', "vim's plugins"],
    ['.config/nvim/init.lua', 'neovim'],
    ['.claude/settings.json', 'hooks run commands'],
    ['.config/systemd/user/x.service', 'user services'],
  ])('~/%s says why it is asked: %s', async (file, why) => {
    await fs.mkdir(path.dirname(path.join(home, file)), { recursive: true });
    const decision = await decide(build(), 'write', path.join(home, file));
    expect(decision.verdict).toBe('prompt');
    expect(decision.reason).toContain(why);
    expect(decision.reason).toContain(path.join(home, file));
  });

  it.each(['.cache/tool/blob', '.netrc', '.local/share/notes.txt', 'bin2', '.vimrc.bak', '.local/lib/python3.11/other', 'notes.txt'])('~/%s, only data, is the rules\' to decide', async (file) => {
    await fs.mkdir(path.dirname(path.join(home, file)), { recursive: true });
    expect((await decide(build(), 'write', path.join(home, file))).verdict).toBe('grant-token');
  });

  it('a directory above one of them holds it: removing ~/.config asks', async () => {
    const decision = await decide(build(), 'delete', path.join(home, '.config'));
    expect(decision.verdict).toBe('prompt');
  });
});

describe('any folder: project files editors, agents and hooks obey or run', () => {
  it.each(workspaceSamples.flatMap((sample) => (['write', 'delete'] as const).map((access) => [sample, access] as const)))('%s (%s) needs approval, at any depth', async (sample, access) => {
    const decision = await decide(build(), access, path.join(ws, sample));
    expect(decision).toMatchObject({ verdict: 'prompt', source: 'file-safety:mandatory:workspace-code' });
    expect(decision.reason).toMatch(/a project file tools obey or run \(.+: .+\)/);
  });

  it.each(['.mcp.json', '.vscode/settings.json', '.vscode/tasks.json', '.claude/settings.json', '.claude/commands/deploy.md', '.idea/workspace.xml', '.devcontainer/devcontainer.json', '.envrc', '.gitmodules', '.husky/pre-commit'])(
    'the workspace\'s own %s needs approval',
    async (file) => {
      await fs.mkdir(path.dirname(path.join(ws, file)), { recursive: true });
      expect((await decide(build(), 'write', path.join(ws, file))).verdict).toBe('prompt');
    },
  );

  it.each(['.env', 'package.json', '.github/workflows/ci.yml', '.vscodex', 'my.mcp.json', '.editorconfig', '.gitattributes', 'src/husky.ts'])('%s, the project\'s own code or data, is the rules\' to decide', async (file) => {
    await fs.mkdir(path.dirname(path.join(ws, file)), { recursive: true });
    expect((await decide(build(), 'write', path.join(ws, file))).verdict).toBe('grant-token');
  });

  it('a directory moved whole is judged by the tool config it takes along', async () => {
    const outcome = await build().handle({
      origin: 'api',
      action: 'check',
      operation: 'rename',
      sessionId: 's1',
      options: { recursive: true },
      targets: [
        { role: 'from', path: path.join(ws, 'moving'), access: 'delete' },
        { role: 'to', path: path.join(ws, 'moved'), access: 'write' },
      ],
    });
    expect(outcome.decision.verdict).toBe('prompt');
    expect(outcome.decision.reason).toContain('.vscode');
  });
});
