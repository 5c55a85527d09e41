/**
 * The launcher's read policy (--deny-read, native/sandbox/read-allow.c) on the real
 * kernel: a denied path is unreadable however a program names it, everything else reads
 * as it would without the policy, and no read reaches the broker. A fake home per test; no
 * real secret is read.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createFakeBroker, removeDir, runBash, runSandboxed, tempDir, type FakeBroker } from '../fixtures/sandbox/harness.js';
import { ST, caseStatuses } from './run-helpers.js';

let base: string;
let home: string;
let ws: string;
let scratch: string;
let broker: FakeBroker;
const at = (relative: string) => path.join(base, relative);

function write(relative: string, content: string, mode = 0o600): string {
  const file = at(relative);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, content, { mode });
  return file;
}

beforeEach(() => {
  base = tempDir('read-policy');
  home = at('home');
  ws = at('ws');
  scratch = tempDir('read-policy-scratch');
  write('home/.ssh/id_ed25519', 'FAKE-PRIVATE-KEY\n');
  write('home/.profile', 'profile line\n', 0o644);
  write('ws/.env', 'FAKE_TOKEN=1\n');
  write('ws/src/app.txt', 'app code\n', 0o644);
  write('ws/secret.sh', 'echo ran the secret script\n', 0o755);
  fs.symlinkSync(at('home/.ssh/id_ed25519'), at('ws/key-link'));
  broker = createFakeBroker(ws);
});
afterEach(() => {
  removeDir(base);
  removeDir(scratch);
});

const denied = () => [at('home/.ssh/id_ed25519'), at('ws/.env'), at('ws/secret.sh')];
const bash = (script: string, readDenied = denied()) => runBash(script, { cwd: ws, broker, scratch: [scratch], readDenied, env: { HOME: home, KEY: at('home/.ssh/id_ed25519') } });

describe('a denied path is unreadable, however it is spelled', () => {
  it('cat, python, cp, a symlink in the workspace, /proc/self/root, a dirfd, an O_PATH reopen, a redirection, static busybox', async () => {
    const script = [
      ST,
      'cat "$KEY"; st cat',
      'python3 -c "open(\'$KEY\').read()" 2>/dev/null; st python',
      'cp "$KEY" "$TMPDIR/stolen"; st cp',
      'cat key-link; st symlink',
      'cat "/proc/self/root$KEY"; st proc-root',
      'python3 -c "import os; d = os.open(os.path.dirname(\'$KEY\'), os.O_RDONLY); os.read(os.open(\'id_ed25519\', os.O_RDONLY, dir_fd=d), 99)" 2>/dev/null; st dirfd',
      'python3 -c "import os; p = os.open(\'$KEY\', os.O_PATH); os.read(os.open(\'/proc/self/fd/%d\' % p, os.O_RDONLY), 99)" 2>/dev/null; st o-path',
      'read line < "$KEY"; st redirect',
      'busybox cat "$KEY"; st busybox',
      'busybox sh -c "cat /proc/self/root$KEY"; st busybox-proc-root',
      'cat .env; st rule',
    ].join('\n');
    const result = await bash(script);
    expect(result.stdout).not.toMatch(/FAKE/);
    const statuses = caseStatuses(result.stdout);
    expect(statuses.size).toBe(11);
    for (const [name, status] of statuses) expect(status, name).not.toBe(0);
    expect(fs.existsSync(path.join(scratch, 'stolen'))).toBe(false);
    expect(result.stderr).toMatch(/cat: .*id_ed25519: Permission denied/);
    expect(broker.requests).toEqual([]);
  });

  it('may not be run either: executed, sourced or loaded by ld.so', async () => {
    const result = await bash([ST, './secret.sh; st exec', 'bash secret.sh; st bash', '. ./secret.sh; st source', '/lib64/ld-linux-x86-64.so.2 ./secret.sh; st ld.so'].join('\n'));
    expect(result.stdout).not.toMatch(/ran the secret script/);
    for (const [name, status] of caseStatuses(result.stdout)) expect(status, name).not.toBe(0);
  });

  it('names stay visible: listing the folder above it, and the folder itself, works', async () => {
    const result = await bash('ls -A ~/.ssh; ls -A ~ | sort | tr "\\n" " "', [at('home/.ssh')]);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toBe('id_ed25519\n.profile .ssh ');
  });
});

describe('everything else reads as without a read policy', () => {
  it('the workspace, ~/.profile, the toolchains and the temp dir, with no request to the broker', async () => {
    const script = [
      'cat src/app.txt ~/.profile',
      'python3 -c "import json, sqlite3; print(json.dumps(1))"',
      'node -e "console.log(require(\'node:path\').sep)"',
      'echo t > "$TMPDIR/t" && cat "$TMPDIR/t"',
      'grep -r code src',
    ].join(' && ');
    const result = await bash(script);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toBe('app code\nprofile line\n1\n/\nt\nsrc/app.txt:app code\n');
    expect(broker.requests).toEqual([]);
  });

  it('a denied path that is not there: nothing to keep, everything reads', async () => {
    const result = await bash('cat src/app.txt', [at('home/.aws'), at('ws/missing/.env')]);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toBe('app code\n');
  });
});

describe('entries made during the command', () => {
  it('in a folder above a denied path: unreadable until the next command; in a folder beside it: readable', async () => {
    const first = await bash([ST, 'echo new > top.txt; st made-top', 'cat top.txt; st read-top', 'echo sub > src/new.txt; st made-sub', 'cat src/new.txt; st read-sub'].join('\n'));
    expect(Object.fromEntries(caseStatuses(first.stdout))).toEqual({ 'made-top': 0, 'read-top': 1, 'made-sub': 0, 'read-sub': 0 });
    expect(first.stdout).toContain('sub\n');
    const next = await bash('cat top.txt');
    expect(next.code, next.stderr).toBe(0);
    expect(next.stdout).toBe('new\n');
  });

  it('a hard link the supervisor makes beside a denied file is another name for the same unreadable file', async () => {
    const result = await bash([ST, 'ln .env alias; st link', 'cat alias; st read'].join('\n'));
    expect(Object.fromEntries(caseStatuses(result.stdout))).toEqual({ link: 0, read: 1 });
    expect(result.stdout).not.toMatch(/FAKE/);
  });
});

describe('what the launcher refuses', () => {
  const launch = (readDenied: string[]) => runSandboxed(['true'], { cwd: ws, broker, scratch: [scratch], readDenied });

  it.each([
    ['/', /would deny reading everything/],
    ['relative/path', /must be an absolute path/],
  ])('--deny-read %s: 126, nothing ran', async (arg, message) => {
    const result = await launch([arg]);
    expect(result.code).toBe(126);
    expect(result.stderr).toMatch(message);
  });

  it('more Landlock rules than the limit: 126, naming the folder', async () => {
    const crowded = at('crowded');
    fs.mkdirSync(crowded);
    for (let i = 0; i <= 20_000; i += 1) fs.writeFileSync(path.join(crowded, `f${i}`), '');
    const result = await launch([path.join(crowded, 'f0')]);
    expect(result.code).toBe(126);
    expect(result.stderr).toMatch(new RegExp(`the read policy needs more than 20000 Landlock rules .*${crowded} gave`));
  }, 60_000);
});
