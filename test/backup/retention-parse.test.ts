import { describe, expect, it } from 'vitest';
import { ErrorCodes } from '../../src/core/errors.js';
import { cutoffOf, parseCount, parseOlderThan, parseSize } from '../../src/backup/retention.js';

const NOW = new Date('2026-03-10T12:00:00.000Z');

describe('parseOlderThan', () => {
  it.each([
    ['30d', '2026-02-08T12:00:00.000Z'],
    ['12h', '2026-03-10T00:00:00.000Z'],
    ['90m', '2026-03-10T10:30:00.000Z'],
    ['45s', '2026-03-10T11:59:15.000Z'],
    ['2w', '2026-02-24T12:00:00.000Z'],
    ['0d', '2026-03-10T12:00:00.000Z'],
    ['2026-11-01', '2026-11-01T00:00:00.000Z'],
    ['2026-11-01T08:30:00+02:00', '2026-11-01T06:30:00.000Z'],
    ['2026-11-01T08:30:00Z', '2026-11-01T08:30:00.000Z'],
  ])('%s', (text, cutoff) => {
    expect(cutoffOf(parseOlderThan(text), NOW).toISOString()).toBe(cutoff);
  });

  it.each(['', 'yesterday', '30', '30 days', '-3d', '1.5d', '30D', '2026-02-30', '2026-13-01', '2026-11-01T08:30:00'])('rejects %j', (text) => {
    expect(() => parseOlderThan(text)).toThrow(expect.objectContaining({ code: ErrorCodes.INVALID_OPTIONS }));
  });
});

describe('parseSize', () => {
  it.each([
    ['0', 0],
    ['1000', 1000],
    ['512B', 512],
    ['64K', 64 * 1024],
    ['64k', 64 * 1024],
    ['500M', 500 * 1024 ** 2],
    ['500MB', 500 * 1024 ** 2],
    ['500MiB', 500 * 1024 ** 2],
    ['1.5G', 1.5 * 1024 ** 3],
    ['2T', 2 * 1024 ** 4],
  ])('%s is %d bytes', (text, bytes) => {
    expect(parseSize(text)).toBe(bytes);
  });

  it.each(['', 'M', '-1M', '5X', '1e9', '10 MB of disk', '99999999999T'])('rejects %j', (text) => {
    expect(() => parseSize(text)).toThrow(expect.objectContaining({ code: ErrorCodes.INVALID_OPTIONS }));
  });
});

describe('parseCount', () => {
  it('takes whole numbers from 0', () => {
    expect(parseCount('0')).toBe(0);
    expect(parseCount('12')).toBe(12);
  });

  it.each(['', '-1', '1.5', 'three', '1e3'])('rejects %j', (text) => {
    expect(() => parseCount(text)).toThrow(expect.objectContaining({ code: ErrorCodes.INVALID_OPTIONS }));
  });
});
