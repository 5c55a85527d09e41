/**
 * A library caller's options are checked before anything is made: a wrong type must
 * fail clearly, never quietly run commands outside the sandbox or widen the roots.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { completeSessionConfig } from '../../src/agent/config.js';
import { createSandboxSession } from '../../src/agent/session.js';
import type { SandboxSessionOptions } from '../../src/agent/types.js';
import { ErrorCodes, PolicyStage, type BrokerPlugin } from '../../src/core/index.js';
import { makeWorld, openSession, read } from './helpers.js';

const wrong = (value: unknown) => value as never;

describe('createSandboxSession refuses options of the wrong type', () => {
  it.each<[string, Record<string, unknown>, RegExp]>([
    ['sandbox.enabled 0', { config: { sandbox: { enabled: wrong(0) } } }, /config\.sandbox\.enabled: Invalid input: expected boolean/],
    ['sandbox.enabled null', { config: { sandbox: { enabled: wrong(null) } } }, /config\.sandbox\.enabled/],
    ['writableRoots as one string', { config: { writableRoots: wrong('/.') } }, /config\.writableRoots: Invalid input: expected array/],
    ['excludedCommands as one string', { config: { sandbox: { excludedCommands: wrong('echo') } } }, /config\.sandbox\.excludedCommands/],
    ['an unknown runtime', { config: { sandbox: { runtime: wrong('none') } } }, /config\.sandbox\.runtime/],
    ['an unknown config key', { config: { sandbx: {} } }, /config: unknown key\(s\) sandbx/],
    ['an unknown option', { sandboxx: true }, /options: unknown key\(s\) sandboxx/],
    ['an approver that is not a function', { approver: 'yes' }, /approver: must be a function/],
    ['a plugin without apply', { plugins: [{ name: 'p' }] }, /plugins\.0\.apply: must be a function/],
    ['plugins not a list', { plugins: {} }, /plugins: Invalid input: expected array/],
    ['a negative policyTimeoutMs', { policyTimeoutMs: -1 }, /policyTimeoutMs/],
    ['a policyTimeoutMs that is not whole', { policyTimeoutMs: 0.5 }, /policyTimeoutMs/],
  ])('%s', async (_label, options, message) => {
    const world = await makeWorld('options');
    const given = { workspace: world.ws, home: world.home, ...options } as SandboxSessionOptions;
    const attempt = createSandboxSession(given);
    await expect(attempt).rejects.toMatchObject({ code: ErrorCodes.INVALID_OPTIONS });
    await expect(attempt).rejects.toThrow(message);
    // Nothing was made: no store for a session that never started.
    expect(await fs.readdir(world.home)).toEqual([]);
  });

  it('completeSessionConfig checks what it completes', () => {
    expect(() => completeSessionConfig({ sandbox: { enabled: wrong('no') } })).toThrow(/the session's config is invalid:\n {2}sandbox\.enabled/);
    expect(completeSessionConfig({ sandbox: { enabled: undefined } }).sandbox.enabled).toBe(true);
  });
});

describe('the checked options still mean what they say', () => {
  it('a relative writable root is taken from the workspace, and a write there is allowed', async () => {
    const world = await makeWorld('options-root');
    const { session } = await openSession(world, { config: { writableRoots: ['../out'] } });
    await session.beginTurn({ userMessage: 'roots' });
    const result = await session.execute('echo out > "$OUT/b.txt"');
    expect(result.exitCode).toBe(0);
    expect(await read(path.join(world.outside, 'b.txt'))).toBe('out\n');
  });

  it('an organisation plugin that never answers: each change it is asked about is refused after policyTimeoutMs, and the command goes on', async () => {
    const world = await makeWorld('options-hung');
    const hung: BrokerPlugin = {
      name: 'unreachable-policy-service',
      apply(broker) {
        broker.hooks.evaluatePolicy.tapPromise({ name: 'unreachable-policy-service', stage: PolicyStage.ORGANISATION }, () => new Promise(() => undefined));
      },
    };
    const { session, logLines } = await openSession(world, { plugins: [hung], policyTimeoutMs: 100 });
    await session.beginTurn({ userMessage: 'hung plugin' });
    const result = await session.execute('echo x > made.txt; echo "status $?"');
    expect(result.exitCode).toBe(0);
    expect(result.stdout).toBe('status 1\n');
    expect(result.stderr).toMatch(/Permission denied/);
    await expect(fs.lstat(path.join(world.ws, 'made.txt'))).rejects.toMatchObject({ code: 'ENOENT' });
    expect(logLines().some((line) => JSON.stringify(line).includes('unreachable-policy-service') && JSON.stringify(line).includes('gave no opinion within 100 ms'))).toBe(true);
    expect((await session.endTurn({ message: 'done' })).ok).toBe(true);
  });

  it('a turn whose size cap is not a number is refused, not given the default', async () => {
    const world = await makeWorld('options-turn');
    const { session } = await openSession(world);
    await expect(session.beginTurn({ userMessage: 'x', fileBackup: { maxSizeMB: wrong('big') } })).rejects.toThrow(
      /beginTurn options are invalid:\n {2}fileBackup\.maxSizeMB/,
    );
    await expect(session.beginTurn(wrong(undefined))).rejects.toMatchObject({ code: ErrorCodes.INVALID_OPTIONS });
  });
});
