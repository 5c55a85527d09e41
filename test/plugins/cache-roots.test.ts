import { linkSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BackupHome } from '../../src/backup/index.js';
import { Broker, ErrorCodes, type BrokerRequestInput, type Operation } from '../../src/core/index.js';
import {
  CACHE_ROOT_DEFAULT_NAMES,
  CacheRootsPlugin,
  PLUGIN_NAME,
  compileCacheRoots,
  type CacheRootsOptions,
  type CacheRootsSettings,
} from '../../src/plugins/cache-roots/index.js';
import type { FileSafetyRule } from '../../src/plugins/file-safety/index.js';
import { standardPlugins } from '../../src/plugins/standard.js';
import { operationTargets, openTargets } from '../../src/requests/targets.js';
import { closeLater, closeOpened } from '../helpers/close-opened.js';
import { tempDir } from '../helpers/serve-process.js';

let base: string;
let ws: string;
let store: string;
let user: string;
const at = (relative: string) => path.join(base, relative);

function write(relative: string, content = 'x\n'): string {
  const file = at(relative);
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, content);
  return file;
}

beforeEach(() => {
  base = tempDir('bsh-cache-roots-');
  ws = at('ws');
  store = at('store');
  user = at('user');
  for (const dir of ['ws', 'store', 'user/.npm/_cacache', 'user/.npm/_npx', 'user/.cache', 'user/.cargo/bin', 'outside']) mkdirSync(at(dir), { recursive: true });
});
afterEach(closeOpened);

const settings = (input: Partial<CacheRootsSettings> = {}): CacheRootsSettings => ({ defaults: true, add: [], remove: [], ...input });
/** Only HOME: the machine's own tool variables (npm_config_cache under `npm test`) must not leak in. */
const env = (extra: Record<string, string> = {}) => ({ HOME: user, ...extra });

function broker(options: { rules?: FileSafetyRule[]; cacheRoots?: CacheRootsOptions } = {}): Broker {
  return closeLater(new Broker({ sessionId: 's1' })).use(
    ...standardPlugins({
      home: store,
      writableRoots: [ws],
      userHome: user,
      rules: options.rules ?? [],
      cacheRoots: { env: env(), ...options.cacheRoots },
    }),
  );
}

const request = (operation: Operation, paths: Parameters<typeof operationTargets>[1], options: BrokerRequestInput['options'] = {}): BrokerRequestInput => ({
  origin: 'kernel',
  action: 'check',
  operation,
  targets: operationTargets(operation, paths),
  sessionId: 's1',
  options,
});
// A write-only creating open, as the supervisor sends `echo > file` (O_WRONLY|O_CREAT|O_TRUNC).
const open = (file: string): BrokerRequestInput => ({ origin: 'kernel', action: 'check', operation: 'open', targets: openTargets(file, true), sessionId: 's1', options: { openFlags: 0o1101 } });

async function commit(b: Broker) {
  const answer = await b.control('CommitModifyBackup', { commitMsg: 'turn' });
  expect(answer).toMatchObject({ ok: true });
  const { manifest } = await new BackupHome({ home: store }).findTurn(String(answer.turnId));
  const recorded = [...manifest.files.map((f) => f.path), ...(manifest.structure ?? []).map((e) => `${e.kind} ${e.path}`)];
  return { answer, manifest, recorded };
}

describe('the roots', () => {
  it('are the defaults present on this machine, where each tool writes them, found through its own variable', () => {
    mkdirSync(at('elsewhere/npm-cache'), { recursive: true });
    mkdirSync(at('elsewhere/pip'), { recursive: true });
    const set = compileCacheRoots(settings(), { home: user, env: env({ npm_config_cache: at('elsewhere/npm-cache'), PIP_CACHE_DIR: at('elsewhere/pip'), UV_CACHE_DIR: at('absent/uv') }) });
    expect(set.roots.map((root) => [root.from, root.real])).toEqual([
      ['npm', at('elsewhere/npm-cache')],
      ['pip', at('elsewhere/pip')],
      // cargo's caches and lock files, which need not exist yet; never its bin.
      ['cargo', at('user/.cargo/registry')],
      ['cargo', at('user/.cargo/git')],
      ['cargo', at('user/.cargo/.package-cache')],
      ['cargo', at('user/.cargo/.package-cache-mutate')],
      ['cargo', at('user/.cargo/.global-cache')],
      ['cargo', at('user/.cargo/.global-cache-journal')],
      ['cargo', at('user/.cargo/.global-cache-wal')],
      ['cargo', at('user/.cargo/.global-cache-shm')],
      ['xdg-cache', at('user/.cache')],
    ]);
    expect(set.keptOut.map((out) => out.real)).toEqual([at('elsewhere/npm-cache/_npx'), at('user/.cache/pnpm/dlx'), at('user/.cache/node/corepack'), at('user/.cache/pre-commit'), at('user/.cache/brokered-shell')]);
  });

  it('follow XDG_CACHE_HOME and CARGO_HOME, and compare real paths (a cache reached through a link)', () => {
    mkdirSync(at('real-cache'));
    symlinkSync(at('real-cache'), at('user/linked-cache'));
    const set = compileCacheRoots(settings({ remove: ['npm'] }), { home: user, env: env({ XDG_CACHE_HOME: at('user/linked-cache'), CARGO_HOME: at('absent-cargo') }) });
    expect(set.roots.map((root) => root.real)).toEqual([at('real-cache')]);
    expect(set.rootOf(at('real-cache/tool/x'))?.from).toBe('xdg-cache');
    expect(set.rootOf(at('user/.cache/x'))).toBeUndefined();
  });

  it('are taken out by name or by path, added as absolute or ~/ paths, and let a kept-out folder in when added by name', () => {
    const set = compileCacheRoots(settings({ remove: ['cargo', '~/.cache/tool-a', at('user/.npm')], add: ['~/.npm/_npx', '/var/cache/ci-tool'] }), { home: user, env: env() });
    expect(set.roots.map((root) => [root.from, root.real])).toEqual([
      ['xdg-cache', at('user/.cache')],
      ['add', at('user/.npm/_npx')],
      ['add', '/var/cache/ci-tool'],
    ]);
    expect(set.rootOf(at('user/.cache/tool-a/x'))).toBeUndefined();
    expect(set.rootOf(at('user/.cache/tool-b/x'))?.from).toBe('xdg-cache');
    expect(set.rootOf(at('user/.npm/_npx/abc/node_modules/.bin/tsc'))?.from).toBe('add');
    expect(set.rootOf(at('user/.npm/_cacache/x'))).toBeUndefined();
  });

  it('are none with defaults off and nothing added', () => {
    expect(compileCacheRoots(settings({ defaults: false }), { home: user, env: env() }).roots).toEqual([]);
  });

  it('names every default a configuration may remove', () => {
    expect(CACHE_ROOT_DEFAULT_NAMES).toEqual(['npm', 'pnpm', 'yarn', 'bun', 'pip', 'uv', 'cargo', 'rustup', 'go', 'gradle', 'maven', 'ccache', 'xdg-cache']);
  });

  it('refuses bad options with one message naming each key', () => {
    expect(() => new CacheRootsPlugin({ add: ['relative'], remove: ['nope'] })).toThrow(/cache-roots options are invalid:\n {2}add\.0: .*\n {2}remove\.0: /);
  });
});

describe('the policy', () => {
  it.each<[string, string, Operation, (c: string) => Parameters<typeof operationTargets>[1]]>([
    ['a delete in the cache', 'sandbox', 'delete', (c) => ({ path: `${c}/_cacache/old` })],
    ['a rename within the cache', 'sandbox', 'rename', (c) => ({ from: `${c}/_cacache/old`, to: `${c}/_cacache/new` })],
    ['a chmod in the cache', 'sandbox', 'chmod', (c) => ({ path: `${c}/_cacache/old` })],
    ['a new folder in the cache', 'sandbox', 'mkdir', (c) => ({ path: `${c}/_cacache/dir` })],
    ['a write in a kept-out folder (npx runs what is there)', 'deny', 'chmod', (c) => ({ path: `${c}/_npx/old` })],
    ['a new folder in a kept-out folder', 'deny', 'mkdir', (c) => ({ path: `${c}/_npx/abc` })],
    ['moving the kept-out folder away', 'deny', 'rename', (c) => ({ from: `${c}/_npx`, to: `${c}/_cacache/npx` })],
    ['moving a folder in as the kept-out one', 'deny', 'rename', (c) => ({ from: `${c}/_cacache`, to: `${c}/_npx` })],
    ['removing the root that holds a kept-out folder', 'deny', 'delete', (c) => ({ path: c })],
    ['a symlink at a kept-out folder', 'deny', 'link', (c) => ({ to: `${c}/_npx`, symbolic: true })],
  ])('%s → %s', async (_label, expected, operation, paths) => {
    write('user/.npm/_cacache/old');
    write('user/.npm/_npx/old');
    const outcome = await broker().handle(request(operation, paths(at('user/.npm'))));
    expect(outcome.decision).toMatchObject({ verdict: expected, source: PLUGIN_NAME });
  });

  it('says why a kept-out folder is refused and what would let it in, and asks no question of it under outsideRoots: prompt', async () => {
    const b = closeLater(new Broker({ sessionId: 's1' })).use(
      ...standardPlugins({ home: store, writableRoots: [ws], userHome: user, outsideRoots: 'prompt', cacheRoots: { env: env() } }),
    );
    const inside = await b.handle(open(at('user/.npm/_npx/abc')));
    expect(inside.decision).toMatchObject({
      verdict: 'deny',
      reason: `${at('user/.npm/_npx/abc')} is in ${at('user/.npm/_npx')}, kept out of the cache roots (npx runs the packages it installed there as they are); cacheRoots.add in <home>/config.json would let it in`,
      source: PLUGIN_NAME,
    });
    const above = await b.handle(request('delete', { path: at('user/.npm') }));
    expect(above.decision.reason).toBe(`${at('user/.npm')} holds ${at('user/.npm/_npx')}, kept out of the cache roots (npx runs the packages it installed there as they are); it would be taken along`);
    // Elsewhere outside the roots, the configured question stands.
    expect((await b.handle(open(at('outside/x')))).decision).toMatchObject({ verdict: 'prompt', source: 'file-safety:roots' });
  });

  it('lets a new folder be made above a kept-out one, not a symlink there, nor the folder moved or removed', async () => {
    const b = broker();
    const pnpm = at('user/.cache/pnpm');
    expect((await b.handle(request('mkdir', { path: pnpm }))).decision.verdict).toBe('sandbox');
    mkdirSync(pnpm);
    expect((await b.handle(request('link', { to: at('user/.cache/other'), symbolic: true }))).decision.verdict).toBe('sandbox');
    for (const [operation, paths] of [
      ['rename', { from: pnpm, to: at('user/.cache/moved') }],
      ['rename', { from: at('user/.cache/other'), to: pnpm }],
      ['delete', { path: pnpm }],
    ] as const) {
      expect((await b.handle(request(operation, paths))).decision, `${operation} ${JSON.stringify(paths)}`).toMatchObject({ verdict: 'deny' });
    }
  });

  it('still asks where a mandatory protection says so: a git hook inside a cache root', async () => {
    write('user/.cache/tool/repo/.git/HEAD', 'ref: refs/heads/main\n');
    mkdirSync(at('user/.cache/tool/repo/.git/hooks'));
    const outcome = await broker().handle(open(at('user/.cache/tool/repo/.git/hooks/post-checkout')));
    expect(outcome.decision).toMatchObject({ verdict: 'prompt', source: 'file-safety:mandatory:git-hooks-config' });
  });

  it('still denies what a configured rule denies, and asks what it asks, inside a cache root', async () => {
    for (const dir of ['user/.cache/ask', 'user/.cache/other']) mkdirSync(at(dir));
    const b = broker({
      rules: [
        { pattern: '~/.npm/_cacache/secret', decision: 'deny' },
        { pattern: '~/.cache/ask/**', decision: 'prompt', access: ['write'] },
      ],
    });
    expect((await b.handle(open(at('user/.npm/_cacache/secret')))).decision).toMatchObject({ verdict: 'deny', source: 'file-safety:rules[0]' });
    expect((await b.handle(open(at('user/.cache/ask/x')))).decision).toMatchObject({ verdict: 'prompt', source: 'file-safety:rules[1]' });
    expect((await b.handle(open(at('user/.cache/other/x')))).decision).toMatchObject({ verdict: 'sandbox', source: PLUGIN_NAME });
  });

  it("never makes the broker's own store writable, even inside a cache root", async () => {
    const inCache = at('user/.cache/brokered-shell');
    const b = closeLater(new Broker({ sessionId: 's1' })).use(...standardPlugins({ home: inCache, writableRoots: [ws], userHome: user, cacheRoots: { env: env() } }));
    expect((await b.handle(open(`${inCache}/workspace/x`))).decision).toMatchObject({ verdict: 'deny', source: 'file-safety:mandatory:broker-files' });
  });

  it('outside the roots, the denial names the settings that would allow it', async () => {
    const outcome = await broker().handle(open(at('outside/x')));
    expect(outcome.decision).toMatchObject({ verdict: 'deny', source: 'file-safety:roots' });
    expect(outcome.decision.reason).toBe(`${at('outside/x')} is outside the writable roots; writableRoots, or cacheRoots.add for a tool's cache, in <home>/config.json would allow it`);
    expect(outcome.error?.code).toBe(ErrorCodes.POLICY_DENIED);
  });

  it('has no opinion on reads, nor without any root', async () => {
    const plugin = new CacheRootsPlugin({ home: user, env: env() });
    const target = { role: 'path' as const, path: at('user/.npm/x'), access: 'read' as const, lexical: at('user/.npm/x'), resolved: at('user/.npm/x'), ruleForm: '~/.npm/x', kind: 'absent' as const };
    expect(plugin.decide(target, { operation: 'open', options: {} })).toBeUndefined();
    expect(plugin.decide({ ...target, access: 'write' }, { operation: 'open', options: {} })).toMatchObject({ verdict: 'sandbox' });
    const none = new CacheRootsPlugin({ home: user, env: env(), defaults: false });
    expect(none.decide({ ...target, access: 'write' }, { operation: 'open', options: {} })).toBeUndefined();
  });
});

describe('backups', () => {
  it('records nothing of a cache root: neither backups nor created paths, and counts what changed', async () => {
    const b = broker();
    const old = write('user/.npm/_cacache/index/old', 'old\n');
    for (const input of [open(old), open(at('user/.npm/_cacache/index/new')), request('delete', { path: old }), request('mkdir', { path: at('user/.cache/tool') })]) {
      expect(await b.handle(input)).toMatchObject({ ok: true, decision: { verdict: 'sandbox' } });
    }
    const file = write('ws/a.txt', 'A\n');
    expect(await b.handle(open(file))).toMatchObject({ ok: true });
    const { answer, recorded } = await commit(b);
    // The workspace's file only.
    expect(recorded).toEqual([file]);
    expect(answer).toMatchObject({ files: 1, exempted: { [PLUGIN_NAME]: 3 } });
  });

  it('records the workspace side of a move between a cache root and the workspace', async () => {
    const b = broker();
    const tarball = write('user/.npm/_cacache/content/pkg.tgz', 'package\n');
    write('user/.npm/_cacache/tree/lib/index.js', 'module.exports = 1;\n');
    const kept = write('ws/kept.txt', 'mine\n');
    expect(await b.handle(request('rename', { from: tarball, to: at('ws/pkg.tgz') }))).toMatchObject({ ok: true });
    expect(await b.handle(request('rename', { from: at('user/.npm/_cacache/tree'), to: at('ws/tree') }))).toMatchObject({ ok: true });
    expect(await b.handle(request('rename', { from: kept, to: at('user/.npm/_cacache/kept.txt') }))).toMatchObject({ ok: true });
    const { recorded, manifest } = await commit(b);
    expect(recorded.filter((p) => p.includes('/user/'))).toEqual([]);
    expect(recorded).toEqual(expect.arrayContaining([kept, `absent ${at('ws/pkg.tgz')}`, `absent ${at('ws/tree')}`, `absent ${at('ws/tree/lib')}`, `absent ${at('ws/tree/lib/index.js')}`]));
    // The file that left the workspace comes back on a restore, from its backup.
    expect(manifest.files.find((f) => f.path === kept)?.sha256).toBeTruthy();
  });

  it('a write through a workspace symlink into a cache root is a cache write; the link itself is the workspace', async () => {
    const b = broker();
    symlinkSync(at('user/.npm/_cacache'), at('ws/cache-link'));
    const through = await b.handle(open(at('ws/cache-link/entry')));
    expect(through).toMatchObject({ ok: true, decision: { verdict: 'sandbox', source: PLUGIN_NAME } });
    expect(through.targets[0]?.resolved).toBe(at('user/.npm/_cacache/entry'));
    expect(await b.handle(request('delete', { path: at('ws/cache-link') }))).toMatchObject({ ok: true, decision: { verdict: 'sandbox', source: 'file-safety:roots' } });
    const { recorded, answer } = await commit(b);
    expect(recorded).toContain(at('ws/cache-link'));
    expect(recorded.filter((p) => p.includes('/user/'))).toEqual([]);
    expect(answer.exempted).toEqual({ [PLUGIN_NAME]: 1 });
  });

  it('lets a cache file be hard-linked into the workspace (pnpm, bun), recording the new name only', async () => {
    const b = broker();
    const stored = write('user/.cache/pnpm-like/files/ab/cdef', 'export {};\n');
    mkdirSync(at('ws/node_modules/pkg'), { recursive: true });
    const outcome = await b.handle(request('link', { from: stored, to: at('ws/node_modules/pkg/index.js') }));
    expect(outcome).toMatchObject({ ok: true, decision: { verdict: 'sandbox' } });
    linkSync(stored, at('ws/node_modules/pkg/index.js'));
    // A later write in place through either name changes both: refused, as for any shared inode.
    expect((await b.handle(open(stored))).decision).toMatchObject({ verdict: 'deny', source: 'file-safety:mandatory' });
    const { recorded } = await commit(b);
    // The new name and its folder's times: the workspace side.
    expect(recorded).toEqual([`absent ${at('ws/node_modules/pkg/index.js')}`, `directory ${at('ws/node_modules/pkg')}`]);
    expect(readFileSync(stored, 'utf8')).toBe('export {};\n');
  });

  it('with no cache roots, the same writes are denied and nothing is exempted', async () => {
    const b = broker({ cacheRoots: { defaults: false } });
    expect((await b.handle(open(at('user/.npm/_cacache/x')))).decision).toMatchObject({ verdict: 'deny', source: 'file-safety:roots' });
    expect(await b.handle(open(write('ws/a.txt')))).toMatchObject({ ok: true });
    expect((await commit(b)).answer.exempted).toEqual({});
  });
});
