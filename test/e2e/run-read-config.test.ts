/**
 * The read policy's configuration through the real CLI, in a fake home: what the runtime
 * cannot enforce is refused at load with its key, the home config removes and adds
 * secrets, a project may only add, `config show` and `doctor` list what is unreadable,
 * and a zero-config `npm install` still works while the token in ~/.npmrc stays unread.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { MARKER, homeEnv, makeFakeHome } from './read-policy-helpers.js';
import { ST, brokeredShell, caseStatuses, describeRun, makeWorld, removeWorld, type CliRun, type World } from './run-helpers.js';

let world: World;
let home: string;
const homeConfig = () => path.join(world.home, 'config.json');
const projectFile = () => path.join(world.ws, '.brokered-shell.json');
const cli = (args: readonly string[], extra: NodeJS.ProcessEnv = {}): Promise<CliRun> => brokeredShell(world, args, homeEnv(home, extra));
const runIn = (script: string, extra: NodeJS.ProcessEnv = {}, flags: readonly string[] = []) => cli(['run', '--workspace', world.ws, ...flags, '--', script], extra);

beforeAll(async () => {
  world = await makeWorld('read-config');
  home = await makeFakeHome(world);
  await fs.writeFile(path.join(home, '.ssh/work-config'), `${MARKER} included by ssh config\n`);
  await fs.mkdir(path.join(home, 'notes'));
  await fs.writeFile(path.join(home, 'notes/diary.txt'), `${MARKER} diary\n`);
});
afterEach(async () => {
  await fs.rm(homeConfig(), { force: true });
  await fs.rm(projectFile(), { force: true });
});
afterAll(() => removeWorld(world));

describe('a read rule the runtime cannot enforce', () => {
  const askRead = { pattern: '.env', access: ['read'], decision: 'prompt' };

  it.each([
    ['the home config', async () => fs.writeFile(homeConfig(), JSON.stringify({ fileSafety: { rules: [askRead] } })), () => homeConfig()],
    ["the project's file", async () => fs.writeFile(projectFile(), JSON.stringify({ fileSafety: { rules: [askRead] } })), () => projectFile()],
  ])('is refused at load in %s, naming its key; nothing runs', async (_label, writeIt, file) => {
    await writeIt();
    const result = await runIn('touch ran');
    expect(result.status).toBe(126);
    expect(result.stderr).toContain(`${file()}:`);
    expect(result.stderr).toMatch(/- fileSafety\.rules\.0\.access: refused: a read cannot be asked about/);
    await expect(fs.lstat(path.join(world.ws, 'ran'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('is refused in a --policy file too', async () => {
    const policy = path.join(world.base, 'policy.json');
    await fs.writeFile(policy, JSON.stringify({ rules: [askRead] }));
    const result = await runIn('touch ran', {}, ['--policy', policy]);
    expect(result.status).toBe(126);
    expect(result.stderr).toMatch(/rules\.0\.access: refused: a read cannot be asked about/);
    await expect(fs.lstat(path.join(world.ws, 'ran'))).rejects.toMatchObject({ code: 'ENOENT' });
  });
});

describe('the secret list in the configuration', () => {
  it('the home config removes a default by name, keeps a path inside one readable, and adds a folder', async () => {
    await fs.writeFile(homeConfig(), JSON.stringify({ secrets: { remove: ['netrc', '~/.ssh/work-config'], add: ['~/notes'] } }));
    const result = await runIn([ST, 'cat ~/.netrc; st netrc', 'cat ~/.ssh/work-config; st work-config', 'cat ~/notes/diary.txt; st notes', 'cat ~/.ssh/id_ed25519; st key'].join('\n'));
    expect(Object.fromEntries(caseStatuses(result.out))).toEqual({ netrc: 0, 'work-config': 0, notes: 1, key: 1 });
    expect(result.out).toContain(`${MARKER} .netrc`);
    expect(result.out).not.toContain('diary');
  });

  it('a project adds one; its remove and defaults are refused by key', async () => {
    await fs.writeFile(projectFile(), JSON.stringify({ secrets: { add: ['~/notes'] } }));
    const added = await runIn('cat ~/notes/diary.txt');
    expect(added.status).toBe(1);
    expect(added.out).not.toContain(MARKER);
    await fs.writeFile(projectFile(), JSON.stringify({ secrets: { remove: ['ssh'], defaults: false } }));
    const refused = await runIn('true');
    expect(refused.status).toBe(126);
    expect(refused.stderr).toMatch(/- secrets\.remove: refused: which of this machine's credentials commands may read is the user's setting/);
    expect(refused.stderr).toMatch(/- secrets\.defaults: refused/);
  });

  it('a project cannot undo what the home config keeps: its add wins over the home\'s remove', async () => {
    await fs.writeFile(homeConfig(), JSON.stringify({ secrets: { remove: ['~/notes'], add: [] } }));
    await fs.writeFile(projectFile(), JSON.stringify({ secrets: { add: ['~/notes'] } }));
    const result = await runIn('cat ~/notes/diary.txt');
    expect(result.status).toBe(1);
    expect(result.out).not.toContain(MARKER);
  });
});

describe('what is unreadable, listed', () => {
  it('config show prints each path and what denies it on stderr', async () => {
    await fs.writeFile(homeConfig(), JSON.stringify({ fileSafety: { rules: [{ pattern: '*.pem', access: ['read'], decision: 'deny' }] } }));
    await fs.writeFile(path.join(world.ws, 'k.pem'), 'k\n');
    const result = await cli(['config', 'show', '--workspace', world.ws]);
    expect(result.status, describeRun(result)).toBe(0);
    const lines = result.stderr.split('\n');
    expect(lines).toContain('brokered-shell: unreadable to commands (the read policy: the store, secrets, fileSafety rules that deny read):');
    expect(lines).toContain(`brokered-shell:   ${path.join(home, '.ssh/id_ed25519')} (the default secret ssh (~/.ssh: ssh's private keys))`);
    expect(lines).toContain(`brokered-shell:   ${path.join(home, '.aws')} (the default secret aws (~/.aws: the AWS CLI's credentials and config))`);
    expect(lines).toContain(`brokered-shell:   ${world.home} (the brokered-shell store (${world.home}))`);
    expect(lines).toContain(`brokered-shell:   ${path.join(world.ws, 'k.pem')} (fileSafety.rules[0] (*.pem))`);
    expect(result.stderr).not.toContain('known_hosts');
    expect(result.stderr).not.toContain(MARKER);
  });

  it('doctor --json lists them, and the read policy check passes over Landlock', async () => {
    const result = await brokeredShell(world, ['doctor', '--json'], { ...homeEnv(home), cwd: world.ws });
    expect(result.status, describeRun(result)).toBe(0);
    const report = JSON.parse(result.out) as { checks: Array<{ name: string; ok: boolean; detail: string }>; unreadable: Array<{ path: string; by: string }> };
    expect(report.checks.find((check) => check.name === 'read policy')).toMatchObject({ ok: true, detail: expect.stringMatching(/^\d+ paths kept from commands' reads, in the kernel \(Landlock\)$/) });
    expect(report.unreadable.map((entry) => entry.path)).toEqual(expect.arrayContaining([path.join(home, '.ssh/id_ed25519'), path.join(home, '.npmrc'), world.home]));
  });
});

describe('npm with no configuration', () => {
  it('installs, with the settings of ~/.npmrc and without its token, which cat cannot read', async () => {
    const cache = path.join(world.base, 'npm-cache');
    await fs.mkdir(cache, { recursive: true });
    await fs.writeFile(path.join(world.ws, 'package.json'), '{"name":"w","version":"1.0.0"}\n');
    const script = [
      ST,
      'cat ~/.npmrc; st cat-npmrc',
      'npm config get fund; st fund',
      'npm config get //registry.npmjs.org/:_authToken; st token',
      'npm install is-number@7.0.0 --no-audit; st install',
    ].join('\n');
    const result = await runIn(script, { npm_config_cache: cache, npm_config_update_notifier: 'false' });
    expect(result.out, describeRun(result)).not.toContain(MARKER);
    expect(result.stderr).not.toContain(MARKER);
    expect(Object.fromEntries(caseStatuses(result.out))).toMatchObject({ 'cat-npmrc': 1, fund: 0, install: 0 });
    // The copy npm reads keeps ~/.npmrc's settings (fund=false there; npm's default is true).
    expect(result.out).toMatch(/^false$/m);
    const installed = JSON.parse(await fs.readFile(path.join(world.ws, 'node_modules/is-number/package.json'), 'utf8')) as { version: string };
    expect(installed.version).toBe('7.0.0');
  }, 180_000);
});
