import { describe, expect, it } from 'vitest';
import { Broker, type BrokerRequestInput, type Origin } from '../../src/core/index.js';
import { RequesterAccessPlugin, procRequester, requesterFromStatus, type Requester } from '../../src/plugins/requester-access.js';
import { allowAll, identityResolver } from '../helpers/bare-broker.js';

/** The file system the plugin sees: /d (0755 root), /d/x (0700 uid 1234) and files in them. */
const FILES: Record<string, { uid: number; gid: number; mode: number; file: boolean }> = {
  '/': { uid: 0, gid: 0, mode: 0o755, file: false },
  '/d': { uid: 0, gid: 0, mode: 0o755, file: false },
  '/d/x': { uid: 1234, gid: 1234, mode: 0o700, file: false },
  '/d/mine-000': { uid: 0, gid: 0, mode: 0o000, file: true },
  '/d/theirs-600': { uid: 1234, gid: 1234, mode: 0o600, file: true },
  '/d/theirs-644': { uid: 1234, gid: 1234, mode: 0o644, file: true },
  '/d/group-640': { uid: 1234, gid: 50, mode: 0o640, file: true },
  '/d/x/theirs-644': { uid: 1234, gid: 1234, mode: 0o644, file: true },
  '/d/t': { uid: 1234, gid: 1234, mode: 0o755, file: false },
  '/d/t/theirs-666': { uid: 1234, gid: 1234, mode: 0o666, file: true },
  '/d/sticky': { uid: 4321, gid: 4321, mode: 0o1777, file: false },
  '/d/sticky/theirs-666': { uid: 1234, gid: 1234, mode: 0o666, file: true },
  '/d/sticky/mine': { uid: 0, gid: 0, mode: 0o644, file: true },
  '/d/mine-644': { uid: 0, gid: 0, mode: 0o644, file: true },
};
const stat = (file: string) => {
  const entry = FILES[file];
  return entry ? { uid: entry.uid, gid: entry.gid, mode: entry.mode, isFile: () => entry.file } : undefined;
};

const SANDBOX: Requester = { uid: 0, gids: [0], readsAll: false };

function setUp(peer: Requester | undefined = SANDBOX) {
  const plugin = new RequesterAccessPlugin({ stat, sandboxRequester: () => SANDBOX, peerRequester: () => peer });
  // The resolver says every target is an existing file (the plugin stats it itself).
  return new Broker({ sessionId: 's1' }).use(identityResolver('file'), allowAll(), plugin);
}

const request = (origin: Origin, operation: 'open' | 'copy' | 'delete', file: string, withPeer = origin !== 'kernel'): BrokerRequestInput => ({
  origin,
  action: origin === 'text-token' ? 'token' : origin === 'kernel' || origin === 'api' ? 'check' : 'host-op',
  operation,
  targets:
    operation === 'copy'
      ? [
          { role: 'from', path: file, access: 'read' },
          { role: 'to', path: '/d/copy', access: 'write' },
        ]
      : [{ role: 'path', path: file, access: operation === 'delete' ? 'delete' : 'write' }],
  sessionId: 's1',
  ...(withPeer ? { peer: { pid: 99, uid: 0, gid: 0 } } : {}),
});

/** A host operation from a socket peer on one path (`to` for the two-path operations). */
const hostOp = (operation: 'chmod' | 'touch' | 'delete' | 'mkdir' | 'copy' | 'link' | 'rename', file: string, from = '/d/mine-644'): BrokerRequestInput => ({
  origin: 'host-op',
  action: 'host-op',
  operation,
  targets: ['copy', 'link', 'rename'].includes(operation)
    ? [
        { role: 'from', path: from, access: operation === 'rename' ? 'delete' : 'read' },
        { role: 'to', path: file, access: 'write' },
      ]
    : [{ role: 'path', path: file, access: operation === 'delete' ? 'delete' : 'write' }],
  sessionId: 's1',
  peer: { pid: 99, uid: 0, gid: 0 },
});

describe('RequesterAccessPlugin: what the broker changes for a socket client, DAC as the client has it', () => {
  it.each([
    ['chmod of a file someone else owns', 'deny', hostOp('chmod', '/d/theirs-644')],
    ['chmod of an own file', 'sandbox', hostOp('chmod', '/d/mine-644')],
    ['touch of a file it may not write', 'deny', hostOp('touch', '/d/theirs-644')],
    ['touch of a file anyone may write', 'sandbox', hostOp('touch', '/d/t/theirs-666')],
    ['delete in a directory it may not write', 'deny', hostOp('delete', '/d/t/theirs-666')],
    ['delete of an own file in its own directory', 'sandbox', hostOp('delete', '/d/mine-644')],
    ["delete of another's file in a sticky directory", 'deny', hostOp('delete', '/d/sticky/theirs-666')],
    ['delete of an own file in a sticky directory', 'sandbox', hostOp('delete', '/d/sticky/mine')],
    ['mkdir in a directory it may not write', 'deny', hostOp('mkdir', '/d/t/new')],
    ['mkdir in its own directory', 'sandbox', hostOp('mkdir', '/d/new')],
    ['copy over a file it may not write', 'deny', hostOp('copy', '/d/theirs-644')],
    ['rename out of a directory it may not write', 'deny', hostOp('rename', '/d/new-name', '/d/t/theirs-666')],
    ['a hard link to a file it may not write', 'deny', hostOp('link', '/d/link', '/d/theirs-644')],
    ['a hard link to an own file', 'sandbox', hostOp('link', '/d/link', '/d/mine-644')],
    ['a token (fd grant) to write a file it may not write', 'deny', request('text-token', 'open', '/d/theirs-644')],
    ['the kernel asking to write that file (the supervisor acts with the command\'s rights)', 'sandbox', request('kernel', 'open', '/d/theirs-644')],
  ] as const)('%s → %s', async (_label, verdict, input) => {
    const outcome = await setUp().handle(input);
    expect(outcome.decision.verdict, outcome.decision.reason).toBe(verdict);
  });

  it('a peer with CAP_DAC_OVERRIDE and CAP_FOWNER could do it anyway: left alone', async () => {
    const outcome = await setUp({ uid: 0, gids: [0], readsAll: true, writesAll: true }).handle(hostOp('chmod', '/d/theirs-644'));
    expect(outcome.decision.verdict).toBe('sandbox');
  });
});

describe('RequesterAccessPlugin', () => {
  it.each([
    ['kernel write of a file someone else owns, mode 0600', 'deny', request('kernel', 'open', '/d/theirs-600')],
    ['kernel delete of it (its backup would expose it)', 'deny', request('kernel', 'delete', '/d/theirs-600')],
    ['socket token for it', 'deny', request('text-token', 'open', '/d/theirs-600')],
    ['socket copy from it', 'deny', request('host-op', 'copy', '/d/theirs-600')],
    ['kernel write of a world-readable file', 'sandbox', request('kernel', 'open', '/d/theirs-644')],
    ['kernel write of an own file, mode 000 (the owner may chmod it)', 'sandbox', request('kernel', 'open', '/d/mine-000')],
    ['a readable file in a directory the requester cannot search', 'deny', request('kernel', 'open', '/d/x/theirs-644')],
    ['a group-readable file, requester not in the group', 'deny', request('kernel', 'open', '/d/group-640')],
    ['the owner\'s in-process call (api)', 'sandbox', request('api', 'open', '/d/theirs-600', false)],
    ['an in-process request a socket client\'s command made (api with a peer)', 'deny', request('api', 'open', '/d/theirs-600', true)],
    ['a file that does not exist', 'sandbox', request('kernel', 'open', '/d/new')],
  ] as const)('%s → %s', async (_label, verdict, input) => {
    const outcome = await setUp().handle(input);
    expect(outcome.decision.verdict).toBe(verdict);
    if (verdict === 'deny') expect(outcome.decision.source).toBe('requester-access');
  });

  it('a requester in the file\'s group may read a group-readable file', async () => {
    const outcome = await setUp({ uid: 0, gids: [0, 50], readsAll: false }).handle(request('host-op', 'copy', '/d/group-640'));
    expect(outcome.decision.verdict).toBe('sandbox');
  });

  it('a peer with CAP_DAC_OVERRIDE could read it anyway: left alone', async () => {
    const outcome = await setUp({ uid: 0, gids: [0], readsAll: true }).handle(request('host-op', 'copy', '/d/theirs-600'));
    expect(outcome.decision.verdict).toBe('sandbox');
  });

  it('a peer that cannot be told (gone) is refused', async () => {
    const plugin = new RequesterAccessPlugin({ stat, peerRequester: () => undefined });
    const broker = new Broker({ sessionId: 's1' }).use(identityResolver('file'), allowAll(), plugin);
    const outcome = await broker.handle(request('text-token', 'open', '/d/theirs-644'));
    expect(outcome.decision).toMatchObject({ verdict: 'deny', source: 'requester-access' });
  });

  it("asks who the peer is and stats each directory once per request, and again for the next request", async () => {
    const statted: string[] = [];
    let asked = 0;
    const counting = (file: string) => {
      statted.push(file);
      return stat(file);
    };
    const plugin = new RequesterAccessPlugin({ stat: counting, peerRequester: () => (asked++, SANDBOX) });
    const broker = new Broker({ sessionId: 's1' }).use(identityResolver('file'), allowAll(), plugin);
    // A rename within /d/t: both names share every directory above them.
    const rename = hostOp('rename', '/d/t/new-name', '/d/t/theirs-666');
    expect((await broker.handle(rename)).decision.verdict).toBe('deny');
    const timesStatted = (file: string) => statted.filter((seen) => seen === file).length;
    expect(asked).toBe(1);
    expect([timesStatted('/d'), timesStatted('/')]).toEqual([1, 1]);
    // Rights can change between requests: nothing is carried over.
    statted.length = 0;
    expect((await broker.handle(rename)).decision.verdict).toBe('deny');
    expect(asked).toBe(2);
    expect([timesStatted('/d'), timesStatted('/')]).toEqual([1, 1]);
  });

  it('reads a real process: its ids and whether it has the DAC capabilities', () => {
    const me = procRequester({ pid: process.pid, uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 });
    expect(me?.uid).toBe(process.getuid?.());
    expect(me?.gids).toContain(process.getgid?.());
    expect(procRequester({ pid: 2 ** 30, uid: 0, gid: 0 })).toBeUndefined();
    // Its groups are its own, nothing read from a neighbouring line (getgroups includes the egid).
    expect(new Set(me?.gids)).toEqual(new Set([process.getgid?.(), ...(process.getgroups?.() ?? [])]));
  });

  it('reads only the Groups and CapEff lines, so an empty Groups line adds no group', () => {
    const peer = { pid: 4242, uid: 1000, gid: 1000 };
    const status = (groups: string, capEff: string) =>
      `Name:\tsh\nTgid:\t4242\nUid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\nGroups:${groups}\nNStgid:\t4242\nNSpid:\t4242\nCapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:${capEff}\nCapBnd:\t000001ffffffffff\n`;
    // An empty list (the kernel writes a tab and a space) must not read the next line's pid as a group.
    expect(requesterFromStatus(status('\t ', '\t0000000000000000'), peer)).toEqual({ uid: 1000, gids: [1000], readsAll: false, writesAll: false });
    expect(requesterFromStatus(status('\t4 24 27 ', '\t0000000000000000'), peer).gids).toEqual([1000, 4, 24, 27]);
    // CAP_DAC_OVERRIDE (bit 1) and CAP_FOWNER (bit 3); CAP_DAC_READ_SEARCH (bit 2) alone reads only.
    expect(requesterFromStatus(status('\t ', '\t000000000000000a'), peer)).toMatchObject({ readsAll: true, writesAll: true });
    expect(requesterFromStatus(status('\t ', '\t0000000000000004'), peer)).toMatchObject({ readsAll: true, writesAll: false });
    // A missing or malformed line grants nothing.
    expect(requesterFromStatus(status('\t ', '\tnot-hex'), peer)).toMatchObject({ readsAll: false, writesAll: false });
    expect(requesterFromStatus('Name:\tsh\n', peer)).toEqual({ uid: 1000, gids: [1000], readsAll: false, writesAll: false });
  });
});
