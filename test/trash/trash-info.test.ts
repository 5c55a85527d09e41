import { describe, expect, it } from 'vitest';
import { formatDeletionDate, formatTrashInfo, parseDeletionDate, parseTrashInfo } from '../../src/trash/index.js';
import { innermostMount, parseMountInfo } from '../../src/trash/mount-point.js';
import { FIXED_NOW, FIXED_NOW_TEXT } from './helpers.js';

describe('.trashinfo format', () => {
  it('writes the exact text of the spec', () => {
    expect(formatTrashInfo('/home/u/a b.txt', FIXED_NOW)).toBe(
      `[Trash Info]\nPath=/home/u/a%20b.txt\nDeletionDate=${FIXED_NOW_TEXT}\n`,
    );
  });

  it('formats local time with zero padding', () => {
    expect(formatDeletionDate(new Date(987, 8, 7, 6, 5, 4))).toBe('0987-09-07T06:05:04');
  });

  it('parses what it writes', () => {
    const parsed = parseTrashInfo(formatTrashInfo('dir/é.txt', FIXED_NOW));
    expect(parsed).toEqual({ ok: true, info: { path: 'dir/é.txt', encodedPath: 'dir/%C3%A9.txt', deletedAt: FIXED_NOW } });
  });

  it('tolerates CRLF, comments, other groups, extra keys and the basic date form', () => {
    const text = '# made elsewhere\r\n[Other]\r\nPath=/wrong\r\n[Trash Info]\r\nX-Extra=1\r\nPath=/a%20b\r\nPath=/second\r\nDeletionDate=20040831T22:32:08\r\n';
    const parsed = parseTrashInfo(text);
    expect(parsed.ok && parsed.info.path).toBe('/a b');
    expect(parsed.ok && parsed.info.deletedAt).toEqual(new Date(2004, 7, 31, 22, 32, 8));
  });

  it.each([
    ['', /no \[Trash Info\] group/],
    ['[Trash Info]\nDeletionDate=2024-01-02T03:04:05\n', /Path= is missing/],
    ['[Trash Info]\nPath=/a\n', /DeletionDate= is missing/],
    ['[Trash Info]\nPath=/a\nDeletionDate=yesterday\n', /DeletionDate= is not/],
    ['[Trash Info]\nPath=/a\nDeletionDate=2024-13-02T03:04:05\n', /out of range/],
    ['[Trash Info]\nPath=/a%ZZ\nDeletionDate=2024-01-02T03:04:05\n', /percent-escape/],
    ['[Trash Info]\nPath=\nDeletionDate=2024-01-02T03:04:05\n', /Path= is empty/],
  ])('reports a broken file instead of throwing: %j', (text, problem) => {
    const parsed = parseTrashInfo(text);
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.problem).toMatch(problem);
  });

  it('rejects impossible dates', () => {
    expect(parseDeletionDate('2024-01-02T24:00:00')).toBeUndefined();
    expect(parseDeletionDate('2024-01-02 03:04:05')).toBeUndefined();
  });
});

describe('mountinfo parsing', () => {
  const sample = [
    '22 1 0:21 / / rw,relatime shared:1 - ext4 /dev/sda1 rw',
    '30 22 0:30 / /mnt/data rw,relatime shared:5 - tmpfs tmpfs rw',
    '31 22 0:31 / /mnt/with\\040space rw - tmpfs tmpfs rw',
    '32 30 0:32 / /mnt/data rw - tmpfs tmpfs rw',
    '',
  ].join('\n');

  it('decodes escaped mount points', () => {
    expect(parseMountInfo(sample).map((m) => m.mountPoint)).toEqual(['/', '/mnt/data', '/mnt/with space', '/mnt/data']);
  });

  it('picks the innermost, most recently stacked mount', () => {
    const entries = parseMountInfo(sample);
    expect(innermostMount(entries, '/mnt/data/x/y')?.device).toBe('0:32');
    expect(innermostMount(entries, '/mnt/database')?.mountPoint).toBe('/');
    expect(innermostMount(entries, '/mnt/with space')?.mountPoint).toBe('/mnt/with space');
  });
});
