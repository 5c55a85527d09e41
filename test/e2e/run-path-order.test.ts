/**
 * Changes are ordered per path, not one at a time, in the real kernel sandbox: a write
 * the broker is still deciding (its backup held here on purpose) does not keep a write
 * to another path from being decided and made meanwhile; a second write to the same
 * path waits for the first to be made.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createSandboxSession, type SandboxSession } from '../../src/agent/index.js';
import { Stage, type BrokerPlugin } from '../../src/core/index.js';
import { makeWorld, removeWorld, worldEnv, type World } from './run-helpers.js';

let world: World | undefined;
let session: SandboxSession | undefined;
afterEach(async () => {
  await session?.close().catch(() => undefined);
  session = undefined;
  await removeWorld(world);
  world = undefined;
});

/** Holds the first request for `held` in pre-modify-backup until a request for another of `names` has been decided. */
function overlapProbe(held: string, others: string[], holdMs = 10_000): { plugin: BrokerPlugin; events: string[] } {
  const events: string[] = [];
  let release: () => void = () => undefined;
  const released = new Promise<void>((resolve) => (release = resolve));
  const plugin: BrokerPlugin = {
    name: 'overlap-probe',
    apply(broker) {
      broker.hooks.preModifyBackup.tapPromise({ name: 'overlap-probe', stage: Stage.FIRST }, async (resolved) => {
        const name = path.basename(resolved.targets.find((t) => t.access !== 'read')?.resolved ?? '');
        if (name === held && !events.includes(`start ${held}`)) {
          events.push(`start ${held}`);
          // Bounded: a broker that ran one change at a time would never get to the other one.
          await Promise.race([released, new Promise((resolve) => setTimeout(resolve, holdMs))]);
          events.push(`end ${held}`);
        } else if (others.includes(name)) {
          events.push(`decide ${name}`);
          release();
        }
      });
    },
  };
  return { plugin, events };
}

describe('per-path order', () => {
  it('two writers to different paths overlap: the second is decided and made while the first is still being decided', { timeout: 60_000 }, async () => {
    world = await makeWorld('path-order');
    await fs.writeFile(path.join(world.ws, 'a.txt'), 'old a\n');
    const probe = overlapProbe('a.txt', ['b.txt']);
    session = await createSandboxSession({ workspace: world.ws, home: world.home, sessionId: 'path-order', env: worldEnv(world), plugins: [probe.plugin] });
    await session.beginTurn({ userMessage: 'two writers' });
    const result = await session.execute('(echo new a > a.txt) & (sleep 0.2; echo b > b.txt); wait');
    expect(result.exitCode, result.stderr).toBe(0);
    await session.endTurn();
    expect(probe.events).toEqual(['start a.txt', 'decide b.txt', 'end a.txt']);
    expect(await fs.readFile(path.join(world.ws, 'a.txt'), 'utf8')).toBe('new a\n');
    expect(await fs.readFile(path.join(world.ws, 'b.txt'), 'utf8')).toBe('b\n');
  });

  it('a second writer to the same path waits for the first to be made', { timeout: 60_000 }, async () => {
    world = await makeWorld('path-order-same');
    await fs.writeFile(path.join(world.ws, 'a.txt'), 'old\n');
    const probe = overlapProbe('a.txt', [], 500);
    const seen: string[] = [];
    const plugin: BrokerPlugin = {
      name: 'content-probe',
      apply(broker) {
        broker.hooks.preModifyBackup.tapPromise({ name: 'content-probe', stage: Stage.LAST }, async (resolved) => {
          const file = resolved.targets.find((t) => t.access !== 'read')?.resolved ?? '';
          if (path.basename(file) === 'a.txt') seen.push(await fs.readFile(file, 'utf8'));
        });
      },
    };
    session = await createSandboxSession({ workspace: world.ws, home: world.home, sessionId: 'path-order-same', env: worldEnv(world), plugins: [probe.plugin, plugin] });
    await session.beginTurn({ userMessage: 'same path' });
    const result = await session.execute('(echo first > a.txt) & (sleep 0.2; echo second >> a.txt); wait');
    expect(result.exitCode, result.stderr).toBe(0);
    await session.endTurn();
    // The second request was decided after the first write was made (the held one timed out waiting for a rival that never came).
    expect(seen).toEqual(['old\n', 'first\n']);
    expect(await fs.readFile(path.join(world.ws, 'a.txt'), 'utf8')).toBe('first\nsecond\n');
  });
});
