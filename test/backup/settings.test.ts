import { describe, expect, it } from 'vitest';
import {
  DEFAULT_BACKUP_SETTINGS,
  FILE_BACKUP_MAX_SIZE_MB,
  maxBytesOf,
  normaliseBackupSettings,
  normaliseMaxSizeMB,
} from '../../src/backup/settings.js';
import { resolveHome } from '../../src/backup/layout.js';
import { newTurnId } from '../../src/backup/layout.js';
import { touchStamp } from '../../src/backup/metadata-ops.js';
import os from 'node:os';
import path from 'node:path';

describe('fileBackupMaxSizeMB normalisation', () => {
  it.each([
    [10, 10],
    [0, FILE_BACKUP_MAX_SIZE_MB.min],
    [-5, FILE_BACKUP_MAX_SIZE_MB.min],
    [1e9, FILE_BACKUP_MAX_SIZE_MB.max],
    [2.5, 2.5],
    [Number.NaN, FILE_BACKUP_MAX_SIZE_MB.default],
    [Number.POSITIVE_INFINITY, FILE_BACKUP_MAX_SIZE_MB.default],
    ['20', FILE_BACKUP_MAX_SIZE_MB.default],
    [null, FILE_BACKUP_MAX_SIZE_MB.default],
    [undefined, FILE_BACKUP_MAX_SIZE_MB.default],
  ])('%j → %j', (input, expected) => {
    expect(normaliseMaxSizeMB(input)).toBe(expected);
  });
});

describe('normaliseBackupSettings', () => {
  it.each([
    [undefined, DEFAULT_BACKUP_SETTINGS],
    [{}, DEFAULT_BACKUP_SETTINGS],
    ['not an object', DEFAULT_BACKUP_SETTINGS],
    [{ enabled: true, fileBackupMaxSizeMB: 10 }, { enabled: true, fileBackupMaxSizeMB: 10, oversize: 'deny' }],
    [{ enabled: false }, { enabled: false, fileBackupMaxSizeMB: 10, oversize: 'deny' }],
    // Only an explicit false turns backup off (the reference's rule).
    [{ enabled: 'no' }, { enabled: true, fileBackupMaxSizeMB: 10, oversize: 'deny' }],
    [{ oversize: 'skip', fileBackupMaxSizeMB: 4096 }, { enabled: true, fileBackupMaxSizeMB: 1024, oversize: 'skip' }],
    [{ oversize: 'truncate' }, { enabled: true, fileBackupMaxSizeMB: 10, oversize: 'deny' }],
    [{ enabled: true, command: 'EnableModifyBackup', extra: 1 }, DEFAULT_BACKUP_SETTINGS],
  ])('%j', (input, expected) => {
    expect(normaliseBackupSettings(input)).toEqual(expected);
  });

  it('gives the cap in bytes', () => {
    expect(maxBytesOf({ fileBackupMaxSizeMB: 10 })).toBe(10 * 1024 * 1024);
    expect(maxBytesOf({ fileBackupMaxSizeMB: 1.5 })).toBe(1572864);
  });
});

describe('layout helpers', () => {
  it('resolves the home from the environment or the user home', () => {
    expect(resolveHome({ BROKERED_SHELL_HOME: '/srv/bsh' })).toBe('/srv/bsh');
    expect(resolveHome({ BROKERED_SHELL_HOME: '' })).toBe(path.join(os.homedir(), '.brokered-shell'));
    expect(resolveHome({})).toBe(path.join(os.homedir(), '.brokered-shell'));
  });

  it('makes turn ids of the broker shape', () => {
    const id = newTurnId(new Date('2026-11-30T02:03:04.567Z'));
    expect(id).toMatch(/^20261130-020304-[0-9a-f]{6}$/);
    expect(newTurnId()).not.toBe(newTurnId());
  });

  it.each([
    [1_700_000_000_123_456_789n, '@1700000000.123456789'],
    [5n, '@0.000000005'],
    [-1n, '@-1.999999999'],
  ])('formats %s ns for touch as %s', (ns, stamp) => {
    expect(touchStamp(ns)).toBe(stamp);
  });
});
