import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BrokerError, ErrorCodes } from '../../src/core/index.js';
import {
  HOME_CONFIG_FILE,
  PROJECT_CONFIG_FILE,
  brokeredShellConfigSchema,
  confineProjectRules,
  defaultConfig,
  loadConfig,
  loadHomeConfig,
  mergeProjectConfig,
  projectConfigSchema,
  sessionConfigOf,
  type BrokeredShellConfig,
} from '../../src/config/index.js';

let base: string;
let home: string;
let ws: string;
beforeEach(() => {
  base = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'bsh-config-')));
  home = path.join(base, 'home');
  ws = path.join(base, 'ws');
  mkdirSync(home);
  mkdirSync(ws);
});
afterEach(() => rmSync(base, { recursive: true, force: true }));

const writeHome = (value: unknown) => writeFileSync(path.join(home, HOME_CONFIG_FILE), typeof value === 'string' ? value : JSON.stringify(value));
const writeProject = (value: unknown) => writeFileSync(path.join(ws, PROJECT_CONFIG_FILE), typeof value === 'string' ? value : JSON.stringify(value));
const load = () => loadConfig({ workspace: ws, home });

/** The error a load throws; fails the test when it does not throw. */
async function loadError(): Promise<BrokerError> {
  const error = await load().then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(error instanceof BrokerError)) throw new Error(`expected a BrokerError, got ${String(error)}`);
  return error;
}

describe('loading', () => {
  it('gives the defaults when neither file exists', async () => {
    const loaded = await load();
    expect(loaded.config).toEqual(defaultConfig());
    expect(loaded.sources).toEqual({
      home: { file: path.join(home, HOME_CONFIG_FILE), found: false },
      project: { file: path.join(ws, PROJECT_CONFIG_FILE), found: false },
    });
    expect(loaded.workspace).toBe(ws);
  });

  it('a home that is a file holds no config: the defaults, not an error (the store reports it)', async () => {
    const fileHome = path.join(ws, 'home-is-a-file');
    writeFileSync(fileHome, 'not a directory\n');
    const loaded = await loadConfig({ workspace: ws, home: fileHome });
    expect(loaded.config).toEqual(defaultConfig());
    expect(loaded.sources.home).toEqual({ file: path.join(fileHome, HOME_CONFIG_FILE), found: false });
  });

  it('finds the home config through $BROKERED_SHELL_HOME', async () => {
    writeHome({ sandbox: { runtime: 'preload' } });
    const loaded = await loadConfig({ workspace: ws, env: { BROKERED_SHELL_HOME: home } });
    expect(loaded.config.sandbox.runtime).toBe('preload');
    expect(loaded.sources.home).toEqual({ file: path.join(home, HOME_CONFIG_FILE), found: true });
    expect((await loadHomeConfig({ env: { BROKERED_SHELL_HOME: home } })).config.sandbox.runtime).toBe('preload');
  });

  it('takes everything from the home config and only narrowing additions from the project', async () => {
    writeHome({
      sandbox: { enabled: false, excludedCommands: ['docker'], runtime: 'seccomp' },
      writableRoots: ['/opt/cache'],
      fileBackup: { enabled: false, maxSizeMB: 50, oversize: 'skip' },
      fileSafety: { rules: [{ pattern: '~/.cache/**', decision: 'grant-token', access: ['write'] }], outsideRoots: 'prompt' },
    });
    writeProject({
      sandbox: { enabled: true },
      fileBackup: { enabled: true, oversize: 'deny' },
      fileSafety: {
        rules: [
          { pattern: '*.pem', decision: 'deny', reason: 'keys' },
          { pattern: 'package.json', decision: 'prompt', access: ['write'] },
        ],
        outsideRoots: 'deny',
      },
    });
    const { config } = await load();
    expect(config).toEqual<BrokeredShellConfig>({
      sandbox: { enabled: true, excludedCommands: ['docker'], runtime: 'seccomp', unixSockets: [] },
      writableRoots: ['/opt/cache'],
      cacheRoots: { defaults: true, add: [], remove: [] },
      fileBackup: { enabled: true, maxSizeMB: 50, oversize: 'deny', durability: 'turn' },
      fileSafety: {
        rules: [
          { pattern: '~/.cache/**', decision: 'grant-token', access: ['write'] },
          // deny rules keep their file-safety meaning; prompt rules are confined to the workspace.
          { pattern: '*.pem', decision: 'deny', reason: 'keys' },
          { pattern: `${ws}/**/package.json`, decision: 'prompt', access: ['write'] },
        ],
        outsideRoots: 'deny',
      },
      secrets: { defaults: true, add: [], remove: [] },
      network: { mode: 'allowlist', allow: [], deny: [] },
      approvals: 'inline',
      approvalTimeoutSeconds: 300,
    });
  });

  it('takes per-backup durability from a project over the home\'s "turn"', async () => {
    writeHome({ fileBackup: { durability: 'turn' } });
    expect((await load()).config.fileBackup.durability).toBe('turn');
    writeProject({ fileBackup: { durability: 'each' } });
    expect((await load()).config.fileBackup.durability).toBe('each');
  });

  it('leaves the home values when the project says nothing about them', async () => {
    writeHome({ fileBackup: { oversize: 'skip' }, fileSafety: { outsideRoots: 'prompt' } });
    writeProject({});
    const { config } = await load();
    expect(config.fileBackup.oversize).toBe('skip');
    expect(config.fileSafety.outsideRoots).toBe('prompt');
  });

  it('returns a rule protecting the project file, which sessionConfigOf adds to the rules', async () => {
    writeProject({ fileSafety: { rules: [{ pattern: 'x', decision: 'deny' }] } });
    const loaded = await load();
    expect(loaded.protectionRules).toEqual([
      expect.objectContaining({ pattern: `${ws}/${PROJECT_CONFIG_FILE}`, decision: 'prompt', access: ['write', 'delete'] }),
    ]);
    expect(loaded.config.fileSafety.rules).toHaveLength(1);
    expect(sessionConfigOf(loaded).fileSafety.rules).toEqual([...loaded.config.fileSafety.rules, ...loaded.protectionRules]);
  });

  it('names both forms of a workspace reached through a symlink, escaping glob characters', async () => {
    const odd = path.join(base, 'proj[1]');
    mkdirSync(odd);
    const link = path.join(base, 'link');
    symlinkSync(odd, link);
    writeFileSync(path.join(odd, PROJECT_CONFIG_FILE), JSON.stringify({ fileSafety: { rules: [{ pattern: 'Makefile', decision: 'prompt' }] } }));
    const loaded = await loadConfig({ workspace: link, home });
    expect(loaded.workspace).toBe(odd);
    expect(loaded.protectionRules.map((r) => r.pattern)).toEqual([`${link}/${PROJECT_CONFIG_FILE}`, `${base}/proj\\[1\\]/${PROJECT_CONFIG_FILE}`]);
    expect(loaded.config.fileSafety.rules.map((r) => r.pattern)).toEqual([`${link}/**/Makefile`, `${base}/proj\\[1\\]/**/Makefile`]);
  });
});

describe('the project file only narrows', () => {
  const refusals: Array<[string, unknown, string, RegExp]> = [
    ['writable roots', { writableRoots: ['/tmp'] }, 'writableRoots', /may not make more paths writable/],
    ['even an empty list of writable roots', { writableRoots: [] }, 'writableRoots', /may not make more paths writable/],
    ['excluded commands', { sandbox: { excludedCommands: ['curl'] } }, 'sandbox.excludedCommands', /outside the sandbox/],
    ['turning the sandbox off', { sandbox: { enabled: false } }, 'sandbox.enabled', /may not turn the sandbox off/],
    ['choosing the runtime', { sandbox: { runtime: 'preload' } }, 'sandbox.runtime', /may not choose how it is sandboxed/],
    ['a unix socket the command may reach', { sandbox: { unixSockets: ['/run/docker.sock'] } }, 'sandbox.unixSockets', /may not open doors out of the sandbox/],
    ['a sandbox rule', { fileSafety: { rules: [{ pattern: 'dist/**', decision: 'sandbox' }] } }, 'fileSafety.rules.0.decision', /only add deny or prompt rules; "sandbox"/],
    ['a grant rule', { fileSafety: { rules: [{ pattern: '~/.ssh/**', decision: 'grant-token' }] } }, 'fileSafety.rules.0.decision', /only add deny or prompt rules; "grant-token"/],
    ['prompting outside the roots', { fileSafety: { outsideRoots: 'prompt' } }, 'fileSafety.outsideRoots', /"prompt" would turn denials/],
    ['turning backups off', { fileBackup: { enabled: false } }, 'fileBackup.enabled', /may not turn backups off/],
    ['skipping oversize backups', { fileBackup: { oversize: 'skip' } }, 'fileBackup.oversize', /"skip" would let files over the size cap change/],
    ['syncing backups only at commit', { fileBackup: { durability: 'turn' } }, 'fileBackup.durability', /"turn" would let a power cut lose backups/],
    ['the size cap', { fileBackup: { maxSizeMB: 1 } }, 'fileBackup.maxSizeMB', /disk budget/],
    ['a prompt rule outside the workspace', { fileSafety: { rules: [{ pattern: '/etc/passwd', decision: 'prompt' }] } }, 'fileSafety.rules.0.pattern', /outside the workspace/],
    ['a prompt rule under ~', { fileSafety: { rules: [{ pattern: '~/.ssh/authorized_keys', decision: 'prompt' }] } }, 'fileSafety.rules.0.pattern', /only name paths inside the workspace/],
    ['a prompt rule that climbs out', { fileSafety: { rules: [{ pattern: '../other/x', decision: 'prompt' }] } }, 'fileSafety.rules.0.pattern', /"\.\." component/],
    ['an unknown key', { sandbox: { network: 'off' } }, 'sandbox', /unknown key\(s\) network/],
    ['a cache root', { cacheRoots: { add: ['~/.cache/tool'] } }, 'cacheRoots.add', /may not name folders that commands change without a question or a backup/],
    ['removing a default cache root', { cacheRoots: { remove: ['npm'] } }, 'cacheRoots.remove', /the user's setting \(cacheRoots belong in the home config\)/],
    ['turning the default cache roots off', { cacheRoots: { defaults: false } }, 'cacheRoots.defaults', /the user's setting/],
  ];

  it.each(refusals)('refuses %s, naming the file and the key', async (_what, project, key, why) => {
    writeProject(project);
    const error = await loadError();
    expect(error.code).toBe(ErrorCodes.INVALID_OPTIONS);
    const file = path.join(ws, PROJECT_CONFIG_FILE);
    expect(error.message).toContain(`  ${file}:\n`);
    const line = error.message.split('\n').find((l) => l.startsWith(`    - ${key}: `));
    expect(line, error.message).toBeDefined();
    expect(line).toMatch(why);
    expect(error.message).toMatch(/may only narrow the home configuration/);
    expect(error.details).toEqual({ problems: { [file]: expect.arrayContaining([expect.stringContaining(`${key}: `)]) } });
  });

  it('refuses a glob that starts in the workspace but could reach a sibling directory', async () => {
    writeProject({ fileSafety: { rules: [{ pattern: `${ws}{,-other}/x`, decision: 'prompt' }] } });
    expect((await loadError()).message).toMatch(/fileSafety\.rules\.0\.pattern: refused: .* is outside the workspace/);
  });

  it('accepts an absolute prompt rule inside the workspace as it is', async () => {
    writeProject({ fileSafety: { rules: [{ pattern: `${ws}/migrations/**`, decision: 'prompt' }] } });
    expect((await load()).config.fileSafety.rules).toEqual([{ pattern: `${ws}/migrations/**`, decision: 'prompt' }]);
  });

  it('accepts deny rules anywhere: they can only take away', async () => {
    const rules = [
      { pattern: '~/.aws/**', decision: 'deny' },
      { pattern: '/etc/**', decision: 'deny', access: ['write', 'delete'] },
      { pattern: '*.key', decision: 'deny' },
    ];
    writeProject({ fileSafety: { rules } });
    expect((await load()).config.fileSafety.rules).toEqual(rules);
  });

  it('names every bad key of both files in one multi-line error', async () => {
    writeHome({ writableRoots: ['relative/dir', '/ok'], fileBackup: { maxSizeMB: 'ten' } });
    writeProject({
      writableRoots: ['/'],
      sandbox: { runtime: 'preload' },
      fileSafety: { rules: [{ pattern: 'a', decision: 'sandbox' }, { pattern: '/etc/x', decision: 'prompt' }] },
    });
    const error = await loadError();
    expect(error.message.split('\n')).toEqual([
      'invalid brokered-shell configuration:',
      `  ${path.join(home, HOME_CONFIG_FILE)}:`,
      expect.stringMatching(/^ {4}- writableRoots\.0: must be an absolute path/),
      expect.stringMatching(/^ {4}- fileBackup\.maxSizeMB: .*expected number/),
      `  ${path.join(ws, PROJECT_CONFIG_FILE)}:`,
      expect.stringMatching(/^ {4}- sandbox\.runtime: refused: /),
      expect.stringMatching(/^ {4}- writableRoots: refused: /),
      expect.stringMatching(/^ {4}- fileSafety\.rules\.0\.decision: refused: /),
      expect.stringMatching(/^ {4}- fileSafety\.rules\.1\.pattern: refused: /),
      expect.stringMatching(/^\(\.brokered-shell\.json may only narrow/),
    ]);
  });

  it('takes cache roots from the home config: added (absolute or ~/) and removed (by name or path)', async () => {
    const cacheRoots = { defaults: true, add: ['~/.cache/tool', '/srv/ci-cache'], remove: ['npm', '~/.cache/pre-commit', '/opt/cache'] };
    writeHome({ cacheRoots });
    expect((await load()).config.cacheRoots).toEqual(cacheRoots);
    writeHome({ cacheRoots: { defaults: false } });
    expect((await load()).config.cacheRoots).toEqual({ defaults: false, add: [], remove: [] });
  });

  it('names every bad cacheRoots entry of the home config, by index', async () => {
    writeHome({ cacheRoots: { add: ['relative/cache', '~', '/ok', '~/a/../../b'], remove: ['npmm', '/ok'], extra: true } });
    const error = await loadError();
    const lines = error.message.split('\n').filter((line) => line.includes('cacheRoots'));
    expect(lines).toEqual([
      expect.stringMatching(/^ {4}- cacheRoots\.add\.0: must be an absolute path or start with ~\//),
      expect.stringMatching(/^ {4}- cacheRoots\.add\.1: names \/ or the whole home/),
      expect.stringMatching(/^ {4}- cacheRoots\.add\.3: must not contain '\.\.'/),
      expect.stringMatching(/^ {4}- cacheRoots\.remove\.0: must be the name of a default \(npm, pnpm, .*\) or an absolute or ~\/ path$/),
      expect.stringMatching(/^ {4}- cacheRoots: unknown key\(s\) extra$/),
      // Said once, not guessed: which of the two was meant.
      '    - cacheRoots.remove.1: /ok is in add too; name it once',
    ]);
    expect(error.message).not.toMatch(/may only narrow/);
  });

  it('refuses a relative writable root in the home config', async () => {
    writeHome({ writableRoots: ['./build'] });
    const error = await loadError();
    expect(error.code).toBe(ErrorCodes.INVALID_OPTIONS);
    expect(error.message).toContain(`${path.join(home, HOME_CONFIG_FILE)}:\n    - writableRoots.0: must be an absolute path`);
    // Not the project's hint: this is the home file.
    expect(error.message).not.toMatch(/may only narrow/);
  });

  it.each<[string, string, RegExp]>([
    ['not JSON', '{ "sandbox": ', /is not valid JSON/],
    ['not an object', '[1, 2]', /\(top level\): .*expected object/],
  ])('says so when a file is %s', async (_what, text, why) => {
    writeHome(text);
    const error = await loadError();
    expect(error.code).toBe(ErrorCodes.INVALID_OPTIONS);
    expect(error.message).toMatch(why);
    expect(error.message).toContain(path.join(home, HOME_CONFIG_FILE));
  });

  it('says so when a file cannot be read', async () => {
    mkdirSync(path.join(ws, PROJECT_CONFIG_FILE));
    expect((await loadError()).message).toMatch(/\.brokered-shell\.json:\n {4}- cannot be read: .*EISDIR/);
  });

  it('whatever a valid project says, the result is never looser than the home config', () => {
    const severity = { sandbox: 0, 'grant-token': 1, prompt: 2, deny: 3 } as const;
    const homeArb = fc.record({
      sandbox: fc.record({ enabled: fc.boolean(), excludedCommands: fc.array(fc.constantFrom('docker', 'make')), runtime: fc.constantFrom('auto', 'seccomp', 'preload') }),
      writableRoots: fc.array(fc.constantFrom('/opt/a', '/srv/b')),
      cacheRoots: fc.record({ defaults: fc.boolean(), add: fc.uniqueArray(fc.constantFrom('/opt/c', '~/.cache/t')), remove: fc.uniqueArray(fc.constantFrom('npm', 'cargo', '/srv/d')) }),
      fileBackup: fc.record({ enabled: fc.boolean(), maxSizeMB: fc.integer({ min: 1, max: 100 }), oversize: fc.constantFrom('deny', 'skip') }),
      fileSafety: fc.record({
        rules: fc.array(fc.record({ pattern: fc.constantFrom('*.pem', '~/.cache', '/x/**'), decision: fc.constantFrom('sandbox', 'grant-token', 'deny', 'prompt') })),
        outsideRoots: fc.constantFrom('deny', 'prompt'),
      }),
    });
    const projectArb = fc.record(
      {
        sandbox: fc.record({ enabled: fc.constant(true) }, { requiredKeys: [] }),
        fileBackup: fc.record({ enabled: fc.constant(true), oversize: fc.constant('deny') }, { requiredKeys: [] }),
        fileSafety: fc.record(
          {
            rules: fc.array(fc.record({ pattern: fc.constantFrom('*.pem', 'package.json', `/w/ws/src/**`, '~/.ssh'), decision: fc.constantFrom('deny', 'prompt') })),
            outsideRoots: fc.constant('deny'),
          },
          { requiredKeys: [] },
        ),
      },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(homeArb, projectArb, (homeInput, projectInput) => {
        const homeConfig = brokeredShellConfigSchema.parse(homeInput);
        const project = projectConfigSchema.parse(projectInput);
        const confined = confineProjectRules(project.fileSafety?.rules ?? [], ['/w/ws']);
        const merged = mergeProjectConfig(homeConfig, project, confined.rules);
        expect(merged.writableRoots).toEqual(homeConfig.writableRoots);
        expect(merged.cacheRoots).toEqual(homeConfig.cacheRoots);
        expect(merged.sandbox.excludedCommands).toEqual(homeConfig.sandbox.excludedCommands);
        expect(merged.sandbox.runtime).toBe(homeConfig.sandbox.runtime);
        expect(merged.fileBackup.maxSizeMB).toBe(homeConfig.fileBackup.maxSizeMB);
        if (homeConfig.sandbox.enabled) expect(merged.sandbox.enabled).toBe(true);
        if (homeConfig.fileBackup.enabled) expect(merged.fileBackup.enabled).toBe(true);
        if (homeConfig.fileBackup.oversize === 'deny') expect(merged.fileBackup.oversize).toBe('deny');
        if (homeConfig.fileSafety.outsideRoots === 'deny') expect(merged.fileSafety.outsideRoots).toBe('deny');
        // The home rules all stay; what is added is deny, or prompt confined to the workspace.
        expect(merged.fileSafety.rules.slice(0, homeConfig.fileSafety.rules.length)).toEqual(homeConfig.fileSafety.rules);
        for (const rule of merged.fileSafety.rules.slice(homeConfig.fileSafety.rules.length)) {
          expect(severity[rule.decision]).toBeGreaterThanOrEqual(severity.prompt);
          if (rule.decision === 'prompt') expect(rule.pattern.startsWith('/w/ws/')).toBe(true);
        }
      }),
    );
  });
});
