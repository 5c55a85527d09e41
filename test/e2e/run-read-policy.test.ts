/**
 * The read policy through `brokered-shell run`, on the real kernel sandbox, in a fake
 * home (read-policy-helpers.ts): each default secret unreadable by every spelling, a
 * read-deny rule and a glob enforced, ordinary reads untouched, and the broker refusing
 * what would read, hand over or move a denied path for the command.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FAKE_SECRETS, MARKER, READABLE, homeEnv, makeFakeHome } from './read-policy-helpers.js';
import { runtimeArgs } from './preload-helpers.js';
import { ASK_PY, ST, brokeredShell, caseStatuses, deniedLines, describeRun, makeWorld, removeWorld, type CliRun, type World } from './run-helpers.js';

let world: World;
let home: string;
const RULES = { fileSafety: { rules: [{ pattern: '.env', access: ['read'], decision: 'deny' }, { pattern: '*.pem', access: ['read'], decision: 'deny' }] } };
const SPELLINGS = ['cat', 'python', 'cp', 'link', 'proc-root', 'busybox'] as const;

/** One line per secret and spelling, each reporting its status as `@@<spelling>:<name> N`. */
function everySpelling(name: string, file: string): string[] {
  const link = `link-${name}`;
  return [
    `cat '${file}'; st cat:${name}`,
    `python3 -c "import sys; sys.stdout.write(open('${file}').read())" 2>/dev/null; st python:${name}`,
    `cp '${file}' "$TMPDIR/${name}" 2>/dev/null; st cp:${name}`,
    `ln -s '${file}' ${link} && cat ${link}; st link:${name}`,
    `cat '/proc/self/root${file}'; st proc-root:${name}`,
    `busybox cat '${file}'; st busybox:${name}`,
  ];
}

function cli(args: readonly string[], extra: NodeJS.ProcessEnv = {}): Promise<CliRun> {
  return brokeredShell(world, args, homeEnv(home, extra));
}

const runIn = (script: string, runtime: 'seccomp' | 'preload' = 'seccomp') => cli(['run', ...runtimeArgs(world, runtime), '--workspace', world.ws, '--', script]);

beforeAll(async () => {
  world = await makeWorld('read-policy');
  home = await makeFakeHome(world);
  await fs.writeFile(path.join(world.home, 'config.json'), JSON.stringify(RULES));
  await fs.writeFile(path.join(world.ws, '.env'), `TOKEN=${MARKER}\n`);
  await fs.mkdir(path.join(world.ws, 'sub/deep'), { recursive: true });
  await fs.writeFile(path.join(world.ws, 'sub/deep/key.pem'), `${MARKER} pem\n`);
  await fs.writeFile(path.join(world.ws, 'sub/notes.txt'), 'notes\n');
  // A link placed before the command, in the workspace, to a key outside it.
  await fs.symlink(path.join(home, '.ssh/id_ed25519'), path.join(world.ws, 'planted-link'));
  await fs.writeFile(path.join(world.tools, 'ops.py'), `import os, sys\nsys.argv[1:] = [a.replace('@SESSION@', os.environ['BROKERED_SHELL_SESSION_ID']).replace('@CALL@', os.environ['BROKERED_SHELL_TOOL_CALL_ID']) for a in sys.argv[1:]]\n${ASK_PY}`);
}, 60_000);
afterAll(() => removeWorld(world));

describe.each(['seccomp', 'preload'] as const)('every default secret, in the %s runtime', (runtime) => {
  let result: CliRun;
  beforeAll(async () => {
    const lines = FAKE_SECRETS.flatMap(([name, relative]) => everySpelling(name, path.join(home, relative)));
    result = await runIn([ST, `cd "$(mktemp -d -p "$TMPDIR")"`, ...lines, 'cat "$OLDPWD/planted-link"; st planted'].join('\n'), runtime);
  }, 120_000);

  it('is unreadable by cat, python, cp, a symlink the command makes, /proc/self/root and static busybox', () => {
    expect(result.out, describeRun(result)).not.toContain(MARKER);
    const statuses = caseStatuses(result.out);
    const expected = FAKE_SECRETS.flatMap(([name]) => SPELLINGS.map((spelling) => `${spelling}:${name}`));
    expect([...statuses.keys()].sort()).toEqual([...expected, 'planted'].sort());
    for (const [which, status] of statuses) expect(status, which).not.toBe(0);
    expect(result.stderr).toMatch(/id_ed25519: Permission denied/);
  });

  it('a link planted in the workspace reads nothing either', () => {
    expect(caseStatuses(result.out).get('planted')).toBe(1);
  });
});

describe('ordinary reads', () => {
  it('the workspace, the fake home beside its secrets, ~/.profile and the toolchains read as without a read policy', async () => {
    const readable = READABLE.map((relative) => `cat ~/${relative}`).join(' && ');
    const result = await runIn(`${readable} && cat sub/notes.txt && grep -r notes sub --exclude='*.pem' && python3 -c 'import json; print(json.dumps([1]))' && node -e 'console.log(2)' && ls -A ~/.ssh | sort | tr '\\n' ' '`);
    expect(result.status, describeRun(result)).toBe(0);
    const lines = result.out.split('\n');
    for (const relative of READABLE) expect(lines).toContain(`readable ${relative}`);
    expect(result.out).toContain('notes\nsub/notes.txt:notes\n[1]\n2\n');
    // Names stay visible; the private key is listed, not read.
    expect(result.out).toContain('config id_ed25519 id_ed25519.pub known_hosts ');
    expect(deniedLines(result.stderr)).toEqual([]);
  });
});

describe('read rules', () => {
  let result: CliRun;
  let envBefore: string;
  beforeAll(async () => {
    envBefore = await fs.readFile(path.join(world.ws, '.env'), 'utf8');
    const ws = world.ws;
    const ops = [
      `brokered-shell.read\t${ws}/.env\t@SESSION@\t@CALL@`,
      `brokered-shell.read-write\t${ws}/.env\t@SESSION@\t@CALL@`,
      `brokered-shell.read\t${ws}/sub/notes.txt\t@SESSION@\t@CALL@`,
      JSON.stringify({ command: 'HostFileOperation', operation: 'copy', from: `${ws}/.env`, to: `${ws}/copied-env`, sessionId: '@SESSION@' }),
      JSON.stringify({ command: 'HostFileOperation', operation: 'link', from: `${home}/.ssh/id_ed25519`, to: `${ws}/linked-key`, sessionId: '@SESSION@' }),
      JSON.stringify({ command: 'HostFileOperation', operation: 'copy', from: `${ws}/sub`, to: `${ws}/sub-copy`, recursive: true, sessionId: '@SESSION@' }),
    ].map((line) => `'${line}'`);
    const script = [
      ST,
      'cat .env; st cat-env',
      'cat sub/deep/key.pem; st cat-pem',
      'busybox cat sub/deep/key.pem; st busybox-pem',
      'ln .env sub/env-link; st hard-link',
      'mv .env sub/moved-env; st rename',
      'mv sub/deep sub/elsewhere; st rename-holder',
      `python3 -c "open('.env', 'r+').read()" 2>/dev/null; st open-rw`,
      'echo APPENDED >> .env; st append',
      `python3 "$TOOLS/ops.py" ${ops.join(' ')}`,
    ].join('\n');
    result = await runIn(script);
  }, 120_000);

  it('a read-deny rule and a glob: unreadable in the kernel, by a static program too', () => {
    const statuses = caseStatuses(result.out);
    for (const name of ['cat-env', 'cat-pem', 'busybox-pem']) expect(statuses.get(name), name).toBe(1);
    expect(result.out).not.toContain(MARKER);
  });

  it('a hard link, a rename (of the file or a folder holding one) and a read-write open are refused by the broker, naming the rule', () => {
    const statuses = caseStatuses(result.out);
    for (const name of ['hard-link', 'rename', 'rename-holder', 'open-rw']) expect(statuses.get(name), name).toBe(1);
    expect(result.stderr).toMatch(/brokered-shell: denied write .*sub\/env-link: .*\.env may not be read: fileSafety\.rules\[0\] \(\.env\)/);
    expect(result.stderr).toMatch(/brokered-shell: denied delete .*sub\/deep: .*sub\/deep holds .*key\.pem, which may not be read \(a rename would take it/);
  });

  it('a write-only open still writes (the write policy decides it), and the file is where it was', async () => {
    expect(caseStatuses(result.out).get('append')).toBe(0);
    expect(await fs.readFile(path.join(world.ws, '.env'), 'utf8')).toBe(`${envBefore}APPENDED\n`);
    for (const gone of ['sub/env-link', 'sub/moved-env', 'sub/elsewhere', 'copied-env', 'linked-key']) {
      await expect(fs.lstat(path.join(world.ws, gone)), gone).rejects.toMatchObject({ code: 'ENOENT' });
    }
  });

  it('the text-token .read class answers DENY for a denied read, SANDBOX for another; host copy and link of one are refused', () => {
    const answers = [...result.out.matchAll(/^answer (.*)$/gm)].map((m) => m[1] ?? '');
    expect(answers.slice(0, 3)).toEqual(['DENY', 'DENY', 'SANDBOX']);
    const [copy, link, tree] = answers.slice(3).map((line) => JSON.parse(line) as { ok: boolean; decision: string; error?: string });
    expect(copy).toMatchObject({ ok: false, decision: 'deny' });
    // A read of what a read rule names is that rule's own denial (file-safety's rules stage).
    expect(copy?.error).toMatch(/\.env matches rule \.env \(deny for read\)/);
    expect(link).toMatchObject({ ok: false, decision: 'deny' });
    expect(tree).toMatchObject({ ok: false, decision: 'deny' });
    expect(tree?.error).toMatch(/holds .*key\.pem/);
  });
});

describe("the broker's store", () => {
  it('is unreadable, backups of a denied file included, and run names the path a failed command spelled', async () => {
    // The turn above backed .env up before the append: its blob is in the store now.
    const result = await runIn(`grep -r TOKEN ${world.home}; st=$?; cat "$BROKERED_SHELL_HOME/config.json"; exit $st`);
    expect(result.status).not.toBe(0);
    expect(result.out).not.toContain(MARKER);
    expect(result.stderr).toMatch(/Permission denied/);
    const note = `brokered-shell: note: ${world.home} may not be read in the sandbox (the brokered-shell store (${world.home})); nothing allows it`;
    expect(result.stderr.split('\n')).toContain(`${note}: it holds the backups of what commands changed`);
  });
});
