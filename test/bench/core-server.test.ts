import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ask } from '../helpers/serve-process.js';
import { CORE_SESSION, serveCore } from '../../bench/lib/core-server.js';

describe('core-only socket server (the socket row floor)', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bsh-core-server-test-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("answers through the product's own text protocol and core, every valid request allowed", async () => {
    const socketPath = path.join(dir, 'core.sock');
    const server = await serveCore(socketPath, CORE_SESSION);
    try {
      expect(await ask(socketPath, `sandbox.read\t/any/where.txt\t${CORE_SESSION}\ttc0`)).toBe('SANDBOX');
      expect(await ask(socketPath, `sandbox.read-write\t/any/where.txt\t${CORE_SESSION}\ttc1`)).toBe('SANDBOX');
      // The line protocol and the core's request schema still refuse what they refuse.
      expect(await ask(socketPath, `sandbox.read\trelative.txt\t${CORE_SESSION}\ttc2`)).toBe('DENY');
      expect(await ask(socketPath, `sandbox.read\t/a\0b\t${CORE_SESSION}\ttc3`)).toBe('DENY');
    } finally {
      await server.close();
    }
  });
});
