import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { HOME_CONFIG_FILE, PROJECT_CONFIG_FILE, configJsonSchema, defaultConfig, loadConfig } from '../../src/config/index.js';
import { REPO_ROOT } from '../helpers/serve-process.js';

let base: string;
let home: string;
let ws: string;
beforeEach(() => {
  base = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'bsh-config-schema-')));
  home = path.join(base, 'home');
  ws = path.join(base, 'ws');
  mkdirSync(home);
  mkdirSync(ws);
});
afterEach(() => rmSync(base, { recursive: true, force: true }));

describe('"$schema" in the configuration files', () => {
  it('is accepted in the home config and in the project file, and changes nothing', async () => {
    writeFileSync(path.join(home, HOME_CONFIG_FILE), JSON.stringify({ $schema: './node_modules/brokered-shell/dist/config.schema.json', fileBackup: { maxSizeMB: 5 } }));
    writeFileSync(path.join(ws, PROJECT_CONFIG_FILE), JSON.stringify({ $schema: './node_modules/brokered-shell/dist/project-config.schema.json', fileBackup: { oversize: 'deny' } }));
    const loaded = await loadConfig({ workspace: ws, home });
    expect(loaded.config).toEqual({ ...defaultConfig(), fileBackup: { ...defaultConfig().fileBackup, maxSizeMB: 5, oversize: 'deny' } });
    expect('$schema' in loaded.config).toBe(false);
  });

  it('must still be a string', async () => {
    writeFileSync(path.join(ws, PROJECT_CONFIG_FILE), JSON.stringify({ $schema: 7 }));
    await expect(loadConfig({ workspace: ws, home })).rejects.toThrow(/\$schema/);
  });
});

describe('the JSON Schemas shipped in dist/', () => {
  it('toolchain/config-schema.mjs writes both, the home one equal to `config schema`', () => {
    const result = spawnSync(process.execPath, [path.join(REPO_ROOT, 'toolchain', 'config-schema.mjs')], { encoding: 'utf8' });
    expect(result.status, result.stderr).toBe(0);
    const homeSchema = JSON.parse(readFileSync(path.join(REPO_ROOT, 'dist', 'config.schema.json'), 'utf8')) as Record<string, unknown>;
    expect(homeSchema).toEqual(configJsonSchema());
    expect(homeSchema.properties).toHaveProperty('$schema');
    const projectSchema = JSON.parse(readFileSync(path.join(REPO_ROOT, 'dist', 'project-config.schema.json'), 'utf8')) as { title: string; properties: Record<string, unknown> };
    expect(projectSchema.title).toBe('brokered-shell project configuration');
    // A refused key is one no value satisfies: an editor flags it.
    expect(projectSchema.properties.writableRoots).toEqual({ not: {} });
    expect(projectSchema.properties).toHaveProperty('$schema');
  });
});
