/**
 * What the session builds on in the modify-backup plugin: the published `backedUp` hook
 * (one call per entry stored, with the request's tool call) and turning backup off
 * without a usable store (so a turn is never left half open).
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { BackupEntry } from '../../src/backup/manifest-schema.js';
import { Broker, ErrorCodes } from '../../src/core/index.js';
import { ModifyBackupPlugin, getModifyBackupHooks, type BackedUpInfo } from '../../src/plugins/modify-backup/index.js';
import { PathResolutionPlugin } from '../../src/plugins/path-resolution/index.js';
import { openTargets } from '../../src/requests/targets.js';
import { allowAll } from '../helpers/bare-broker.js';
import { closeLater, closeOpened } from '../helpers/close-opened.js';
import { tempDir } from '../helpers/serve-process.js';

let base: string;
let ws: string;
beforeEach(() => {
  base = tempDir('bsh-backup-hook-');
  ws = path.join(base, 'ws');
  mkdirSync(ws);
});
afterEach(async () => {
  await closeOpened();
  rmSync(base, { recursive: true, force: true });
});

const write = (file: string, toolCallId?: string) => ({
  origin: 'kernel' as const,
  action: 'check' as const,
  operation: 'open' as const,
  targets: openTargets(file, true),
  sessionId: 's1',
  ...(toolCallId ? { toolCallId } : {}),
});

describe('getModifyBackupHooks(broker).backedUp', () => {
  it('is called once per entry stored, with the tool call, operation, request and turn', async () => {
    const broker = closeLater(new Broker({ sessionId: 's1' })).use(new PathResolutionPlugin(), allowAll(), new ModifyBackupPlugin({ home: path.join(base, 'home') }));
    const seen: Array<[BackupEntry, BackedUpInfo]> = [];
    getModifyBackupHooks(broker).backedUp.tap('test', (entry, info) => void seen.push([entry, info]));
    const file = path.join(ws, 'f.txt');
    writeFileSync(file, 'before');
    const first = await broker.handle(write(file, 'call-1'));
    expect(first.ok).toBe(true);
    // The same path again in the turn: nothing new stored, no call.
    expect((await broker.handle(write(file, 'call-2'))).ok).toBe(true);
    // A file that does not exist: nothing to back up.
    expect((await broker.handle(write(path.join(ws, 'new.txt'), 'call-3'))).ok).toBe(true);
    expect(seen).toHaveLength(1);
    const [entry, info] = seen[0] ?? [];
    expect(entry).toMatchObject({ path: file, operation: 'open', toolCallId: 'call-1' });
    expect(info).toEqual({ turnId: broker.currentTurn?.id, operation: 'open', requestId: first.requestId, origin: 'kernel', toolCallId: 'call-1' });
  });

  it('a listener that throws does not fail the backup or the request', async () => {
    const broker = closeLater(new Broker({ sessionId: 's1' })).use(new PathResolutionPlugin(), allowAll(), new ModifyBackupPlugin({ home: path.join(base, 'home') }));
    getModifyBackupHooks(broker).backedUp.tap('bad', () => {
      throw new Error('listener broke');
    });
    const file = path.join(ws, 'g.txt');
    writeFileSync(file, 'g');
    expect((await broker.handle(write(file))).ok).toBe(true);
  });
});

describe('EnableModifyBackup without a usable store', () => {
  it('enabling fails; disabling succeeds, and then changes proceed without backups', async () => {
    const notADir = path.join(base, 'home-is-a-file');
    writeFileSync(notADir, 'x');
    const broker = closeLater(new Broker({ sessionId: 's1' })).use(new PathResolutionPlugin(), allowAll(), new ModifyBackupPlugin({ home: notADir }));
    const file = path.join(ws, 'f.txt');
    writeFileSync(file, 'before');
    // On (the default) and unusable: refused, closed.
    expect(await broker.handle(write(file))).toMatchObject({ ok: false, error: { code: ErrorCodes.STORE_UNAVAILABLE } });
    expect(await broker.control('EnableModifyBackup', { enabled: true })).toMatchObject({ ok: false, errorCode: ErrorCodes.STORE_UNAVAILABLE });
    expect(await broker.control('EnableModifyBackup', { enabled: false })).toMatchObject({ ok: true, enabled: false, storeAvailable: false });
    expect((await broker.handle(write(file))).ok).toBe(true);
    expect(readFileSync(file, 'utf8')).toBe('before');
    expect(await broker.control('ModifyBackup', { targetPath: file })).toEqual({ ok: true, backedUp: false });
    expect((await broker.control('CommitModifyBackup', { commitMsg: 'off' })).ok).toBe(true);
  });
});
