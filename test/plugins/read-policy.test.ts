/**
 * ReadPolicyPlugin on a bare broker (real path resolution over real files in a fake
 * home): which requests it refuses, and what it tells the launcher a command may not read.
 */
import { linkSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Broker, ErrorCodes, PolicyStage, type BrokerRequestInput, type RequestOptions } from '../../src/core/index.js';
import { FileSafetyPlugin } from '../../src/plugins/file-safety/index.js';
import { PathResolutionPlugin } from '../../src/plugins/path-resolution/index.js';
import {
  PLUGIN_NAME,
  ReadPolicyPlugin,
  SECRET_DEFAULT_NAMES,
  compileReadPolicy,
  mountAliases,
  namedUnreadable,
  readPolicyOptionsSchema,
  unreadableNow,
  type ReadPolicyOptions,
} from '../../src/plugins/read-policy/index.js';
import { operationTargets, openTargets } from '../../src/requests/targets.js';
import { leaseAllows } from '../../src/plugins/lease/evaluate.js';
import { emptyLease, type LeasedOp } from '../../src/plugins/lease/schema.js';
import { readPolicyLease } from '../../src/plugins/read-policy/lease.js';
import { fixedPolicy } from '../helpers/bare-broker.js';
import { closeLater, closeOpened } from '../helpers/close-opened.js';
import { tempDir } from '../helpers/serve-process.js';

let base: string;
let home: string;
let ws: string;
let store: string;
const at = (relative: string) => path.join(base, relative);

function write(relative: string, content = 'x\n'): string {
  const file = at(relative);
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, content);
  return file;
}

beforeEach(() => {
  base = tempDir('bsh-read-policy-');
  home = at('home');
  ws = at('ws');
  store = at('store');
  for (const dir of ['home', 'ws', 'store']) mkdirSync(at(dir));
  write('home/.ssh/id_ed25519', 'PRIVATE\n');
  write('home/.ssh/id_ed25519.pub', 'ssh-ed25519 AAAA\n');
  write('home/.ssh/known_hosts', 'host key\n');
  write('home/.ssh/config', 'Host x\n');
  write('home/.aws/credentials', '[default]\n');
  write('home/.profile', 'profile\n');
  write('ws/.env', 'TOKEN=1\n');
  write('ws/src/app.ts', 'code\n');
});
afterEach(closeOpened);

const options = (more: Partial<ReadPolicyOptions> = {}): ReadPolicyOptions => ({ store, home, roots: [ws], env: {}, ...more });
const envRule = { pattern: '.env', access: ['read' as const], decision: 'deny' as const };

function broker(more: Partial<ReadPolicyOptions> = {}): Broker {
  return closeLater(new Broker({ sessionId: 's1' })).use(
    new PathResolutionPlugin({ home }),
    new ReadPolicyPlugin(options(more)),
    fixedPolicy(() => ({ verdict: 'sandbox', source: 'test' }), PolicyStage.DEFAULTS),
  );
}

const request = (over: Partial<BrokerRequestInput> & Pick<BrokerRequestInput, 'operation' | 'targets'>, opts: RequestOptions = {}): BrokerRequestInput => ({
  origin: 'kernel',
  action: 'check',
  sessionId: 's1',
  options: opts,
  ...over,
});

async function decisionOf(b: Broker, input: BrokerRequestInput): Promise<{ verdict: string | undefined; source: string | undefined; reason: string | undefined }> {
  const outcome = await b.handle(input);
  return { verdict: outcome.decision?.verdict, source: outcome.decision?.source, reason: outcome.decision?.reason };
}

const O_WRONLY = 1;
const O_RDWR = 2;

describe('requests that would read, hand over or move what may not be read', () => {
  it.each([
    ['a text-token .read of a private key', () => request({ origin: 'text-token', action: 'token', operation: 'open', targets: openTargets(at('home/.ssh/id_ed25519'), false) }), 'read-policy:secrets.ssh'],
    ['a text-token .read-write of a private key', () => request({ origin: 'text-token', action: 'token', operation: 'open', targets: openTargets(at('home/.ssh/id_ed25519'), true) }), 'read-policy:secrets.ssh'],
    ['a kernel O_RDWR open of a read-denied rule', () => request({ operation: 'open', targets: openTargets(at('ws/.env'), true) }, { openFlags: O_RDWR }), 'read-policy:rules[0]'],
    ['a host copy from the AWS credentials', () => request({ origin: 'host-op', action: 'host-op', operation: 'copy', targets: operationTargets('copy', { from: at('home/.aws/credentials'), to: at('ws/c') }) }), 'read-policy:secrets.aws'],
    ['a hard link of .env', () => request({ operation: 'link', targets: operationTargets('link', { from: at('ws/.env'), to: at('ws/src/e') }) }), 'read-policy:rules[0]'],
    ['a rename of .env', () => request({ operation: 'rename', targets: operationTargets('rename', { from: at('ws/.env'), to: at('ws/src/e') }) }), 'read-policy:rules[0]'],
    ['a rename of the folder holding .env', () => request({ operation: 'rename', targets: operationTargets('rename', { from: ws, to: at('ws2') }) }), 'read-policy:rules[0]'],
    ['a recursive copy of the folder holding .env', () => request({ origin: 'host-op', action: 'host-op', operation: 'copy', targets: operationTargets('copy', { from: ws, to: at('copy') }) }, { recursive: true }), 'read-policy:rules[0]'],
    ['a delete to the trash of .env', () => request({ origin: 'host-op', action: 'host-op', operation: 'delete', targets: operationTargets('delete', { path: at('ws/.env') }) }), 'read-policy:rules[0]'],
    ['a copy from the store', () => request({ origin: 'host-op', action: 'host-op', operation: 'copy', targets: operationTargets('copy', { from: store, to: at('ws/s') }) }, { recursive: true }), 'read-policy:store'],
  ])('%s: denied at the protected stage', async (_label, make, source) => {
    const decision = await decisionOf(broker({ rules: [envRule] }), make());
    expect(decision).toMatchObject({ verdict: 'deny', source });
    expect(decision.reason).toMatch(/may not be read/);
  });

  it.each([
    ['a write-only kernel open (echo >> .env)', () => request({ operation: 'open', targets: openTargets(at('ws/.env'), true) }, { openFlags: O_WRONLY | 0o2000 })],
    ['an unlink of .env by the supervisor', () => request({ operation: 'delete', targets: operationTargets('delete', { path: at('ws/.env') }) })],
    ['a host delete that unlinks', () => request({ origin: 'host-op', action: 'host-op', operation: 'delete', targets: operationTargets('delete', { path: at('ws/.env') }) }, { deleteMode: 'unlink' })],
    ['a chmod of a private key', () => request({ operation: 'chmod', targets: operationTargets('chmod', { path: at('home/.ssh/id_ed25519') }) }, { mode: 0o600 })],
    ['a rename onto .env (it is replaced, not read)', () => request({ operation: 'rename', targets: operationTargets('rename', { from: at('ws/src/app.ts'), to: at('ws/.env') }) })],
    ['a read of known_hosts, which ssh needs', () => request({ origin: 'text-token', action: 'token', operation: 'open', targets: openTargets(at('home/.ssh/known_hosts'), false) })],
    ['a read of a public key', () => request({ origin: 'text-token', action: 'token', operation: 'open', targets: openTargets(at('home/.ssh/id_ed25519.pub'), false) })],
    ['a read of ~/.profile', () => request({ origin: 'text-token', action: 'token', operation: 'open', targets: openTargets(at('home/.profile'), false) })],
    ['a recursive copy of a folder holding nothing denied', () => request({ origin: 'host-op', action: 'host-op', operation: 'copy', targets: operationTargets('copy', { from: at('ws/src'), to: at('copy') }) }, { recursive: true })],
  ])('%s: no opinion (the later stages decide)', async (_label, make) => {
    expect(await decisionOf(broker({ rules: [envRule] }), make())).toMatchObject({ verdict: 'sandbox', source: 'test' });
  });

  it('judges where a symlink leads: a .read of a link in the workspace to a key is a read of the key', async () => {
    symlinkSync(at('home/.ssh/id_ed25519'), at('ws/key'));
    const decision = await decisionOf(broker(), request({ origin: 'text-token', action: 'token', operation: 'open', targets: openTargets(at('ws/key'), false) }));
    expect(decision).toMatchObject({ verdict: 'deny', source: 'read-policy:secrets.ssh' });
    expect(decision.reason).toContain(at('home/.ssh/id_ed25519'));
  });

  it('a read rule with a glob matches at any depth, for files made after the session started too', async () => {
    const b = broker({ rules: [{ pattern: '*.pem', access: ['read'], decision: 'deny' }] });
    write('ws/deep/er/new.pem');
    const copy = request({ origin: 'host-op', action: 'host-op', operation: 'copy', targets: operationTargets('copy', { from: at('ws/deep/er/new.pem'), to: at('ws/x') }) });
    expect(await decisionOf(b, copy)).toMatchObject({ verdict: 'deny', source: 'read-policy:rules[0]' });
  });

  it('with file-safety on the broker, a rule that denies the request\'s own access too refuses it itself; a read-only rule is refused here', async () => {
    const b = closeLater(new Broker({ sessionId: 's1' })).use(
      new ReadPolicyPlugin(options({ rules: [{ pattern: '.env', decision: 'deny' }, { pattern: '*.pem', access: ['read'], decision: 'deny' }] })),
      new PathResolutionPlugin({ home }),
      new FileSafetyPlugin({ writableRoots: [ws], home, rules: [{ pattern: '.env', decision: 'deny' }, { pattern: '*.pem', access: ['read'], decision: 'deny' }] }),
    );
    write('ws/k.pem');
    const trash = (file: string) => request({ origin: 'host-op', action: 'host-op', operation: 'delete', targets: operationTargets('delete', { path: at(file) }) });
    expect(await decisionOf(b, trash('ws/.env'))).toMatchObject({ verdict: 'deny', source: 'file-safety:rules[0]', reason: expect.stringMatching(/matches rule \.env/) });
    expect(await decisionOf(b, trash('ws/k.pem'))).toMatchObject({ verdict: 'deny', source: 'read-policy:rules[1]' });
  });

  it('a rule file-safety does not hold is refused here, whatever file-safety holds', async () => {
    const b = closeLater(new Broker({ sessionId: 's1' })).use(
      new PathResolutionPlugin({ home }),
      new ReadPolicyPlugin(options({ rules: [{ pattern: '.env', decision: 'deny' }] })),
      new FileSafetyPlugin({ writableRoots: [ws], home, rules: [] }),
    );
    const trash = request({ origin: 'host-op', action: 'host-op', operation: 'delete', targets: operationTargets('delete', { path: at('ws/.env') }) });
    expect(await decisionOf(b, trash)).toMatchObject({ verdict: 'deny', source: 'read-policy:rules[0]' });
  });

  it('a rule that only governs writes, or that prompts, takes no reads away', async () => {
    const b = broker({ rules: [{ pattern: '.env', access: ['write'], decision: 'deny' }, { pattern: '.env', decision: 'prompt' }] });
    const read = request({ origin: 'text-token', action: 'token', operation: 'open', targets: openTargets(at('ws/.env'), false) });
    expect(await decisionOf(b, read)).toMatchObject({ verdict: 'sandbox' });
  });
});

describe('the secret list', () => {
  it('names its defaults as the configuration removes them', () => {
    expect(SECRET_DEFAULT_NAMES).toEqual(['ssh', 'aws', 'gnupg', 'gcloud', 'azure', 'kube', 'docker', 'netrc', 'git-credentials', 'gh', 'npmrc', 'cargo', 'pypi', 'password-stores', 'browsers']);
  });

  it('remove by name leaves a default readable; remove by path inside one keeps that path readable; add denies more', () => {
    write('home/.ssh/work_config');
    write('home/notes/private.txt');
    const policy = compileReadPolicy(options({ secrets: { remove: ['aws', '~/.ssh/work_config'], add: ['~/notes'] } }));
    expect(policy.denialOf([at('home/.aws/credentials')])).toBeUndefined();
    expect(policy.denialOf([at('home/.ssh/work_config')])).toBeUndefined();
    expect(policy.denialOf([at('home/.ssh/id_ed25519')])?.source).toBe('read-policy:secrets.ssh');
    expect(policy.denialOf([at('home/notes/private.txt')])?.source).toBe('read-policy:secrets.add');
  });

  it('the store stays unreadable whatever the settings say', () => {
    const policy = compileReadPolicy(options({ store: at('home/.brokered-shell'), secrets: { defaults: false, remove: ['~/.brokered-shell', '~'] } }));
    expect(policy.denialOf([at('home/.brokered-shell/workspace/sessions/x')])?.source).toBe('read-policy:store');
    expect(policy.denialOf([at('home/.ssh/id_ed25519')])).toBeUndefined();
  });

  it("takes tools' own variables: DOCKER_CONFIG, KUBECONFIG, npm_config_userconfig in any case", () => {
    const policy = compileReadPolicy(options({ env: { DOCKER_CONFIG: at('dock'), KUBECONFIG: `${at('k1')}:${at('k2')}`, NPM_CONFIG_USERCONFIG: at('rc') } }));
    for (const file of ['dock/config.json', 'k1', 'k2', 'rc', 'home/.docker/config.json', 'home/.kube/config']) expect(policy.denialOf([at(file)]), file).toBeDefined();
    expect(policy.denialOf([at('home/.kube/cache/x')])).toBeUndefined();
  });

  it.each([
    [{ add: ['relative/path'] }, 'secrets.add.0', /absolute path or start with ~\//],
    [{ add: ['~'] }, 'secrets.add.0', /names \/ or the whole home/],
    [{ add: ['/a/../b'] }, 'secrets.add.0', /must not contain '\.\.'/],
    [{ remove: ['sshh'] }, 'secrets.remove.0', /name of a default/],
    [{ add: ['~/.x'], remove: ['~/.x'] }, 'secrets.remove.0', /in add too/],
  ])('refuses %j, naming %s', (secrets, key, message) => {
    const parsed = readPolicyOptionsSchema.safeParse({ store, secrets });
    expect(parsed.success).toBe(false);
    const issue = parsed.error?.issues[0];
    expect(issue?.path.join('.')).toBe(key);
    expect(issue?.message).toMatch(message);
  });

  it('a bad option fails the plugin with INVALID_OPTIONS', () => {
    expect(() => new ReadPolicyPlugin({ store: 'relative' })).toThrow(expect.objectContaining({ code: ErrorCodes.INVALID_OPTIONS }));
    expect(new ReadPolicyPlugin(options()).name).toBe(PLUGIN_NAME);
  });
});

describe('what the launcher is told when a command starts', () => {
  it('the present secrets as real paths; ssh keeps config, known_hosts and public keys readable', async () => {
    const paths = (await unreadableNow(compileReadPolicy(options({ rules: [envRule] })))).map((entry) => entry.path).sort();
    expect(paths).toEqual([at('home/.aws'), at('home/.ssh/id_ed25519'), store, at('ws/.env')].sort());
  });

  it('a glob rule is matched against the tree below its start: a matched folder whole, a matched symlink as its target', async () => {
    write('ws/a/b/key.pem');
    write('ws/keys.pem/inner');
    write('outside/real.txt');
    symlinkSync(at('outside/real.txt'), at('ws/a/link.pem'));
    const rules = [{ pattern: '*.pem', access: ['read' as const], decision: 'deny' as const }, { pattern: `${at('home')}/*.txt`, decision: 'deny' as const }];
    write('home/diary.txt');
    const paths = (await unreadableNow(compileReadPolicy(options({ rules, secrets: { defaults: false } })))).map((entry) => entry.path).sort();
    expect(paths).toEqual([store, at('ws/a/b/key.pem'), at('ws/keys.pem'), at('outside/real.txt'), at('home/diary.txt')].sort());
  });

  it('a glob walk past its limit refuses to start, naming the rule', async () => {
    for (let i = 0; i < 30; i += 1) write(`ws/many/f${i}`);
    const policy = compileReadPolicy(options({ rules: [{ pattern: '*.pem', access: ['read'], decision: 'deny' }] }));
    await expect(unreadableNow(policy, 10)).rejects.toMatchObject({ code: ErrorCodes.INVALID_OPTIONS, message: expect.stringMatching(/fileSafety\.rules\[0\] \(\*\.pem\).*more than/) });
  });

  it('says how many other hard links a denied file has (those names stay readable)', async () => {
    linkSync(at('ws/.env'), at('home/env-copy'));
    const entry = (await unreadableNow(compileReadPolicy(options({ rules: [envRule] })))).find((e) => e.path === at('ws/.env'));
    expect(entry?.otherLinks).toBe(1);
  });
});

describe('mount aliases', () => {
  const mountinfo = [
    '27 1 254:0 / / rw,relatime - ext4 /dev/vda rw',
    '40 27 254:0 /home /mnt/home\\040copy rw,relatime - ext4 /dev/vda rw',
    '41 27 254:0 /home/u/.ssh /srv/keys rw - ext4 /dev/vda rw',
    '42 27 0:30 / /tmp rw - tmpfs tmpfs rw',
  ].join('\n');

  it('finds the same file under another mount of its file system, and a mount of something inside it', async () => {
    expect(await mountAliases(['/home/u/.ssh'], mountinfo)).toEqual([
      { path: '/mnt/home copy/u/.ssh', of: '/home/u/.ssh' },
      { path: '/srv/keys', of: '/home/u/.ssh' },
    ]);
    expect(await mountAliases(['/tmp/x'], mountinfo)).toEqual([]);
  });
});

describe("run's hint", () => {
  it('names the unreadable path a command line spells', async () => {
    const unreadable = await unreadableNow(compileReadPolicy(options({ rules: [envRule] })));
    expect(namedUnreadable('cat ~/.ssh/id_ed25519', unreadable, home)?.path).toBe(at('home/.ssh/id_ed25519'));
    expect(namedUnreadable('python3 x.py ~/.aws/credentials', unreadable, home)?.path).toBe(at('home/.aws'));
    expect(namedUnreadable('grep TOKEN .env', unreadable, home)?.path).toBe(at('ws/.env'));
    expect(namedUnreadable('ls -la', unreadable, home)).toBeUndefined();
    // A longer name that starts the same is another file.
    expect(namedUnreadable('cat ~/.ssh/id_ed25519.pub a.env', unreadable, home)).toBeUndefined();
  });
});

describe('what the read policy adds to a lease', () => {
  it('every change at or below a denied path, to a folder above one, or that a read rule matches makes the round trip', async () => {
    const plugin = new ReadPolicyPlugin(options({ rules: [envRule] }));
    await plugin.prepareLaunch(at('scratch'));
    const lease = emptyLease();
    readPolicyLease(plugin.policy, plugin.lastUnreadable, lease);
    expect(lease.anchors).toEqual(expect.arrayContaining([path.join(home, '.ssh'), path.join(home, '.aws'), store, path.join(ws, '.env')]));
    expect(lease.holds).toEqual(expect.arrayContaining([home, ws, '/']));
    expect(lease.globs).toHaveLength(1);
    // The supervisor's evaluator: a change to a denied path or a new .env is not leased; an ordinary one is.
    const leased = { ...lease, roots: [ws, home], ops: ['create', 'unlink', 'rename'] as LeasedOp[], setIdRoundTrip: false };
    expect(leaseAllows(leased, { op: 'unlink', path: path.join(ws, '.env'), access: 'delete' })).toBe(false);
    expect(leaseAllows(leased, { op: 'create', path: path.join(ws, 'sub', '.env'), access: 'write' })).toBe(false);
    expect(leaseAllows(leased, { op: 'rename', path: path.join(home, '.ssh'), access: 'delete' })).toBe(false);
    expect(leaseAllows(leased, { op: 'rename', path: ws, access: 'delete' })).toBe(false);
    expect(leaseAllows(leased, { op: 'create', path: path.join(ws, 'src', 'new.ts'), access: 'write' })).toBe(true);
  });
});
