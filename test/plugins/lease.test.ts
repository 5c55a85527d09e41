/**
 * The lease plugin: the session's policy compiled, through the pipeline, for the kernel
 * supervisor. The standard plugins all take part; a plugin that judges kernel requests
 * and says nothing leaves the session without a lease; one that claims a scope keeps the
 * round trip there.
 */
import { mkdirSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Broker, PolicyStage, type BrokerPlugin } from '../../src/core/index.js';
import { getLeaseHooks, type Lease } from '../../src/plugins/lease/index.js';
import { standardPlugins } from '../../src/plugins/standard.js';

let base: string;
let ws: string;
let home: string;
beforeEach(() => {
  base = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'bsh-lease-')));
  ws = path.join(base, 'ws');
  home = path.join(base, 'home');
  for (const dir of [ws, home]) mkdirSync(dir);
});
afterEach(() => rmSync(base, { recursive: true, force: true }));

async function leaseOf(extra: BrokerPlugin[] = []): Promise<Lease> {
  const broker = new Broker({ sessionId: 's1' }).use(...standardPlugins({ home, writableRoots: [ws], userHome: path.join(base, 'user') }), ...extra);
  const outcome = await broker.handle({
    origin: 'kernel',
    action: 'token',
    operation: 'open',
    targets: [{ role: 'path', path: ws, access: 'read' }],
    sessionId: 's1',
    options: { lease: true },
  });
  expect(outcome).toMatchObject({ ok: true, grant: { kind: 'lease' } });
  await broker.close();
  if (outcome.grant?.kind !== 'lease') throw new Error('no lease');
  return outcome.grant.lease as Lease;
}

describe('LeasePlugin', () => {
  it("the standard plugins give a lease: the workspace, the store's records, the protections as data", async () => {
    const lease = await leaseOf();
    expect(lease.roots).toEqual([ws]);
    expect(lease.ops).toEqual(expect.arrayContaining(['create', 'unlink', 'chmod']));
    expect(lease.store).toMatchObject({ durability: 'turn', blobs: expect.stringContaining(home) });
    expect(lease.store?.journal).toMatch(/\.lease-[0-9a-f]+\.records$/);
    expect(lease.names).toEqual(expect.arrayContaining(['hooks', 'config', '.vscode', '.claude']));
    expect(lease.finalNames).toEqual(expect.arrayContaining(['.git', 'HEAD']));
    // The broker's own files are protected: the store and what is above it.
    expect(lease.anchors).toContain(home);
    expect(lease.holds).toContain(path.dirname(home));
    expect(lease.setIdRoundTrip).toBe(true);
  });

  it('a plugin that judges kernel requests and takes no part leaves the session without a lease', async () => {
    const silent: BrokerPlugin = {
      name: 'silent-policy',
      apply(broker) {
        broker.hooks.evaluatePolicy.tap({ name: 'silent-policy', stage: PolicyStage.ORGANISATION }, () => undefined);
      },
    };
    const lease = await leaseOf([silent]);
    expect(lease.roots).toEqual([]);
    expect(lease.ops).toEqual([]);
  });

  it('a plugin that is code claims its scope: changes there keep the round trip, the rest is leased', async () => {
    const claiming: BrokerPlugin = {
      name: 'secrets-policy',
      apply(broker) {
        broker.hooks.evaluatePolicy.tap({ name: 'secrets-policy', stage: PolicyStage.ORGANISATION }, () => undefined);
        getLeaseHooks(broker).contribute.tap('secrets-policy', (lease) => void lease.claims.push(path.join(ws, 'secrets')));
      },
    };
    const lease = await leaseOf([claiming]);
    expect(lease.roots).toEqual([ws]);
    expect(lease.claims).toContain(path.join(ws, 'secrets'));
  });
});
