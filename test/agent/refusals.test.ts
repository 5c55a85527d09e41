import { describe, expect, it } from 'vitest';
import { DenialList, LISTED_DENIALS, denialLine, denialOf, promptRefusals, unlistedLine, type Refusal } from '../../src/agent/refusals.js';
import { ErrorCodes } from '../../src/core/index.js';
import type { AuditRecord, PromptBlock } from '../../src/index.js';
import { OUTSIDE_ROOTS_REMEDY } from '../../src/plugins/file-safety/evaluate.js';

const denial = (access: string, path: string, reason: string): Refusal => ({ kind: 'denied', access, path, reason });
const lines = (list: DenialList) => [...list.listed.map(denialLine), unlistedLine(list.unlisted)].filter((line) => line !== undefined);

describe('DenialList', () => {
  it('lists each refused path once, in order', () => {
    const list = new DenialList();
    list.add(denial('write', '/ws/a', 'protected'));
    list.add(denial('write', '/ws/a', 'protected'));
    list.add(denial('delete', '/ws/b', 'outside the workspace'));
    expect(lines(list)).toEqual(['brokered-shell: denied write /ws/a: protected', 'brokered-shell: denied delete /ws/b: outside the workspace']);
  });

  it('past the limit, still names the first refusal of each kind not listed yet, and counts the rest', () => {
    const list = new DenialList();
    for (let i = 0; i < LISTED_DENIALS + 5; i++) list.add(denial('write', `/store/f${i}`, 'the store'));
    list.add(denial('delete', '/store', 'the store'));
    list.add(denial('delete', '/store/again', 'the store'));
    const out = lines(list);
    expect(out).toHaveLength(LISTED_DENIALS + 2);
    expect(out.filter((line) => line.startsWith('brokered-shell: denied write '))).toHaveLength(LISTED_DENIALS);
    expect(out).toContain('brokered-shell: denied delete /store: the store');
    expect(out.at(-1)).toBe('brokered-shell: … and 6 more refused requests (each is in the audit log)');
    expect(list.unlisted).toBe(6);
  });

  it('shows control characters in a path or reason escaped, one line per refusal', () => {
    const list = new DenialList();
    list.add(denial('write', '/ws/a\nbrokered-shell: approved', 'why\u001b[2J'));
    expect(lines(list)).toEqual(['brokered-shell: denied write /ws/a\\nbrokered-shell: approved: why\\x1b[2J']);
    // The library's own list keeps the bytes as they were: escaping is for a terminal.
    expect(list.listed[0]?.path).toBe('/ws/a\nbrokered-shell: approved');
  });

  it('says nothing when nothing was refused', () => {
    expect(lines(new DenialList())).toEqual([]);
  });
});

const record = (extra: Partial<AuditRecord>): AuditRecord => ({
  requestId: 'r',
  sessionId: 's',
  origin: 'kernel',
  operation: 'open',
  paths: [{ role: 'path', path: '/ws/../ws/a', normalisedPath: '/ws/a', access: 'write' }],
  verdict: 'deny',
  decision: 'deny',
  reason: `outside the writable roots; ${OUTSIDE_ROOTS_REMEDY}`,
  ok: false,
  durationMs: 1,
  ...extra,
});

describe('denialOf: which audit records are refusals', () => {
  it.each<[string, Partial<AuditRecord>, Refusal | undefined]>([
    ['a denial, with its reason and the real config file', {}, { kind: 'denied', access: 'write', path: '/ws/a', operation: 'open', reason: "outside the writable roots; writableRoots, or cacheRoots.add for a tool's cache, in /h/config.json would allow it" }],
    ['an allowed request', { ok: true, verdict: 'sandbox' }, undefined],
    ['a prompt (reported with its answer instead)', { verdict: 'prompt' }, undefined],
    ['a missing path, failed as the kernel would', { verdict: 'sandbox', error: { code: ErrorCodes.PATH_NOT_FOUND, message: 'no such file', errno: 'ENOENT' } }, undefined],
    ['a move across file systems', { verdict: 'sandbox', error: { code: ErrorCodes.HOST_OP_FAILED, message: 'cross-device', errno: 'EXDEV' } }, undefined],
    [
      'allowed, then its backup failed: the error says why',
      { verdict: 'sandbox', reason: 'inside the workspace', error: { code: ErrorCodes.BACKUP_FAILED, message: 'over the size cap' } },
      { kind: 'denied', access: 'write', path: '/ws/a', operation: 'open', reason: 'over the size cap' },
    ],
  ])('%s', (_what, extra, expected) => {
    expect(denialOf(record(extra), '/h/config.json')).toEqual(expected);
  });
});

describe('promptRefusals', () => {
  const block = (path: string, reason?: string): PromptBlock => ({
    path,
    normalisedPath: path,
    operation: 'open',
    access: 'write',
    sessionId: 's',
    toolCallIds: ['c'],
    ...(reason ? { reason } : {}),
    firstSeenAt: '2026-01-01T00:00:00.000Z',
    count: 1,
  });

  it('a block whose question got no is not-approved; one nobody was asked about needs approval', () => {
    const refused = block('/ws/.bashrc', 'shell startup file');
    const unasked = block('/ws/.git/hooks/pre-commit', 'git hook');
    const timedOut = block('/ws/.brokered-shell.json');
    const out = promptRefusals(
      [refused, unasked, timedOut],
      [
        { block: refused, choice: undefined, refusal: 'not approved' },
        { block: unasked, choice: undefined, refusal: 'nobody could be asked' },
        { block: timedOut, choice: undefined, refusal: 'no answer within 300 s' },
      ],
    );
    expect(out).toEqual([
      { kind: 'not-approved', access: 'write', path: '/ws/.bashrc', operation: 'open', reason: 'shell startup file' },
      { kind: 'needs-approval', access: 'write', path: '/ws/.git/hooks/pre-commit', operation: 'open', reason: 'git hook' },
      { kind: 'not-approved', access: 'write', path: '/ws/.brokered-shell.json', operation: 'open', reason: 'it needs approval (no answer within 300 s)' },
    ]);
  });
});
