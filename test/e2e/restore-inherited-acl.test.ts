/**
 * A restore makes each file afresh beside its place, and a fresh file inherits its
 * directory's default ACL. A command that put a default ACL granting another user on the
 * directory (in the restored turn or a later one) would then have the person's restore
 * hand that user the file the turn had changed. Restored files and special files carry
 * exactly the xattrs recorded for them: here none, so no ACL, and their exact mode.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { nativeMetadataOps } from '../../src/native/metadata-ops.js';
import { describeRun, makeWorld, onlyTurn, removeWorld, restoreTurn, run, writeOld, type World } from './run-helpers.js';

let world: World | undefined;
afterEach(() => removeWorld(world));

/** A default ACL: owner rwx, user 65534 rwx, group rwx, mask rwx, others nothing (the kernel's binary form). */
const SET_DEFAULT_ACL = `python3 -c "
import os, struct, sys
entries = [(1, 7, 0xffffffff), (2, 7, 65534), (4, 7, 0xffffffff), (0x10, 7, 0xffffffff), (0x20, 0, 0xffffffff)]
acl = struct.pack('<I', 2) + b''.join(struct.pack('<HHI', *e) for e in entries)
os.setxattr(sys.argv[1], 'system.posix_acl_default', acl)
"`;

const xattrNames = (file: string) => nativeMetadataOps().xattrs?.list(file) ?? [];

describe('restore under a directory given a default ACL', () => {
  it('puts a file and a FIFO back with no ACL and their exact modes', async () => {
    world = await makeWorld('restore-acl');
    const dir = path.join(world.ws, 'd');
    await fs.mkdir(dir);
    const secret = path.join(dir, 'secret');
    const fifo = path.join(dir, 'fifo');
    await writeOld(secret, 'top secret\n', 0o640);
    execFileSync('mkfifo', ['-m', '0600', fifo]);
    const result = await run(world, `echo changed > d/secret && rm d/fifo && ${SET_DEFAULT_ACL} d`, { session: 'acl' });
    expect(result.status, describeRun(result)).toBe(0);
    expect(xattrNames(dir)).toContain('system.posix_acl_default');
    // Only these two paths: the directory keeps its ACL, as when a later turn had planted it.
    const turn = await onlyTurn(world, 'acl');
    const restored = await restoreTurn(world, turn.id, [secret, fifo]);
    expect(restored.status, describeRun(restored)).toBe(0);
    expect(await fs.readFile(secret, 'utf8')).toBe('top secret\n');
    expect(xattrNames(secret)).toEqual([]);
    expect((await fs.stat(secret)).mode & 0o7777).toBe(0o640);
    expect((await fs.lstat(fifo)).isFIFO()).toBe(true);
    expect(xattrNames(fifo)).toEqual([]);
    expect((await fs.lstat(fifo)).mode & 0o7777).toBe(0o600);
  });
});
