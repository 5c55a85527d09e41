import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { cli, tempDir } from '../cli/helpers.js';

// The real CLI process (dist/, built with `npx tsc -p tsconfig.build.json`).

describe('brokered-shell config', () => {
  it('schema prints the JSON Schema of the configuration', async () => {
    const result = cli(['config', 'schema'], { home: await tempDir('bsh-config-cli-') });
    expect(result.status).toBe(0);
    expect(result.stderr).toBe('');
    const schema = JSON.parse(result.stdout) as { $schema: string; type: string; properties: Record<string, unknown>; additionalProperties: boolean };
    expect(schema.$schema).toMatch(/json-schema\.org/);
    expect(schema).toMatchObject({ type: 'object', additionalProperties: false });
    expect(Object.keys(schema.properties).sort()).toEqual(['$schema', 'approvalTimeoutSeconds', 'approvals', 'cacheRoots', 'fileBackup', 'fileSafety', 'network', 'sandbox', 'secrets', 'writableRoots']);
  });

  it('show prints the effective configuration of a workspace, and says which files it read', async () => {
    const home = await tempDir('bsh-config-cli-');
    const ws = path.join(home, 'ws');
    mkdirSync(ws);
    writeFileSync(path.join(home, 'config.json'), JSON.stringify({ writableRoots: ['/opt/cache'], fileBackup: { enabled: false } }));
    writeFileSync(path.join(ws, '.brokered-shell.json'), JSON.stringify({ fileBackup: { enabled: true }, fileSafety: { rules: [{ pattern: '*.pem', decision: 'deny' }] } }));
    const result = cli(['config', 'show', '--workspace', ws], { home });
    expect(result.status).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual({
      sandbox: { enabled: true, excludedCommands: [], runtime: 'auto', unixSockets: [] },
      writableRoots: ['/opt/cache'],
      cacheRoots: { defaults: true, add: [], remove: [] },
      fileBackup: { enabled: true, maxSizeMB: 10, oversize: 'deny', durability: 'turn' },
      fileSafety: { rules: [{ pattern: '*.pem', decision: 'deny' }], outsideRoots: 'deny' },
      secrets: { defaults: true, add: [], remove: [] },
      network: { mode: 'allowlist', allow: [], deny: [] },
      approvals: 'inline',
      approvalTimeoutSeconds: 300,
    });
    expect(result.stderr).toContain(path.join(home, 'config.json'));
    expect(result.stderr).toContain(path.join(ws, '.brokered-shell.json'));
  });

  it('show lists the effective cache roots: the defaults present here, less those removed, plus those added', async () => {
    const home = await tempDir('bsh-config-cli-');
    const npm = path.join(home, 'npm-cache');
    const xdg = path.join(home, 'xdg-cache');
    mkdirSync(npm);
    mkdirSync(xdg);
    writeFileSync(path.join(home, 'config.json'), JSON.stringify({ cacheRoots: { add: ['/srv/ci-cache'], remove: ['xdg-cache'] } }));
    const result = cli(['config', 'show', '--workspace', home], { home, env: { HOME: home, npm_config_cache: npm, XDG_CACHE_HOME: xdg } });
    expect(result.status).toBe(0);
    const lines = result.stderr.split('\n');
    expect(lines).toContain('brokered-shell: cache roots, changed without a question or a backup (cacheRoots):');
    expect(lines).toContain(`brokered-shell:   ${npm} (npm)`);
    expect(lines).toContain('brokered-shell:   /srv/ci-cache (added)');
    expect(lines).toContain(`brokered-shell:   ${npm}/_npx (npx runs the packages it installed there as they are)`);
    expect(result.stderr).not.toContain(`${xdg} (`);
    expect(JSON.parse(result.stdout)).toMatchObject({ cacheRoots: { defaults: true, add: ['/srv/ci-cache'], remove: ['xdg-cache'] } });
  });

  it("show lists what the network allows by default: the registry the user's npm is set to, the repository's remotes", async () => {
    const home = await tempDir('bsh-config-cli-');
    const bin = path.join(home, 'bin');
    mkdirSync(bin);
    writeFileSync(path.join(bin, 'npm'), '', { mode: 0o755 });
    writeFileSync(path.join(home, '.npmrc'), 'registry=https://npm.corp.example/\n');
    mkdirSync(path.join(home, '.git'));
    writeFileSync(path.join(home, '.git', 'config'), '[remote "origin"]\n\turl = git@git.corp.example:team/repo.git\n');
    // npm run by the test runner sets these for its children; the user's own config is what counts here.
    const npmEnv = { npm_config_registry: '', npm_config_userconfig: path.join(home, '.npmrc'), npm_config_globalconfig: path.join(home, 'none') };
    const result = cli(['config', 'show', '--workspace', home], { home, env: { HOME: home, PATH: `${bin}:/usr/bin:/bin`, ...npmEnv } });
    expect(result.status).toBe(0);
    const lines = result.stderr.split('\n');
    expect(lines).toContain('brokered-shell: network allowed by default (network.mode allowlist):');
    expect(lines).toContain(`brokered-shell:   npm.corp.example:443 (npm registry (user config ${path.join(home, '.npmrc')}))`);
    expect(lines).toContain(`brokered-shell:   git.corp.example:22 (git remote origin (${path.join(home, '.git', 'config')}))`);
  });

  it('show fails with status 1 and the friendly message when a file is invalid', async () => {
    const home = await tempDir('bsh-config-cli-');
    writeFileSync(path.join(home, '.brokered-shell.json'), JSON.stringify({ writableRoots: ['/'] }));
    const result = cli(['config', 'show', '--workspace', home], { home });
    expect(result.status).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain(`${path.join(home, '.brokered-shell.json')}:\n    - writableRoots: refused: a repository may not make more paths writable`);
    expect(result.stderr).toContain('[BSH_INVALID_OPTIONS]');
  });
});
