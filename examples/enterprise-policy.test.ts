import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ApprovalPlugin, BackupHome, Broker, ErrorCodes, openTargets, operationTargets, standardPlugins, type FileSafetyRule } from 'brokered-shell';
import { CacheGrantPlugin, DenyPemPlugin, PackageJsonApprovalPlugin, enterprisePolicy } from './enterprise-policy/index.js';
import { closeLater, closeOpened } from '../test/helpers/close-opened.js';

let base: string;
let ws: string;
let userHome: string;
let cache: string;
let store: string;
beforeEach(() => {
  base = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'bsh-example-enterprise-')));
  ws = path.join(base, 'ws');
  userHome = path.join(base, 'user');
  cache = path.join(userHome, '.cache');
  store = path.join(base, 'store');
  mkdirSync(ws);
  mkdirSync(path.join(cache, 'tool'), { recursive: true });
});
afterEach(async () => {
  await closeOpened();
  rmSync(base, { recursive: true, force: true });
});

function broker(rules: FileSafetyRule[] = []) {
  return closeLater(new Broker({ sessionId: 's1' }))
    .use(...standardPlugins({ home: store, userHome, writableRoots: [ws], rules, trashEnv: { XDG_DATA_HOME: base, HOME: userHome } }))
    .use(...enterprisePolicy({ home: userHome }));
}

/** What the kernel supervisor asks before it opens a file for writing on the command's behalf. */
const kernelWrite = (p: string) => ({ origin: 'kernel' as const, action: 'check' as const, operation: 'open' as const, targets: openTargets(p, true), sessionId: 's1' });
const hostOp = (operation: 'delete' | 'copy', paths: { path?: string; from?: string; to?: string }, options: Record<string, unknown> = {}) => ({
  origin: 'host-op' as const,
  action: 'host-op' as const,
  operation,
  targets: operationTargets(operation, paths),
  sessionId: 's1',
  options,
});

describe('DenyPemPlugin', () => {
  it('refuses a key change and leaves the key as it was', async () => {
    const key = path.join(ws, 'server.pem');
    writeFileSync(key, 'secret');
    const outcome = await broker().handle(kernelWrite(key));
    expect(outcome).toMatchObject({ ok: false, decision: { verdict: 'deny', source: DenyPemPlugin.PLUGIN_NAME }, error: { code: ErrorCodes.POLICY_DENIED } });
    expect(readFileSync(key, 'utf8')).toBe('secret');
  });

  it('refuses removing a directory that holds a key, as a whole', async () => {
    mkdirSync(path.join(ws, 'certs', 'old'), { recursive: true });
    writeFileSync(path.join(ws, 'certs', 'old', 'ca.pem'), 'ca');
    const outcome = await broker().handle(hostOp('delete', { path: path.join(ws, 'certs') }, { recursive: true, deleteMode: 'unlink' }));
    expect(outcome).toMatchObject({ ok: false, decision: { verdict: 'deny', reason: expect.stringContaining('ca.pem') } });
    expect(readFileSync(path.join(ws, 'certs', 'old', 'ca.pem'), 'utf8')).toBe('ca');
  });

  it('wins over a built-in protection that only asks: a key among the git hooks is refused, not asked about', async () => {
    mkdirSync(path.join(ws, '.git', 'hooks'), { recursive: true });
    const key = path.join(ws, '.git', 'hooks', 'server.pem');
    expect(await broker().handle(kernelWrite(key))).toMatchObject({
      ok: false,
      decision: { verdict: 'deny', source: DenyPemPlugin.PLUGIN_NAME },
      error: { code: ErrorCodes.POLICY_DENIED },
    });
    expect(existsSync(key)).toBe(false);
    // A hook that is not a key is still the protection's question.
    expect(await broker().handle(kernelWrite(path.join(ws, '.git', 'hooks', 'pre-commit')))).toMatchObject({ decision: { verdict: 'prompt' } });
  });

  it('wins over the cache grant: a key under ~/.cache is refused too', async () => {
    expect(await broker().handle(kernelWrite(path.join(cache, 'tool', 'client.pem')))).toMatchObject({ ok: false, decision: { verdict: 'deny' } });
    expect(existsSync(path.join(cache, 'tool', 'client.pem'))).toBe(false);
  });
});

describe('PackageJsonApprovalPlugin', () => {
  it('asks before a project package.json changes, and changes nothing meanwhile', async () => {
    const manifest = path.join(ws, 'package.json');
    writeFileSync(manifest, '{}');
    const b = broker();
    expect(await b.handle(kernelWrite(manifest))).toMatchObject({ ok: false, decision: { verdict: 'prompt' }, error: { code: ErrorCodes.APPROVAL_REQUIRED } });
    expect(b.plugin<ApprovalPlugin>(ApprovalPlugin.PLUGIN_NAME)?.blocks()).toEqual([
      expect.objectContaining({ normalisedPath: manifest, access: 'write', reason: expect.stringContaining('need approval') }),
    ]);
    expect(readFileSync(manifest, 'utf8')).toBe('{}');
  });

  it('leaves node_modules and other files to the standard policy', async () => {
    mkdirSync(path.join(ws, 'node_modules', 'left-pad'), { recursive: true });
    const b = broker();
    expect(await b.handle(kernelWrite(path.join(ws, 'node_modules', 'left-pad', 'package.json')))).toMatchObject({ ok: true, wireDecision: 'sandbox' });
    expect(await b.handle(kernelWrite(path.join(ws, 'index.js')))).toMatchObject({ ok: true, wireDecision: 'sandbox' });
  });

  it('never loosens the standard policy: a package.json outside the roots stays denied, not asked about', async () => {
    mkdirSync(path.join(base, 'other'));
    const outcome = await broker().handle(kernelWrite(path.join(base, 'other', 'package.json')));
    expect(outcome).toMatchObject({ ok: false, decision: { verdict: 'deny', source: 'file-safety:roots' } });
  });
});

describe('CacheGrantPlugin (loosens, on purpose)', () => {
  it('grants writes under ~/.cache, outside the writable roots, and backs up what they replace', async () => {
    const b = broker();
    const data = path.join(cache, 'tool', 'data.txt');
    writeFileSync(data, 'old cache');
    writeFileSync(path.join(ws, 'fresh.txt'), 'new cache');
    const copied = await b.handle(hostOp('copy', { from: path.join(ws, 'fresh.txt'), to: data }));
    expect(copied).toMatchObject({ ok: true, decision: { verdict: 'grant-token', source: CacheGrantPlugin.PLUGIN_NAME } });
    expect(readFileSync(data, 'utf8')).toBe('new cache');
    expect(await b.handle(kernelWrite(path.join(cache, 'tool', 'new.bin')))).toMatchObject({ ok: true, wireDecision: 'grant-token' });
    const turn = await b.commitTurn('cache refresh');
    const found = await new BackupHome({ home: store }).findTurn(turn.id);
    expect(found.manifest.files.map((f) => f.path)).toEqual([data]);
    await found.store.restore(found.manifest, { force: true });
    expect(readFileSync(data, 'utf8')).toBe('old cache');
  });

  it('grants only what is under ~/.cache: not home itself, not a link pointing out', async () => {
    writeFileSync(path.join(base, 'outside.txt'), 'keep');
    symlinkSync(path.join(base, 'outside.txt'), path.join(cache, 'link'));
    const b = broker();
    expect(await b.handle(kernelWrite(path.join(userHome, 'notes.txt')))).toMatchObject({ ok: false, decision: { verdict: 'deny' } });
    expect(await b.handle(kernelWrite(path.join(cache, 'link')))).toMatchObject({ ok: false, decision: { verdict: 'deny' } });
    expect(readFileSync(path.join(base, 'outside.txt'), 'utf8')).toBe('keep');
  });

  it('never lifts a configured rule or a protection', async () => {
    mkdirSync(path.join(cache, 'secret'));
    const b = broker([{ pattern: '~/.cache/secret', decision: 'deny' }]);
    expect(await b.handle(kernelWrite(path.join(cache, 'secret', 'x')))).toMatchObject({ ok: false, decision: { verdict: 'deny', source: 'file-safety:rules[0]' } });
    // The broker's own store stays unwritable even if it lived under ~/.cache.
    const inCache = closeLater(new Broker({ sessionId: 's1' }))
      .use(...standardPlugins({ home: path.join(cache, 'brokered-shell'), userHome, writableRoots: [ws] }))
      .use(new CacheGrantPlugin({ home: userHome }));
    mkdirSync(path.join(cache, 'brokered-shell'));
    expect(await inCache.handle(kernelWrite(path.join(cache, 'brokered-shell', 'x')))).toMatchObject({
      ok: false,
      decision: { verdict: 'deny', source: 'file-safety:mandatory:broker-files' },
    });
  });

});

it('refuses invalid options, naming the key', () => {
  expect(() => new PackageJsonApprovalPlugin({ names: [] })).toThrow(/names/);
  expect(() => new CacheGrantPlugin({ directories: ['../etc'] })).toThrow(/directories\.0: must be relative to home/);
});
