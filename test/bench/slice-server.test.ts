import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ask } from '../helpers/serve-process.js';
import { SLICE_SESSION, serveSlice } from '../../bench/lib/slice-server.js';
import { SLICES } from '../../bench/lib/slices.js';

describe('socket slice servers (bench/socket-slices.ts)', () => {
  const dir = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'bsh-slice-server-test-')));
  const workspace = path.join(dir, 'workspace');
  mkdirSync(workspace);
  const file = path.join(workspace, 'read.txt');
  writeFileSync(file, 'x\n');
  const sockets = path.join(dir, 'sockets');
  mkdirSync(sockets);
  const outside = path.join(dir, 'outside.txt');
  writeFileSync(outside, 'y\n');
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  for (const slice of SLICES) {
    it(`${slice.id}: a read and a write of a workspace file are answered SANDBOX; a write outside the workspace only when no policy plugin is in the slice`, async () => {
      const socketPath = path.join(sockets, `${slice.id}.sock`);
      const server = await serveSlice(socketPath, slice.id, path.join(dir, 'home'), workspace);
      try {
        expect(await ask(socketPath, `sandbox.read\t${file}\t${SLICE_SESSION}\ttc0`)).toBe('SANDBOX');
        expect(await ask(socketPath, `sandbox.read-write\t${file}\t${SLICE_SESSION}\ttc2`)).toBe('SANDBOX');
        const write = await ask(socketPath, `sandbox.read-write\t${outside}\t${SLICE_SESSION}\ttc1`);
        const judged = !['core', 'resolution'].includes(slice.id);
        expect(write === 'SANDBOX').toBe(!judged);
      } finally {
        await server.close();
      }
    });
  }

  it('an unknown slice is refused with the names of the real ones', async () => {
    await expect(serveSlice(path.join(sockets, 'x.sock'), 'nope', path.join(dir, 'home'), workspace)).rejects.toThrow(/no slice nope; the slices are core, resolution/);
  });
});
