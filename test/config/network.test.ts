import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { addNetworkAllow } from '../../src/config/network-save.js';
import { brokeredShellConfigSchema, loadConfig } from '../../src/config/index.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

function world(home: unknown, project?: unknown) {
  const base = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'bsh-config-network-')));
  dirs.push(base);
  const ws = path.join(base, 'ws');
  fs.mkdirSync(ws);
  fs.writeFileSync(path.join(base, 'config.json'), JSON.stringify(home));
  if (project !== undefined) fs.writeFileSync(path.join(ws, '.brokered-shell.json'), JSON.stringify(project));
  return { base, ws, load: () => loadConfig({ workspace: ws, home: base }) };
}

describe('network in the home config', () => {
  it('defaults to allowlist with nothing listed', () => {
    expect(brokeredShellConfigSchema.parse({}).network).toEqual({ mode: 'allowlist', allow: [], deny: [] });
  });

  it('refuses an entry that is not one, naming it and its index', () => {
    const parsed = brokeredShellConfigSchema.safeParse({ network: { allow: ['example.org', 'example.org:70000'], mode: 'closed' } });
    expect(parsed.success).toBe(false);
    const issues = parsed.error?.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`) ?? [];
    expect(issues).toEqual(expect.arrayContaining([expect.stringMatching(/^network\.allow\.1: .*0-65535/), expect.stringMatching(/^network\.mode: /)]));
  });
});

describe("a project's network settings only narrow", () => {
  it('adds deny entries and may turn the network off', async () => {
    const { load } = world({ network: { allow: ['registry.example:443'] } }, { network: { mode: 'off', deny: ['*.tracker.example'] } });
    expect((await load()).config.network).toEqual({ mode: 'off', allow: ['registry.example:443'], deny: ['*.tracker.example'] });
  });

  it('"allowlist" narrows an open home config, and does not open an "off" one', async () => {
    expect((await world({ network: { mode: 'open' } }, { network: { mode: 'allowlist' } }).load()).config.network.mode).toBe('allowlist');
    expect((await world({ network: { mode: 'off' } }, { network: { mode: 'allowlist' } }).load()).config.network.mode).toBe('off');
  });

  it.each<[string, unknown, RegExp]>([
    ['allow entries', { network: { allow: ['exfil.example'] } }, /network\.allow: refused: a repository may not open the network/],
    ['mode open', { network: { mode: 'open' } }, /network\.mode: refused: "open" would let commands reach more/],
  ])('refuses %s, naming the key and why', async (_what, project, message) => {
    await expect(world({}, project).load()).rejects.toThrow(message);
  });
});

describe('a "save" answer', () => {
  it('adds the entry to network.allow of the home config, keeping the rest, once', async () => {
    const { base } = world({ writableRoots: ['/srv'], network: { deny: ['bad.example'] } });
    const file = path.join(base, 'config.json');
    await addNetworkAllow(file, 'api.example.org');
    await addNetworkAllow(file, 'api.example.org');
    await addNetworkAllow(file, '203.0.113.7:443');
    expect(JSON.parse(fs.readFileSync(file, 'utf8'))).toEqual({ writableRoots: ['/srv'], network: { deny: ['bad.example'], allow: ['api.example.org', '203.0.113.7:443'] } });
  });

  it('makes the home config when there is none, and leaves a broken one as it is', async () => {
    const { base } = world({});
    const fresh = path.join(base, 'fresh', 'config.json');
    await addNetworkAllow(fresh, 'api.example.org');
    expect(JSON.parse(fs.readFileSync(fresh, 'utf8'))).toEqual({ network: { allow: ['api.example.org'] } });
    const broken = path.join(base, 'broken.json');
    fs.writeFileSync(broken, '{"network": ');
    await expect(addNetworkAllow(broken, 'api.example.org')).rejects.toThrow(/cannot add api\.example\.org/);
    expect(fs.readFileSync(broken, 'utf8')).toBe('{"network": ');
  });
});
