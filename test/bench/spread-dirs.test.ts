import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { RunPlacement } from '../../bench/lib/spread-dirs.js';

/** The attribute letters `lsattr -d` prints for `dir`. */
const attributesOf = (dir: string): string => execFileSync('lsattr', ['-d', dir], { encoding: 'utf8' }).split(/\s+/)[0] ?? '';

describe('bench run placement', () => {
  const made: string[] = [];
  const tempDir = () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'bsh-spread-'));
    made.push(dir);
    return dir;
  };
  afterEach(() => {
    for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  it('flags a directory so its subdirectories are spread, or says why it could not', () => {
    const placement = new RunPlacement();
    const dir = placement.spread(path.join(tempDir(), 'runs'));
    expect(statSync(dir).isDirectory()).toBe(true);
    if (placement.failure === undefined) {
      expect(attributesOf(dir)).toContain('T');
      expect(placement.describe()).toMatch(/cluster of its own/);
    } else {
      expect(placement.describe()).toContain(placement.failure);
    }
  });

  it('gives each run an empty directory of its own under a spread parent', () => {
    const placement = new RunPlacement();
    const parent = path.join(tempDir(), 'sed');
    const first = placement.runDir(parent, 'native-0');
    writeFileSync(path.join(first, 'left.txt'), 'from an earlier run');
    expect(readdirSync(placement.runDir(parent, 'native-0'))).toEqual([]);
    expect(path.dirname(placement.runDir(parent, 'seccomp-0'))).toBe(parent);
    expect(readdirSync(parent).sort()).toEqual(['native-0', 'seccomp-0']);
    if (placement.failure === undefined) expect(attributesOf(parent)).toContain('T');
  });

  it('says why when a directory cannot be flagged, and keeps the first reason', () => {
    const placement = new RunPlacement();
    // proc has no inode flags: chattr fails there whatever the machine's file systems are.
    expect(placement.spread('/proc/self')).toBe('/proc/self');
    const first = placement.failure;
    expect(first).toBeDefined();
    placement.spread('/proc/1');
    expect(placement.failure).toBe(first);
    expect(placement.describe()).toBe(`runs share block-group clusters (chattr +T failed: ${String(first)}); nothing removed until the end`);
  });
});
