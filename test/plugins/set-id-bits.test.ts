import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Broker, ErrorCodes, PolicyStage, type BrokerRequestInput, type Operation, type PathKind, type Verdict } from '../../src/core/index.js';
import { HostOperationsPlugin } from '../../src/plugins/host-operations/index.js';
import { PathResolutionPlugin } from '../../src/plugins/path-resolution/index.js';
import { privilegeBits, SetIdBitsPlugin, withoutPrivilegeBits } from '../../src/plugins/set-id-bits.js';
import { kernelToBrokerRequest } from '../../src/sandbox/kernel-bridge.js';
import { operationTargets } from '../../src/requests/targets.js';
import { fixedPolicy, identityResolver } from '../helpers/bare-broker.js';

const O_CREAT = 0o100;
const O_WRONLY = 0o1;
const O_TMPFILE = 0o20200000;

/** A broker whose paths resolve to themselves with the kind given, allowed by a later plugin with `verdict`. */
function bareBroker(kind: PathKind, verdict: Verdict = 'sandbox', stage: number = PolicyStage.DEFAULTS): Broker {
  return new Broker({ sessionId: 's1' }).use(identityResolver(kind), new SetIdBitsPlugin(), fixedPolicy(() => ({ verdict, source: 'test' }), stage));
}

function request(operation: Operation, mode: number | undefined, origin: BrokerRequestInput['origin'] = 'host-op'): BrokerRequestInput {
  const targets = operation === 'open' ? [{ role: 'path' as const, path: '/w/f', access: 'write' as const }] : operationTargets(operation, { path: '/w/f' });
  return {
    origin,
    action: 'check',
    operation,
    targets,
    sessionId: 's1',
    options: mode === undefined ? {} : { mode },
  };
}

describe('privilegeBits', () => {
  it.each([
    [0o755, false, 0],
    [0o4755, false, 0o4000],
    [0o2755, false, 0o2000],
    [0o6755, false, 0o6000],
    [0o1777, false, 0],
    [0o2775, true, 0],
    [0o4755, true, 0o4000],
    [0o6775, true, 0o4000],
  ])('mode %o on a directory=%s: %o', (mode, directory, bits) => {
    expect(privilegeBits(mode, directory)).toBe(bits);
    expect(withoutPrivilegeBits(mode, directory)).toBe(mode & ~bits);
  });
});

describe('SetIdBitsPlugin', () => {
  it.each([
    ['chmod', 'file', 0o4755, false],
    ['chmod', 'file', 0o2755, false],
    ['chmod', 'file', 0o6711, false],
    ['chmod', 'file', 0o755, true],
    ['chmod', 'file', 0o1755, true],
    ['chmod', 'other', 0o2644, false],
    ['chmod', 'symlink', 0o2644, false],
    ['chmod', 'directory', 0o2775, true],
    ['chmod', 'directory', 0o4775, false],
    ['mkdir', 'absent', 0o2775, true],
    ['mkdir', 'absent', 0o4775, false],
    ['mknod', 'absent', 0o2644, false],
    ['mknod', 'absent', 0o644, true],
    ['open', 'absent', 0o4755, false],
    ['open', 'file', 0o2755, false],
    ['open', 'absent', 0o666, true],
  ] as const)('%s on a %s with mode %o: ok=%s', async (operation, kind, mode, ok) => {
    const outcome = await bareBroker(kind).handle(request(operation, mode));
    expect(outcome.ok).toBe(ok);
    if (!ok) {
      expect(outcome.error?.code).toBe(ErrorCodes.POLICY_DENIED);
      expect(outcome.decision).toMatchObject({ verdict: 'deny', source: 'set-id-bits' });
      expect(outcome.decision.reason).toMatch(/^mode [0-7]{4} has the set-/);
    }
  });

  it.each(['rename', 'copy', 'touch', 'delete'] as const)('leaves %s alone, whatever mode a client sends with it', async (operation) => {
    const targets = operationTargets(operation, { path: '/w/f', from: '/w/f', to: '/w/g' });
    const outcome = await bareBroker('file').handle({ origin: 'host-op', action: 'check', operation, targets, sessionId: 's1', options: { mode: 0o4755 } });
    expect(outcome.ok).toBe(true);
  });

  it('leaves a chmod or open without a mode to the other plugins', async () => {
    expect((await bareBroker('file').handle(request('chmod', undefined))).ok).toBe(true);
    expect((await bareBroker('file').handle(request('open', undefined, 'text-token'))).ok).toBe(true);
  });

  it.each([
    ['a rule that grants it at the same stage', 'sandbox', PolicyStage.PROTECTED],
    ['a session grant (an earlier approval)', 'sandbox', PolicyStage.SESSION_GRANTS],
    ['a prompt a person could approve', 'prompt', PolicyStage.MANDATORY],
  ] as const)('is not lifted by %s', async (_label, verdict, stage) => {
    const outcome = await bareBroker('file', verdict, stage).handle(request('chmod', 0o4755));
    expect(outcome.ok).toBe(false);
    expect(outcome.decision).toMatchObject({ verdict: 'deny', source: 'set-id-bits' });
  });

  it('judges the mode of a kernel open only when it may create (the supervisor sends it then)', async () => {
    const broker = bareBroker('absent');
    const kernelOpen = (flags: number) =>
      kernelToBrokerRequest(broker, { id: 1, op: 'open', pid: 1, tgid: 1, flags, mode: 0o4755, follow: true, path: '/w/f' });
    expect((await broker.handle(kernelOpen(O_WRONLY | O_CREAT))).ok).toBe(false);
    expect((await broker.handle(kernelOpen(O_WRONLY | O_TMPFILE))).ok).toBe(false);
    expect((await broker.handle(kernelOpen(O_WRONLY))).ok).toBe(true);
  });
});

describe('host operations on real files', () => {
  let root: string;
  beforeEach(async () => {
    root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'bsh-set-id-')));
  });
  afterEach(async () => {
    await fs.rm(root, { recursive: true, force: true });
  });

  const broker = () =>
    new Broker({ sessionId: 's1' }).use(
      new PathResolutionPlugin({ home: root }),
      new SetIdBitsPlugin(),
      fixedPolicy(() => ({ verdict: 'sandbox', source: 'test' })),
      new HostOperationsPlugin(),
    );
  const hostOp = (operation: 'chmod' | 'mkdir', file: string, mode: number): BrokerRequestInput => ({
    origin: 'host-op',
    action: 'host-op',
    operation,
    targets: operationTargets(operation, { path: file }),
    sessionId: 's1',
    options: { mode },
  });
  const modeOf = async (file: string) => (await fs.lstat(file)).mode & 0o7777;

  it('chmod to a set-uid or set-gid mode is refused and the mode stays; set-gid on a directory is done', async () => {
    const file = path.join(root, 'prog');
    await fs.copyFile('/usr/bin/true', file);
    await fs.chmod(file, 0o755);
    for (const mode of [0o4755, 0o2755, 0o6755]) {
      const outcome = await broker().handle(hostOp('chmod', file, mode));
      expect(outcome.ok).toBe(false);
      expect(await modeOf(file)).toBe(0o755);
    }
    const dir = path.join(root, 'shared');
    await fs.mkdir(dir, 0o775);
    expect((await broker().handle(hostOp('chmod', dir, 0o2775))).ok).toBe(true);
    expect(await modeOf(dir)).toBe(0o2775);
    expect((await broker().handle(hostOp('chmod', dir, 0o4775))).ok).toBe(false);
    expect(await modeOf(dir)).toBe(0o2775);
  });

  it('mkdir with a set-uid mode is refused and makes nothing', async () => {
    const dir = path.join(root, 'd');
    expect((await broker().handle(hostOp('mkdir', dir, 0o4755))).ok).toBe(false);
    await expect(fs.lstat(dir)).rejects.toThrow(/ENOENT/);
  });
});
