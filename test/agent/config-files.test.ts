/**
 * An agent that embeds sessions applies the configuration files the way `run` does,
 * through the package's own exports: the project's deny rule holds in the kernel
 * sandbox, and `.brokered-shell.json` cannot be rewritten by the commands it restricts.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig, sessionConfigOf } from '../../src/index.js';
import { makeWorld, openSession, read } from './helpers.js';

describe('configuration files in a library session', () => {
  it('loadConfig + sessionConfigOf: the project rule and the file protection both hold', async () => {
    const world = await makeWorld('config-files');
    const project = path.join(world.ws, '.brokered-shell.json');
    await fs.writeFile(project, JSON.stringify({ fileSafety: { rules: [{ pattern: '*.pem', decision: 'deny' }] } }));
    await fs.writeFile(path.join(world.ws, 'key.pem'), 'key\n');
    const loaded = await loadConfig({ workspace: world.ws, home: world.home });
    const { session } = await openSession(world, { config: sessionConfigOf(loaded) });
    await session.beginTurn({ userMessage: 'try the key and the config' });
    const result = await session.execute('echo evil > key.pem; echo "{}" > .brokered-shell.json; echo ok > notes.txt');
    expect(result.exitCode).toBe(0);
    expect(await read(path.join(world.ws, 'key.pem'))).toBe('key\n');
    expect(JSON.parse(await read(project))).toEqual({ fileSafety: { rules: [{ pattern: '*.pem', decision: 'deny' }] } });
    expect(await read(path.join(world.ws, 'notes.txt'))).toBe('ok\n');
    expect(result.promptBlocks.map((b) => b.path)).toEqual([project]);
  });
});
