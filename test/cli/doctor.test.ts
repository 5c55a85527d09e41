import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { cli, cliJson, tempDir } from './helpers.js';

interface Check {
  name: string;
  ok: boolean;
  detail: string;
  required: boolean;
}
interface Report {
  ok: boolean;
  runtime: string;
  kernel?: { landlockAbi: number; seccompUserNotif: boolean };
  checks: Check[];
}

const REQUIRED = ['landlock', 'seccomp user notification', 'seccomp ADDFD_FLAG_SEND', 'seccomp WAIT_KILLABLE_RECV'];

describe('doctor', () => {
  it('--json: ok on this machine, runtime seccomp, every kernel check present and passing', async () => {
    const home = await tempDir('bsh-cli-home-');
    const { status, json, stderr } = cliJson<Report>(['doctor', '--json'], { home });
    expect(stderr).toBe('');
    expect(status).toBe(0);
    expect(json.ok).toBe(true);
    expect(json.runtime).toBe('seccomp');
    for (const name of REQUIRED) {
      expect(json.checks.find((c) => c.name === name), name).toMatchObject({ ok: true, required: true });
    }
    expect(json.checks.find((c) => c.name === 'landlock')?.detail).toMatch(/^ABI [6-9]\d* \(need 6\)$/);
    expect(json.kernel?.landlockAbi).toBeGreaterThanOrEqual(6);
    expect(json.kernel?.seccompUserNotif).toBe(true);
    expect(json.checks.find((c) => c.name === 'backup store')).toEqual({ name: 'backup store', ok: true, detail: `${home} writable`, required: false });
  });

  it('--json says what of the network policy works here: the DNS proxy listens, and the preload runtime cannot hold a policy', async () => {
    const { json } = cliJson<Report>(['doctor', '--json'], { home: await tempDir('bsh-cli-home-') });
    expect(json.checks.find((c) => c.name === 'network: DNS proxy on 127.0.0.1')).toEqual({ name: 'network: DNS proxy on 127.0.0.1', ok: true, detail: 'UDP and TCP listen', required: false });
    expect(json.checks.find((c) => c.name === 'network: fast supervisor wake-up')).toMatchObject({ ok: true, required: false });
    expect(json.checks.find((c) => c.name === 'network: preload runtime')).toEqual({
      name: 'network: preload runtime',
      ok: false,
      detail: 'governs no connection: it starts only with network.mode "open"',
      required: false,
    });
  });

  it('human output: one line per check and the runtime, exit 0', async () => {
    const result = cli(['doctor'], { home: await tempDir('bsh-cli-home-') });
    expect(result.status).toBe(0);
    const lines = result.stdout.trimEnd().split('\n');
    for (const name of REQUIRED) expect(lines.some((l) => new RegExp(`^ok\\s+${name}\\s{2,}\\S`).test(l)), name).toBe(true);
    expect(lines.at(-1)).toBe('runtime: seccomp (Landlock + seccomp user notification)');
  });

  it('a home not created yet is fine; a home that is a regular file is reported (not required)', async () => {
    const base = await tempDir('bsh-cli-home-');
    const later = path.join(base, 'later', 'home');
    const fresh = cliJson<Report>(['doctor', '--json'], { home: later });
    expect(fresh.json.checks.find((c) => c.name === 'backup store')).toMatchObject({ ok: true, detail: `${later} (created on first use)` });
    await fs.mkdir(path.join(base, 'later'));
    expect(await fs.readdir(path.join(base, 'later'))).toEqual([]);

    const file = path.join(base, 'a-file');
    await fs.writeFile(file, '');
    const broken = cliJson<Report>(['doctor', '--json'], { home: file });
    expect(broken.status).toBe(0);
    expect(broken.json.checks.find((c) => c.name === 'backup store')).toEqual({
      name: 'backup store',
      ok: false,
      detail: `${file} is not a directory`,
      required: false,
    });
    const human = cli(['doctor'], { home: file });
    expect(human.stdout).toMatch(new RegExp(`^warn\\s+backup store\\s+${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} is not a directory$`, 'm'));
  });

  it('says whether the store can keep files whole for the workspace it runs from: the same file system, or copies', async () => {
    const home = await tempDir('bsh-cli-home-');
    const ws = await tempDir('bsh-cli-ws-');
    const same = cliJson<Report>(['doctor', '--json'], { home, cwd: ws });
    expect(same.json.checks.find((c) => c.name === 'backup store placement')).toMatchObject({
      ok: true,
      required: false,
      detail: expect.stringMatching(new RegExp(`^on the file system of ${ws}: files a change removes are moved into the store; files changed in place are (cloned|copied)`)),
    });
    const shm = await fs.mkdtemp('/dev/shm/bsh-cli-ws-');
    try {
      const other = cliJson<Report>(['doctor', '--json'], { home, cwd: shm });
      expect(other.status).toBe(0);
      expect(other.json.checks.find((c) => c.name === 'backup store placement')).toEqual({
        name: 'backup store placement',
        ok: false,
        required: false,
        detail: `on another file system than ${shm}: files a change removes are copied into the store instead of moved, and held to the size cap`,
      });
    } finally {
      await fs.rm(shm, { recursive: true, force: true });
    }
  });
});
