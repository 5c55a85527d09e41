/**
 * flushTerminalInput: tcflush(TCIFLUSH). On a terminal it drops what was typed ahead
 * (shown end to end in test/agent/run-approval.test.ts, under `script`); on anything
 * else it fails with ENOTTY, which the question takes as a reason not to ask.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { native } from '../../src/native/index.js';
import { catchErrno, makeTempDir, removeDir } from './helpers.js';

describe('flushTerminalInput', () => {
  let dir: string;
  beforeEach(() => {
    dir = makeTempDir('tty');
  });
  afterEach(() => removeDir(dir));

  it('fails with ENOTTY on a descriptor that is not a terminal', () => {
    const file = path.join(dir, 'plain');
    fs.writeFileSync(file, 'y\n');
    const fd = fs.openSync(file, 'r');
    try {
      const error = catchErrno(() => native().flushTerminalInput(fd));
      expect(error.code).toBe('ENOTTY');
      expect(error.syscall).toBe('tcflush');
      expect(fs.readFileSync(file, 'utf8')).toBe('y\n');
    } finally {
      fs.closeSync(fd);
    }
  });

  it('refuses a descriptor that is not a whole non-negative number', () => {
    expect(() => native().flushTerminalInput(-1)).toThrow(/fd/);
  });
});
