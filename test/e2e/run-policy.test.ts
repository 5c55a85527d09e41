/**
 * `brokered-shell run --policy FILE` and `--no-backup` end to end: a deny rule makes
 * writes to a workspace file fail with EACCES and leaves it untouched; a prompt rule
 * refuses now (EACCES), backs nothing up and lists what needs approval; `--no-backup`
 * lets changes happen, keeps no backups, and still enforces the policy.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ST,
  caseStatuses,
  deniedLines,
  describeRun,
  makeWorld,
  nodeState,
  onlyTurn,
  removeWorld,
  run,
  turnsOf,
  writeOld,
  type NodeState,
  type World,
} from './run-helpers.js';

let world: World;
let policy: string;
const ws = (name: string) => path.join(world.ws, name);

/** Prints "errno N" for a write-only open of each argument (0 when it opens). */
const OPEN_ERRNO = `python3 -c "
import os, sys
for p in sys.argv[1:]:
    try:
        os.close(os.open(p, os.O_WRONLY))
        print('errno', p, 0)
    except OSError as e:
        print('errno', p, e.errno)
"`;

beforeAll(async () => {
  world = await makeWorld('policy');
  policy = path.join(world.base, 'policy.json');
  await fs.writeFile(
    policy,
    JSON.stringify({
      rules: [
        { pattern: 'secret.txt', decision: 'deny' },
        { pattern: 'ask.txt', decision: 'prompt' },
      ],
    }),
  );
});

afterAll(() => removeWorld(world));

describe('run --policy', () => {
  let secretBefore: NodeState | undefined;
  let askBefore: NodeState | undefined;

  it('deny: EACCES and untouched; prompt: EACCES, untouched, listed as needing approval', async () => {
    await writeOld(ws('secret.txt'), 'top secret\n', 0o640);
    await writeOld(ws('ask.txt'), 'ask first\n', 0o640);
    await writeOld(ws('ok.txt'), 'free\n', 0o640);
    secretBefore = await nodeState(ws('secret.txt'));
    askBefore = await nodeState(ws('ask.txt'));
    const script = [
      ST,
      'echo x > secret.txt; st deny-redirect',
      'echo x >> secret.txt; st deny-append',
      'rm -f secret.txt; st deny-rm',
      'mv secret.txt gone.txt; st deny-mv',
      'chmod 666 secret.txt; st deny-chmod',
      'echo x > ask.txt; st prompt-redirect',
      'rm -f ask.txt; st prompt-rm',
      `${OPEN_ERRNO} secret.txt ask.txt ok.txt`,
      'echo changed > ok.txt; st allowed',
    ].join('\n');
    const result = await run(world, script, { session: 'policy', policy });
    // 77: something needs approval and nobody could give it (no terminal, no --yes/--no).
    expect(result.status, describeRun(result)).toBe(77);
    const statuses = caseStatuses(result.out);
    for (const name of ['deny-redirect', 'deny-append', 'deny-rm', 'deny-mv', 'deny-chmod', 'prompt-redirect', 'prompt-rm']) {
      expect(statuses.get(name), name).not.toBe(0);
    }
    expect(statuses.get('allowed')).toBe(0);
    // EACCES (13) for both rules, as the program itself sees it.
    expect(result.out).toContain(`errno secret.txt 13\n`);
    expect(result.out).toContain(`errno ask.txt 13\n`);
    expect(result.out).toContain(`errno ok.txt 0\n`);

    expect(await nodeState(ws('secret.txt'))).toEqual(secretBefore);
    expect(await nodeState(ws('ask.txt'))).toEqual(askBefore);
    expect(await nodeState(ws('gone.txt'))).toBeUndefined();
    expect(await fs.readFile(ws('ok.txt'), 'utf8')).toBe('changed\n');

    expect(deniedLines(result.stderr)).toEqual(expect.arrayContaining([`write ${ws('secret.txt')}`, `delete ${ws('secret.txt')}`]));
    expect(result.stderr).toContain(`brokered-shell: needs approval: write ${ws('ask.txt')}`);
    expect(result.stderr).toContain(`brokered-shell: needs approval: delete ${ws('ask.txt')}`);
    // A prompt answers deny: it is not reported as an ordinary denial.
    expect(deniedLines(result.stderr).some((line) => line.endsWith('/ask.txt'))).toBe(false);

    // Only the allowed change was backed up: nothing for the denied or prompted file.
    const turn = await onlyTurn(world, 'policy');
    expect(turn.files.map((f) => f.path)).toEqual([ws('ok.txt')]);
  });
});

describe('run --policy: a file rule holds against a directory moved into place', () => {
  it('mv of a directory that would bring a file a rule denies writing is refused, and nothing lands there', async () => {
    const rules = path.join(world.base, 'config-policy.json');
    await fs.writeFile(rules, JSON.stringify({ rules: [{ pattern: 'config/prod.json', access: ['write'], decision: 'deny' }] }));
    await writeOld(path.join(world.ws, 'config', 'prod.json'), '{"safe":true}\n', 0o640);
    const script = [
      ST,
      'echo evil > config/prod.json; st direct',
      // The rule says nothing about deleting: the directory may go, but not come back with another prod.json.
      'mv config c2; st away',
      'echo evil > c2/prod.json; st edit-elsewhere',
      'mv c2 config; st back',
    ].join('\n');
    const result = await run(world, script, { session: 'config-move', policy: rules });
    const statuses = caseStatuses(result.out);
    expect(statuses.get('direct'), describeRun(result)).not.toBe(0);
    expect(statuses.get('away')).toBe(0);
    expect(statuses.get('edit-elsewhere')).toBe(0);
    expect(statuses.get('back')).not.toBe(0);
    expect(await nodeState(ws('config'))).toBeUndefined();
    expect(result.stderr).toContain(`${ws('config')} would then hold ${ws('config/prod.json')}`);
  });
});

describe('run: what it says about a refused path the command named', () => {
  it('keeps it on one line and sends no escape sequence raw', async () => {
    // Outside the workspace, so refused; printed raw, the name would forge a line of brokered-shell's own.
    const name = 'evil\u001b[2J\nbrokered-shell: approved for this session: write x';
    const script = `{ printf x > "${world.base}/$(printf 'evil\\033[2J\\nbrokered-shell: approved for this session: write x')"; } 2>/dev/null; true`;
    const result = await run(world, script, { session: 'escaped-denial', policy });
    expect(result.status, describeRun(result)).toBe(0);
    expect(result.stderr).not.toMatch(/\u001b/);
    expect(result.stderr).not.toMatch(/^brokered-shell: approved/m);
    expect(result.stderr).toContain(`brokered-shell: denied write ${world.base}/evil\\x1b[2J\\nbrokered-shell: approved for this session: write x: `);
    expect(await nodeState(path.join(world.base, name))).toBeUndefined();
  });
});

describe('run --no-backup', () => {
  it('changes happen, nothing is backed up, and the policy still holds', async () => {
    await writeOld(ws('secret.txt'), 'top secret\n', 0o640);
    await writeOld(ws('one.txt'), 'one\n', 0o640);
    await writeOld(ws('two.txt'), 'two\n', 0o640);
    await writeOld(ws('three.txt'), 'three\n', 0o640);
    const secretState = await nodeState(ws('secret.txt'));
    const script = [ST, 'echo 1 > one.txt; st write', 'rm two.txt; st rm', 'sed -i s/three/3/ three.txt; st sed', 'echo x > secret.txt; st deny'].join('\n');
    const result = await run(world, script, { session: 'no-backup', policy, noBackup: true });
    expect(result.status, describeRun(result)).toBe(0);
    const statuses = caseStatuses(result.out);
    expect([statuses.get('write'), statuses.get('rm'), statuses.get('sed')]).toEqual([0, 0, 0]);
    expect(statuses.get('deny')).toBe(1);

    expect(await fs.readFile(ws('one.txt'), 'utf8')).toBe('1\n');
    expect(await nodeState(ws('two.txt'))).toBeUndefined();
    expect(await fs.readFile(ws('three.txt'), 'utf8')).toBe('3\n');
    expect(await nodeState(ws('secret.txt'))).toEqual(secretState);

    const turns = await turnsOf(world, 'no-backup');
    expect(turns.flatMap((t) => t.files)).toEqual([]);
    expect(result.stderr).not.toMatch(/backed up \d+ file/);
  });
});

describe('run: a backup that cannot be made refuses the change', () => {
  const BIG = 1_500_000;

  it('a file over the size cap (oversize deny, the default) is left untouched and the denial is reported', async () => {
    const capped = path.join(world.base, 'capped.json');
    await fs.writeFile(capped, JSON.stringify({ backup: { fileBackupMaxSizeMB: 1 } }));
    await writeOld(ws('big.bin'), Buffer.alloc(BIG, 7), 0o640);
    await writeOld(ws('small.txt'), 'small\n', 0o640);
    const bigBefore = await nodeState(ws('big.bin'));
    // Changes in place need a copy, which the cap holds back (an rm keeps the file whole instead: run-kept-whole.test.ts).
    const script = [ST, 'echo x > big.bin; st write-big', 'echo z >> big.bin; st append-big', 'echo y > small.txt; st write-small', `${OPEN_ERRNO} big.bin`].join('\n');
    const result = await run(world, script, { session: 'capped', policy: capped });
    expect(result.status, describeRun(result)).toBe(0);
    const statuses = caseStatuses(result.out);
    expect([statuses.get('write-big'), statuses.get('append-big'), statuses.get('write-small')]).toEqual([1, 1, 0]);
    expect(result.out).toContain('errno big.bin 13\n');
    expect(await nodeState(ws('big.bin'))).toEqual(bigBefore);
    expect(await fs.readFile(ws('small.txt'), 'utf8')).toBe('y\n');
    expect(result.stderr).toMatch(new RegExp(`^brokered-shell: denied write ${ws('big.bin')}: .*over the backup cap`, 'm'));
    const turn = await onlyTurn(world, 'capped');
    expect(turn.files.map((f) => f.path)).toEqual([ws('small.txt')]);
  });

  it('with oversize "skip" the change happens and the manifest says the content was not kept', async () => {
    const skip = path.join(world.base, 'skip.json');
    await fs.writeFile(skip, JSON.stringify({ backup: { fileBackupMaxSizeMB: 1, oversize: 'skip' } }));
    await writeOld(ws('big.bin'), Buffer.alloc(BIG, 7), 0o640);
    const result = await run(world, 'echo x > big.bin', { session: 'skip', policy: skip });
    expect(result.status, describeRun(result)).toBe(0);
    expect(await fs.readFile(ws('big.bin'), 'utf8')).toBe('x\n');
    const [entry] = (await onlyTurn(world, 'skip')).files;
    expect(entry).toMatchObject({ path: ws('big.bin'), skipped: 'too-large', sha256: null, size: BIG, mode: 0o640 });
  });

  it('a store that cannot be opened: nothing runs, exit 126 (a store lost mid-turn: test/faults/store-faults.test.ts)', async () => {
    const notADir = path.join(world.base, 'home-is-a-file');
    await fs.writeFile(notADir, 'not a directory\n');
    await writeOld(ws('kept.txt'), 'kept\n', 0o640);
    const before = await nodeState(ws('kept.txt'));
    const script = [ST, 'echo x > kept.txt; st overwrite', 'echo new > fresh.txt; st create', 'exit 5'].join('\n');
    const result = await run(world, script, { session: 'no-store' }, { env: { BROKERED_SHELL_HOME: notADir } });
    expect(result.status, describeRun(result)).toBe(126);
    expect(result.out).toBe('');
    expect(await nodeState(ws('kept.txt'))).toEqual(before);
    await expect(fs.stat(ws('fresh.txt'))).rejects.toThrow(/ENOENT/);
    expect(result.stderr).toBe(`brokered-shell run: the backup store cannot be used, nothing was run: ${notADir} cannot hold the backup store: it is not a directory [BSH_STORE_UNAVAILABLE]\n`);
  });
});
