import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Broker } from '../../src/core/index.js';
import { ApprovalPlugin } from '../../src/plugins/approval/index.js';
import { AuditPlugin, getAuditHooks, type AuditRecord } from '../../src/plugins/audit.js';
import {
  NetworkPlugin,
  networkDefaults,
  parseNetworkRule,
  readResolvers,
  remoteRule,
  type ConnectionApprover,
  type ConnectionPrompt,
  type NetworkOptions,
} from '../../src/plugins/network/index.js';
import type { KernelConnectionRecord, KernelNetworkQuestion } from '../../src/sandbox/network-protocol.js';
import { compileNetworkTable } from '../../src/sandbox/network-table.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});
function tempDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bsh-network-'));
  dirs.push(dir);
  return dir;
}

describe('network.allow and network.deny entries', () => {
  it.each<[string, unknown]>([
    ['example.org', { kind: 'name', pattern: 'example.org', ports: [0, 65535] }],
    ['Example.ORG.:443', { kind: 'name', pattern: 'example.org', ports: [443, 443] }],
    ['*.example.org:8000-8100', { kind: 'name', pattern: '*.example.org', ports: [8000, 8100] }],
    ['127.0.0.1:8080', { kind: 'cidr', address: '127.0.0.1', prefix: 32, v4: true, ports: [8080, 8080] }],
    ['10.0.0.0/8', { kind: 'cidr', address: '10.0.0.0', prefix: 8, v4: true, ports: [0, 65535] }],
    ['::1', { kind: 'cidr', address: '::1', prefix: 128, v4: false }],
    ['[fd00::/8]:443', { kind: 'cidr', address: 'fd00::', prefix: 8, ports: [443, 443] }],
    ['[::1]:22', { kind: 'cidr', address: '::1', prefix: 128, ports: [22, 22] }],
  ])('%s reads as %j', (text, expected) => {
    expect(parseNetworkRule(text)).toMatchObject(expected as object);
  });

  it.each([
    ['', /empty/],
    [' example.org', /spaces/],
    ['example.org:99999', /0-65535/],
    ['example.org:10-5', /0-65535/],
    ['10.0.0.0/33', /prefix must be 0-32/],
    ['*.org', /every name below a top-level domain/],
    ['a.*.org', /a \* may only stand first/],
    ['exa mple.org', /not a host name/],
    ['fe80::1%eth0', /zone index/],
  ])('%j is refused', (text, message) => {
    const parsed = parseNetworkRule(text);
    expect('error' in parsed && parsed.error).toMatch(message);
  });
});

describe('the compiled table', () => {
  it('has the mode, each entry as the supervisor matches it, the guarded ranges and the resolvers', () => {
    const rule = (text: string) => {
      const parsed = parseNetworkRule(text);
      if ('error' in parsed) throw new Error(parsed.error);
      return parsed;
    };
    const lines = compileNetworkTable({
      mode: 'allowlist',
      allow: [rule('127.0.0.1:8080'), rule('*.example.org:443'), rule('[fd00::/8]:22')],
      deny: [rule('bad.example.org')],
      guarded: [rule('169.254.0.0/16')],
      resolved: [{ name: 'registry.example', address: '192.0.2.9', ports: [443, 443], ttl: 120 }],
      resolvers: [{ address: '10.0.0.53', port: 53 }],
    });
    expect(lines).toEqual([
      'mode allowlist',
      'allow 127.0.0.1/32 8080-8080',
      'allow-name *.example.org 443-443',
      'allow fd00::/8 22-22',
      'deny-name bad.example.org 0-65535',
      'guard 169.254.0.0/16 0-65535',
      'addr 192.0.2.9 443-443 120 registry.example',
      'resolver 10.0.0.53 53',
    ]);
  });
});

const question = (over: Partial<KernelNetworkQuestion> = {}): KernelNetworkQuestion => ({
  id: 0x80000001,
  kind: 'connect',
  protocol: 'tcp',
  address: '203.0.113.7',
  port: 443,
  pid: 100,
  tgid: 100,
  syscall: 'connect',
  ...over,
});

function setup(options: NetworkOptions = {}, extra: { approval?: 'inline' | 'after'; lookup?: (name: string) => Promise<string[]>; timeoutMs?: number } = {}) {
  const saved: Array<[string, string]> = [];
  const network = new NetworkPlugin(
    { resolvConf: '/nonexistent', ...options },
    { lookup: extra.lookup ?? (async () => []), save: async (rule, file) => void saved.push([rule, file]) },
  );
  const broker = new Broker({ sessionId: 's1' }).use(new ApprovalPlugin({ mode: extra.approval ?? 'inline', timeoutMs: extra.timeoutMs ?? 300_000 }), new AuditPlugin({ log: false }), network);
  const records: AuditRecord[] = [];
  getAuditHooks(broker).record.tap('test', (record) => void records.push(record));
  const pushed: Record<string, string[][]> = { a: [], b: [] };
  network.attach('a', (lines) => pushed.a?.push(lines));
  network.attach('b', (lines) => pushed.b?.push(lines));
  return { network, broker, records, pushed, saved };
}

describe('NetworkPlugin: what the table cannot decide', () => {
  it('is refused without an approver: EACCES, an audit record, and the entry that would allow it', async () => {
    const { network, records } = setup();
    expect(await network.question(question(), { toolCallId: 'a' })).toBe(13);
    expect(records).toEqual([
      expect.objectContaining({ operation: 'connect', verdict: 'deny', ok: false, decidedBy: 'network', error: expect.objectContaining({ code: 'BSH_NETWORK_REFUSED', errno: 'EACCES' }) }),
    ]);
    expect(network.takeRefused('a')).toEqual([expect.objectContaining({ rule: '203.0.113.7:443', reason: 'not in network.allow, and nobody could be asked' })]);
    expect(network.takeRefused('a')).toEqual([]);
  });

  it('once: allowed for that tool call only, whose supervisor gets a table naming it', async () => {
    const { network, pushed } = setup();
    const asked: ConnectionPrompt[] = [];
    network.setApprover((prompt) => {
      asked.push(prompt);
      return { scope: 'once' };
    });
    expect(await network.question(question(), { toolCallId: 'a' })).toBe(0);
    // No home config to save to: once or for the session.
    expect(asked.map((prompt) => [prompt.rule, prompt.choices.map((choice) => choice.scope), prompt.toolCallId])).toEqual([['203.0.113.7:443', ['once', 'session'], 'a']]);
    expect(pushed.a?.at(-1)).toContain('allow 203.0.113.7/32 443-443');
    expect(pushed.b).toEqual([]);
    expect(network.tableFor('b')).not.toContain('allow 203.0.113.7/32 443-443');
  });

  it('session: every running call and every later one; save: the home config too', async () => {
    const { network, pushed, saved } = setup({ saveTo: '/h/config.json' });
    network.setApprover(() => ({ scope: 'session' }));
    expect(await network.question(question(), { toolCallId: 'a' })).toBe(0);
    expect(pushed.b?.at(-1)).toContain('allow 203.0.113.7/32 443-443');
    expect(network.tableFor('later')).toContain('allow 203.0.113.7/32 443-443');
    network.setApprover(({ choices }) => choices.find((choice) => choice.scope === 'save'));
    expect(await network.question(question({ kind: 'dns', host: 'api.example.org', address: '10.0.0.53', port: 53 }), { toolCallId: 'a' })).toBe(0);
    expect(saved).toEqual([['api.example.org', '/h/config.json']]);
    expect(network.tableFor('later')).toContain('allow-name api.example.org 0-65535');
  });

  it('a save that cannot be written is no yes: refused, with why', async () => {
    const network = new NetworkPlugin({ resolvConf: '/nonexistent', saveTo: '/h/config.json' }, { save: async () => Promise.reject(new Error('read-only file system')) });
    new Broker({ sessionId: 's1' }).use(new ApprovalPlugin(), network);
    network.attach('a');
    network.setApprover(({ choices }) => choices.find((choice) => choice.scope === 'save'));
    expect(await network.question(question(), { toolCallId: 'a' })).toBe(13);
    expect(network.takeRefused('a')[0]?.reason).toBe('approved, but read-only file system');
    expect(network.tableFor('a')).not.toContain('allow 203.0.113.7/32 443-443');
  });

  it.each<[string, ConnectionApprover, string]>([
    ['a no', () => false, 'not approved'],
    ['a throw', () => {
      throw new Error('tty gone');
    }, 'the approver failed (tty gone)'],
    ['a choice not offered', () => ({ scope: 'save', file: '/x' }), 'not approved'],
  ])('%s refuses', async (_what, approver, reason) => {
    const { network } = setup();
    network.setApprover(approver);
    expect(await network.question(question(), { toolCallId: 'a' })).toBe(13);
    expect(network.takeRefused('a')[0]?.reason).toBe(`not in network.allow; ${reason}`);
  });

  it('no answer within the approval timeout refuses, and the question is told', async () => {
    const { network } = setup({}, { timeoutMs: 20 });
    let aborted = false;
    network.setApprover((prompt) => new Promise(() => prompt.signal.addEventListener('abort', () => (aborted = true))));
    expect(await network.question(question(), { toolCallId: 'a' })).toBe(13);
    expect(aborted).toBe(true);
  });

  it('under approvals "after" nothing is asked: refused', async () => {
    const { network } = setup({}, { approval: 'after' });
    let asked = false;
    network.setApprover(() => (asked = true));
    expect(await network.question(question(), { toolCallId: 'a' })).toBe(13);
    expect(asked).toBe(false);
  });

  it("an address an allowed name resolves to now is allowed without a question, and the tables carry it", async () => {
    const { network, pushed } = setup({ allow: ['registry.example:443'] }, { lookup: async (name) => (name === 'registry.example' ? ['203.0.113.7'] : []) });
    let asked = false;
    network.setApprover(() => (asked = true));
    expect(await network.question(question(), { toolCallId: 'a' })).toBe(0);
    expect(asked).toBe(false);
    expect(pushed.a?.at(-1)).toEqual(expect.arrayContaining([expect.stringMatching(/^addr 203\.0\.113\.7 443-443 \d+ registry\.example$/)]));
    // Another port of that address is still the policy's question.
    network.setApprover(() => false);
    expect(await network.question(question({ port: 22 }), { toolCallId: 'a' })).toBe(13);
  });

  it('a loopback answer for a name other than localhost is not taken (rebinding)', async () => {
    const { network } = setup({ allow: ['evil.example'] }, { lookup: async () => ['127.0.0.1'] });
    expect(await network.question(question({ address: '127.0.0.1', port: 5432 }), { toolCallId: 'a' })).toBe(13);
  });

  it('puts its questions in the approval queue: one at a time', async () => {
    const { network } = setup();
    let open = 0;
    let most = 0;
    network.setApprover(async () => {
      open += 1;
      most = Math.max(most, open);
      await new Promise((resolve) => setTimeout(resolve, 10));
      open -= 1;
      return false;
    });
    await Promise.all([network.question(question(), { toolCallId: 'a' }), network.question(question({ port: 80 }), { toolCallId: 'b' })]);
    expect(most).toBe(1);
  });
});

describe("NetworkPlugin: the supervisor's records", () => {
  const record = (over: Partial<KernelConnectionRecord> = {}): KernelConnectionRecord => ({ ...question(), errno: 0, count: 1, reason: 'network.allow names it', ...over });

  it('become audit records and the turn facts, counted per target', async () => {
    const { network, broker, records } = setup();
    const turn = await broker.beginTurn();
    network.record(record(), { toolCallId: 'a' });
    network.record(record({ count: 4 }), { toolCallId: 'a' });
    network.record(record({ errno: 13, port: 25, reason: 'not in network.allow' }), { toolCallId: 'a' });
    expect(records.map((r) => [r.verdict, r.connection?.port, r.connection?.count])).toEqual([
      ['allow', 443, 1],
      ['allow', 443, 4],
      ['deny', 25, 1],
    ]);
    expect(turn.facts.connections).toEqual([
      expect.objectContaining({ kind: 'connect', address: '203.0.113.7', port: 443, verdict: 'allow', count: 5, toolCallId: 'a' }),
      expect.objectContaining({ port: 25, verdict: 'deny', count: 1 }),
    ]);
    expect(network.takeRefused('a').map((r) => r.rule)).toEqual(['203.0.113.7:25']);
    const committed = await broker.commitTurn('m');
    expect(committed.facts.connections).toHaveLength(2);
    await broker.beginTurn();
    expect(broker.currentTurn?.facts.connections).toBeUndefined();
  });
});

describe('the defaults', () => {
  function place(files: Record<string, string>, env: NodeJS.ProcessEnv = {}) {
    const root = tempDir();
    for (const [name, text] of Object.entries(files)) {
      fs.mkdirSync(path.dirname(path.join(root, name)), { recursive: true });
      fs.writeFileSync(path.join(root, name), text, { mode: name.startsWith('bin/') ? 0o755 : 0o644 });
    }
    return { root, place: { env: { PATH: path.join(root, 'bin'), ...env }, userHome: path.join(root, 'home'), workspace: path.join(root, 'ws') } };
  }

  it("npm's registry as the user set it (env before ~/.npmrc), not the project's .npmrc; npm's own default otherwise", () => {
    const { place: p } = place({ 'bin/npm': '', 'home/.npmrc': 'registry = https://npm.corp.example:8443/\n', 'ws/.npmrc': 'registry=https://evil.example/\n', 'ws/.keep': '' });
    expect(networkDefaults(p).map((d) => d.rule)).toEqual(['npm.corp.example:8443']);
    expect(networkDefaults({ ...p, env: { ...p.env, npm_config_registry: 'http://mirror.example/' } }).map((d) => d.rule)).toEqual(['mirror.example:80']);
    const { place: bare } = place({ 'bin/npm': '' });
    expect(networkDefaults(bare)).toEqual([{ rule: 'registry.npmjs.org:443', from: "npm's default registry" }]);
  });

  it("pip's index from its config, PyPI otherwise; only where pip is", () => {
    const { place: p } = place({ 'bin/pip3': '', 'home/.config/pip/pip.conf': '[global]\nindex-url = https://pypi.corp.example/simple\n' });
    expect(networkDefaults(p).map((d) => d.rule)).toEqual(['pypi.corp.example:443']);
    const { place: none } = place({ 'home/.config/pip/pip.conf': '[global]\nindex-url = https://pypi.corp.example/simple\n' });
    expect(networkDefaults(none)).toEqual([]);
    const { place: bare } = place({ 'bin/pip': '' });
    expect(networkDefaults(bare).map((d) => d.rule)).toEqual(['pypi.org:443', 'files.pythonhosted.org:443']);
  });

  it("go's proxy and checksum database, and cargo's registries where cargo's home is", () => {
    const { place: p } = place({ 'bin/go': '', 'home/.cargo/config.toml': '[source.corp]\nregistry = "sparse+https://crates.corp.example/index/"\n' }, { GOPROXY: 'https://goproxy.corp.example,direct', GOSUMDB: 'off' });
    expect(networkDefaults(p).map((d) => d.rule)).toEqual(['index.crates.io:443', 'static.crates.io:443', 'crates.io:443', 'crates.corp.example:443', 'goproxy.corp.example:443']);
  });

  it("the workspace repository's remotes, https and ssh (scp-like, insteadOf, ~/.ssh/config aliases)", () => {
    const { place: p } = place({
      'ws/.git/config': [
        '[remote "origin"]',
        '\turl = git@github-work:org/repo.git',
        '[remote "mirror"]',
        '\turl = https://git.example.org/org/repo.git',
        '\tpushurl = ssh://git@push.example.org:2222/org/repo.git',
        '[remote "short"]',
        '\turl = corp:team/repo',
        '[url "https://code.example.net/"]',
        '\tinsteadOf = corp:',
        '[remote "local"]',
        '\turl = /srv/repos/x.git',
        '',
      ].join('\n'),
      'home/.ssh/config': 'Host github-work\n  HostName github.com\n  Port 443\n',
    });
    expect(networkDefaults(p).map((d) => d.rule)).toEqual(['github.com:443', 'git.example.org:443', 'push.example.org:2222', 'code.example.net:443']);
    expect(remoteRule('user@host.example:path', new Map())).toBe('host.example:22');
  });
});

describe('resolvers', () => {
  it('are the nameserver lines, with a port where our own file gives one', () => {
    const file = path.join(tempDir(), 'resolv.conf');
    fs.writeFileSync(file, '# comment\nnameserver 10.0.0.53\nnameserver fe80::1%eth0\nnameserver 127.0.0.1:5353\nnameserver [::1]:5300\nsearch example\n');
    expect(readResolvers(file)).toEqual([
      { address: '10.0.0.53', port: 53 },
      { address: 'fe80::1', port: 53 },
      { address: '127.0.0.1', port: 5353 },
      { address: '::1', port: 5300 },
    ]);
    expect(readResolvers('/nonexistent')).toEqual([]);
  });
});
