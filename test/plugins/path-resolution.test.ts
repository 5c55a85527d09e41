import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  Broker,
  BrokerError,
  ErrorCodes,
  PolicyStage,
  type BrokerPlugin,
  type BrokerRequestInput,
  type Operation,
  type RequestOptions,
  type TargetRole,
} from '../../src/core/index.js';
import {
  PathResolutionPlugin,
  PLUGIN_NAME,
  STRATEGY_TABLE,
  normaliseForRuleMatch,
  resolveExisting,
  resolveExistingOrCreatable,
  resolveThroughParent,
  strategyFor,
  type ResolveStrategy,
} from '../../src/plugins/path-resolution/index.js';

/** Every target allowed, so a request completes and its resolved targets can be read. */
const allowAll: BrokerPlugin = {
  name: 'allow-all',
  apply(broker) {
    broker.hooks.evaluatePolicy.tap({ name: 'allow-all', stage: PolicyStage.DEFAULTS }, () => ({ verdict: 'sandbox' }));
  },
};

let base: string;
let ws: string;
let outside: string;

/** Absolute path inside the temp tree, kept as written (path.join would undo `..` lexically). */
const at = (relative: string) => (relative === '/' ? '/' : `${base}/${relative}`);

beforeAll(async () => {
  // The temp dir itself may sit behind links (os.tmpdir()): compare against its real path.
  base = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'bsh-resolve-')));
  ws = path.join(base, 'ws');
  outside = path.join(base, 'outside');
  await fs.mkdir(path.join(ws, 'dir'), { recursive: true });
  await fs.mkdir(path.join(outside, 'tdir'), { recursive: true });
  await fs.writeFile(path.join(ws, 'file.txt'), 'file');
  await fs.writeFile(path.join(ws, 'dir', 'inner.txt'), 'inner');
  await fs.writeFile(path.join(ws, '.!42!note.txt'), 'sed temp');
  await fs.writeFile(path.join(outside, 'target.txt'), 'target');
  await fs.symlink('../outside/target.txt', path.join(ws, 'link-file'));
  await fs.symlink(path.join(outside, 'tdir'), path.join(ws, 'link-dir'));
  await fs.symlink(path.join(outside, 'missing.txt'), path.join(ws, 'dangling'));
  await fs.symlink(path.join(base, 'nope', 'missing.txt'), path.join(ws, 'dangling-deep'));
  await fs.symlink('loop', path.join(ws, 'loop'));
  await fs.symlink('/proc/self/fd/0', path.join(ws, 'self-fd'));
});

afterAll(async () => {
  await fs.rm(base, { recursive: true, force: true });
});

function brokerWith(home = os.homedir()): Broker {
  return new Broker({ sessionId: 's1' }).use(new PathResolutionPlugin({ home }), allowAll);
}

function request(operation: Operation, targets: Array<[TargetRole, string]>, options: RequestOptions = {}): BrokerRequestInput {
  return {
    origin: 'api',
    action: 'check',
    operation,
    sessionId: 's1',
    options,
    targets: targets.map(([role, p]) => ({ role, path: p, access: operation === 'delete' ? 'delete' : 'write' })),
  };
}

describe('strategy table', () => {
  it.each<[Operation, TargetRole, boolean | undefined, ResolveStrategy]>([
    ['open', 'path', undefined, 'existing-or-creatable'],
    ['open', 'path', true, 'existing-or-creatable'],
    ['open', 'path', false, 'through-parent'],
    ['touch', 'path', undefined, 'existing-or-creatable'],
    ['touch', 'path', false, 'through-parent'],
    ['chmod', 'path', undefined, 'existing'],
    ['chmod', 'path', true, 'existing'],
    ['chmod', 'path', false, 'through-parent'],
    ['chown', 'path', undefined, 'existing'],
    ['xattr', 'path', undefined, 'existing'],
    ['truncate', 'path', undefined, 'existing'],
    ['truncate', 'path', false, 'through-parent'],
    ['link', 'from', undefined, 'existing'],
    ['link', 'from', false, 'through-parent'],
    ['link', 'to', undefined, 'through-parent'],
    ['link', 'to', true, 'existing-or-creatable'],
    ['delete', 'path', undefined, 'through-parent'],
    ['delete', 'path', true, 'existing'],
    ['mkdir', 'path', undefined, 'through-parent'],
    ['mkdir', 'path', true, 'existing-or-creatable'],
    ['mknod', 'path', undefined, 'through-parent'],
    ['rename', 'from', undefined, 'through-parent'],
    ['rename', 'from', true, 'existing'],
    ['rename', 'to', undefined, 'through-parent'],
    ['rename', 'to', true, 'existing-or-creatable'],
    ['copy', 'from', undefined, 'existing'],
    ['copy', 'from', false, 'through-parent'],
    ['copy', 'to', undefined, 'through-parent'],
  ])('%s %s (followSymlinks %s) → %s', (operation, role, follow, expected) => {
    expect(strategyFor(operation, role, follow)).toBe(expected);
  });

  it('lists every row it answers for, and nothing twice', () => {
    const keys = STRATEGY_TABLE.map((row) => `${row.operation}/${row.role}`);
    expect(new Set(keys).size).toBe(keys.length);
    for (const row of STRATEGY_TABLE) expect(strategyFor(row.operation, row.role)).toBe(row.strategy);
  });

  it.each<[Operation, TargetRole]>([
    ['open', 'from'],
    ['chmod', 'to'],
    ['rename', 'path'],
    ['copy', 'path'],
  ])('refuses a shape the table does not name: %s with a %s target', async (operation, role) => {
    expect(() => strategyFor(operation, role)).toThrow(BrokerError);
    const outcome = await brokerWith().handle(request(operation, [[role, path.join(base, 'ws/file.txt')]]));
    expect(outcome).toMatchObject({ ok: false, error: { code: ErrorCodes.PATH_UNRESOLVED, plugin: PLUGIN_NAME } });
  });
});

describe('mkdir -p resolves through the nearest existing ancestor', () => {
  it.each<[string, Expected]>([
    ['ws/a/b/c', { resolved: 'ws/a/b/c', kind: 'absent' }],
    ['ws/dir/new', { resolved: 'ws/dir/new', kind: 'absent' }],
    ['ws/dir', { resolved: 'ws/dir', kind: 'directory' }],
    // Links and `..` in the existing part are resolved as the kernel does.
    ['ws/link-dir/x/y', { resolved: 'outside/tdir/x/y', kind: 'absent' }],
    ['ws/link-dir/../made/z', { resolved: 'outside/made/z', kind: 'absent' }],
    ['ws/file.txt/x/y', { error: ErrorCodes.PATH_NOT_FOUND }],
  ])('%s', async (relative, expected) => {
    const outcome = await brokerWith().handle(request('mkdir', [['path', at(relative)]], { recursive: true }));
    if ('error' in expected) expect(outcome).toMatchObject({ ok: false, error: { code: expected.error } });
    else expect(outcome.targets[0]).toMatchObject({ resolved: at(expected.resolved), kind: expected.kind });
  });

  it('is chosen only for recursive mkdir', () => {
    expect(strategyFor('mkdir', 'path', undefined, true)).toBe('nearest-ancestor');
    expect(strategyFor('mkdir', 'path', undefined, false)).toBe('through-parent');
    expect(strategyFor('delete', 'path', undefined, true)).toBe('through-parent');
  });
});

type Expected = { resolved: string; kind: string } | { error: string };

/** One operation per strategy: chmod → existing, delete → through-parent, open → existing-or-creatable. */
describe.each<[Exclude<ResolveStrategy, 'nearest-ancestor'>, Operation]>([
  ['existing', 'chmod'],
  ['through-parent', 'delete'],
  ['existing-or-creatable', 'open'],
])('strategy %s (as %s) on real files', (strategy, operation) => {
  const table: Record<Exclude<ResolveStrategy, 'nearest-ancestor'>, Array<[string, Expected]>> = {
    existing: [
      ['ws/file.txt', { resolved: 'ws/file.txt', kind: 'file' }],
      ['ws/dir', { resolved: 'ws/dir', kind: 'directory' }],
      ['ws/link-file', { resolved: 'outside/target.txt', kind: 'file' }],
      ['ws/link-dir', { resolved: 'outside/tdir', kind: 'directory' }],
      ['ws/link-dir/../target.txt', { resolved: 'outside/target.txt', kind: 'file' }],
      ['ws/dir/./inner.txt', { resolved: 'ws/dir/inner.txt', kind: 'file' }],
      ['ws/dangling', { error: ErrorCodes.PATH_NOT_FOUND }],
      ['ws/missing.txt', { error: ErrorCodes.PATH_NOT_FOUND }],
      ['ws/no-dir/missing.txt', { error: ErrorCodes.PATH_NOT_FOUND }],
      ['ws/file.txt/x', { error: ErrorCodes.PATH_NOT_FOUND }],
      ['ws/loop', { error: ErrorCodes.PATH_UNRESOLVED }],
    ],
    'through-parent': [
      ['ws/file.txt', { resolved: 'ws/file.txt', kind: 'file' }],
      ['ws/link-file', { resolved: 'ws/link-file', kind: 'symlink' }],
      ['ws/link-dir', { resolved: 'ws/link-dir', kind: 'symlink' }],
      ['ws/dangling', { resolved: 'ws/dangling', kind: 'symlink' }],
      ['ws/loop', { resolved: 'ws/loop', kind: 'symlink' }],
      ['ws/new.txt', { resolved: 'ws/new.txt', kind: 'absent' }],
      ['ws/link-dir/new.txt', { resolved: 'outside/tdir/new.txt', kind: 'absent' }],
      // `..` climbs from where the link points, as the kernel does, not from its name.
      ['ws/link-dir/../target.txt', { resolved: 'outside/target.txt', kind: 'file' }],
      ['ws/link-dir/..', { resolved: 'outside', kind: 'directory' }],
      ['ws/dir/..', { resolved: 'ws', kind: 'directory' }],
      ['ws/dir/.', { resolved: 'ws/dir', kind: 'directory' }],
      // A trailing slash makes the kernel follow the final link.
      ['ws/link-dir/', { resolved: 'outside/tdir', kind: 'directory' }],
      ['/', { resolved: '/', kind: 'directory' }],
      ['ws/no-dir/new.txt', { error: ErrorCodes.PATH_NOT_FOUND }],
      ['ws/file.txt/x', { error: ErrorCodes.PATH_NOT_FOUND }],
    ],
    'existing-or-creatable': [
      ['ws/file.txt', { resolved: 'ws/file.txt', kind: 'file' }],
      ['ws/link-file', { resolved: 'outside/target.txt', kind: 'file' }],
      ['ws/link-dir', { resolved: 'outside/tdir', kind: 'directory' }],
      ['ws/new.txt', { resolved: 'ws/new.txt', kind: 'absent' }],
      ['ws/link-dir/new.txt', { resolved: 'outside/tdir/new.txt', kind: 'absent' }],
      // Creating through a dangling link makes the file where it points: policy sees that.
      ['ws/dangling', { resolved: 'outside/missing.txt', kind: 'absent' }],
      ['ws/dangling-deep', { error: ErrorCodes.PATH_NOT_FOUND }],
      ['ws/no-dir/new.txt', { error: ErrorCodes.PATH_NOT_FOUND }],
      ['ws/loop', { error: ErrorCodes.PATH_UNRESOLVED }],
    ],
  };

  it.each(table[strategy])('%s → %o', async (relative, expected) => {
    const outcome = await brokerWith().handle(request(operation, [['path', at(relative)]]));
    if ('error' in expected) {
      expect(outcome.ok).toBe(false);
      expect(outcome.decision.verdict).toBe('deny');
      expect(outcome.error?.code).toBe(expected.error);
      return;
    }
    expect(outcome.error).toBeUndefined();
    expect(outcome.targets[0]).toMatchObject({ resolved: at(expected.resolved), kind: expected.kind });
  });
});

describe('resolution functions', () => {
  it.each([
    ['resolveExisting', resolveExisting, 'ws/link-file', 'outside/target.txt'],
    ['resolveThroughParent', resolveThroughParent, 'ws/link-file', 'ws/link-file'],
    ['resolveExistingOrCreatable', resolveExistingOrCreatable, 'ws/link-dir/fresh', 'outside/tdir/fresh'],
  ] as const)('%s(%s)', async (_name, resolve, input, expected) => {
    await expect(resolve(at(input))).resolves.toBe(at(expected));
  });

  it('reports a missing path as PATH_NOT_FOUND with errno ENOENT', async () => {
    await expect(resolveExisting(at('ws/missing.txt'))).rejects.toMatchObject({ code: ErrorCodes.PATH_NOT_FOUND, errno: 'ENOENT' });
    const outcome = await brokerWith().handle(request('chmod', [['path', at('ws/missing.txt')]]));
    expect(outcome.error).toMatchObject({ code: ErrorCodes.PATH_NOT_FOUND, errno: 'ENOENT' });
  });
});

describe('what is there now (kind and link count, from the walk itself)', () => {
  it.each<[Operation, string, { resolved: string; kind: string; links?: number }]>([
    // Each strategy ends its walk differently: on the followed file, on the parent plus a
    // name looked at again, or after a final `..` where nothing was looked at yet.
    ['chmod', 'ws/multi/a.txt', { resolved: 'ws/multi/a.txt', kind: 'file', links: 2 }],
    ['open', 'ws/multi/b.txt', { resolved: 'ws/multi/b.txt', kind: 'file', links: 2 }],
    ['delete', 'ws/multi/a.txt', { resolved: 'ws/multi/a.txt', kind: 'file', links: 2 }],
    ['open', 'ws/multi-link', { resolved: 'ws/multi/a.txt', kind: 'file', links: 2 }],
    ['chmod', 'ws/multi/..', { resolved: 'ws', kind: 'directory' }],
    ['open', 'ws/multi/../file.txt', { resolved: 'ws/file.txt', kind: 'file', links: 1 }],
  ])('%s %s → %o', async (operation, input, expected) => {
    await fs.mkdir(path.join(ws, 'multi'), { recursive: true });
    await fs.writeFile(path.join(ws, 'multi', 'a.txt'), 'two names');
    await fs.rm(path.join(ws, 'multi', 'b.txt'), { force: true });
    await fs.link(path.join(ws, 'multi', 'a.txt'), path.join(ws, 'multi', 'b.txt'));
    await fs.rm(path.join(ws, 'multi-link'), { force: true });
    await fs.symlink('multi/a.txt', path.join(ws, 'multi-link'));
    const outcome = await brokerWith().handle(request(operation, [['path', at(input)]]));
    expect(outcome.targets[0]).toMatchObject({ ...expected, resolved: at(expected.resolved) });
    if (expected.links === undefined) expect(outcome.targets[0]?.links).toBeUndefined();
  });
});

describe('followSymlinks overrides the table', () => {
  it.each<[Operation, boolean, string, string, string]>([
    ['open', false, 'ws/link-file', 'ws/link-file', 'symlink'],
    ['chmod', false, 'ws/link-file', 'ws/link-file', 'symlink'],
    ['delete', true, 'ws/link-file', 'outside/target.txt', 'file'],
    ['mkdir', true, 'ws/link-dir', 'outside/tdir', 'directory'],
  ])('%s with followSymlinks %s on %s → %s', async (operation, follow, input, resolved, kind) => {
    const outcome = await brokerWith().handle(request(operation, [['path', at(input)]], { followSymlinks: follow }));
    expect(outcome.targets[0]).toMatchObject({ resolved: at(resolved), kind });
  });
});

describe('two-target operations', () => {
  it.each<[Operation, string, string, string, string]>([
    // rename acts on the link itself at both ends.
    ['rename', 'ws/link-file', 'ws/link-dir', 'ws/link-file', 'ws/link-dir'],
    // copy reads through the source link; a hard link shares the real file.
    ['copy', 'ws/link-file', 'ws/copy.txt', 'outside/target.txt', 'ws/copy.txt'],
    ['link', 'ws/link-file', 'ws/hard.txt', 'outside/target.txt', 'ws/hard.txt'],
  ])('%s %s → %s', async (operation, from, to, resolvedFrom, resolvedTo) => {
    const outcome = await brokerWith().handle(request(operation, [['from', at(from)], ['to', at(to)]]));
    expect(outcome.targets.map((t) => [t.role, t.resolved])).toEqual([
      ['from', at(resolvedFrom)],
      ['to', at(resolvedTo)],
    ]);
  });
});

describe('lexical form', () => {
  it.each([
    ['ws//dir///inner.txt', 'ws/dir/inner.txt'],
    ['ws/dir/../link-file', 'ws/link-file'],
    ['ws/./dir/', 'ws/dir'],
  ])('%s → %s, without following links', async (input, lexical) => {
    const outcome = await brokerWith().handle(request('delete', [['path', `${base}/${input}`]]));
    expect(outcome.targets[0]?.lexical).toBe(at(lexical));
  });
});

describe('rule-matching form', () => {
  const home = '/home/alice';
  it.each([
    ['/projects/demo/a\\b.txt', '/projects/demo/a/b.txt'],
    ['\\projects\\dir\\file', '/projects/dir/file'],
    ['\\home\\alice\\.profile', '~/.profile'],
    ['/projects/demo/.!123!file.txt', '/projects/demo/file.txt'],
    ['/projects/demo/.!9!.!8!file.txt', '/projects/demo/file.txt'],
    ['/projects/demo/.!abc!file.txt', '/projects/demo/.!abc!file.txt'],
    ['/projects/demo/.!123!', '/projects/demo/.!123!'],
    ['/projects/demo/.!1!dir/file.txt', '/projects/demo/.!1!dir/file.txt'],
    ['/home/alice', '~'],
    ['/home/alice/.bashrc', '~/.bashrc'],
    ['/home/alice/.!77!.zshrc', '~/.zshrc'],
    ['/home/alice2/x', '/home/alice2/x'],
    ['/projects/demo/home/alice/x', '/projects/demo/home/alice/x'],
    ['/projects/demo/../etc', '/projects/demo/../etc'],
  ])('%s → %s', (input, expected) => {
    expect(normaliseForRuleMatch(input, { home })).toBe(expected);
    expect(normaliseForRuleMatch(input, { home: `${home}/` })).toBe(expected);
  });

  it('is idempotent', () => {
    const piece = fc.constantFrom('/', '\\', '.', '!', '1', '23', 'a', 'home', 'alice', 'alice2', '~', '.!5!');
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 12 }), fc.constantFrom('/home/alice', '/home/alice/', '/h', '/'), (parts, h) => {
        const once = normaliseForRuleMatch(parts.join(''), { home: h });
        expect(normaliseForRuleMatch(once, { home: h })).toBe(once);
      }),
    );
  });

  it('is filled in from the resolved path, with the configured home', async () => {
    const outcome = await brokerWith(ws).handle(request('open', [['path', at('ws/.!42!note.txt')]]));
    expect(outcome.targets[0]).toMatchObject({ resolved: at('ws/.!42!note.txt'), ruleForm: '~/note.txt', kind: 'file' });
  });
});

describe('/proc', () => {
  let child: ChildProcess | undefined;
  let pid: number;

  beforeAll(() => {
    // A client process of our own: its fd 0 is a real file, its fd 1 a pipe.
    const fd = openSync(path.join(outside, 'target.txt'), 'r');
    try {
      child = spawn('sleep', ['60'], { stdio: [fd, 'pipe', 'ignore'] });
    } finally {
      closeSync(fd);
    }
    pid = child.pid as number;
    expect(pid).toBeGreaterThan(0);
  });

  afterAll(() => {
    child?.kill('SIGKILL');
  });

  it.each<[Operation]>([['open'], ['chmod']])('%s of /proc/<pid>/fd/<n> resolves to the real file it has open', async (operation) => {
    const outcome = await brokerWith().handle(request(operation, [['path', `/proc/${pid}/fd/0`]]));
    expect(outcome.error).toBeUndefined();
    expect(outcome.targets[0]).toMatchObject({ resolved: at('outside/target.txt'), kind: 'file' });
  });

  it('refuses an fd that is a pipe (no path to judge)', async () => {
    const outcome = await brokerWith().handle(request('open', [['path', `/proc/${pid}/fd/1`]]));
    expect(outcome).toMatchObject({ ok: false, error: { code: ErrorCodes.PATH_NOT_FOUND } });
  });

  it.each([
    ['/proc/self/fd/0'],
    ['/proc/self'],
    ['/proc/thread-self/fd/0'],
    ['/proc/./self/cwd'],
    ['/proc/1/../self/fd/1'],
  ])('refuses %s: it would name the broker, not the client', async (input) => {
    for (const operation of ['open', 'chmod', 'delete'] as const) {
      const outcome = await brokerWith().handle(request(operation, [['path', input]]));
      expect(outcome).toMatchObject({ ok: false, error: { code: ErrorCodes.PATH_UNRESOLVED } });
    }
  });

  it('refuses a link that leads into /proc/self, and the broker process by its pid', async () => {
    for (const input of [at('ws/self-fd'), `/proc/${process.pid}/fd/0`, `/proc/${process.pid}/cwd`]) {
      const outcome = await brokerWith().handle(request('open', [['path', input]]));
      expect(outcome).toMatchObject({ ok: false, error: { code: ErrorCodes.PATH_UNRESOLVED } });
    }
  });
});

describe('options', () => {
  it.each([
    [{ home: 'relative/home' }, 'home'],
    [{ homedir: '/home/alice' }, 'homedir'],
  ])('rejects %o naming %s', (options, key) => {
    let error: unknown;
    try {
      new PathResolutionPlugin(options as ConstructorParameters<typeof PathResolutionPlugin>[0]);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(BrokerError);
    expect(error).toMatchObject({ code: ErrorCodes.INVALID_OPTIONS });
    expect((error as BrokerError).message).toContain(key);
  });
});
