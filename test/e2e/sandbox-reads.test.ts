/**
 * Reads never leave the kernel (the BPF filter lets read-only opens pass), and
 * scratch dirs need nobody's permission: both produce zero broker requests.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createFakeBroker, removeDir, runBash, tempDir, type FakeBroker } from '../fixtures/sandbox/harness.js';

let ws: string;
let scratch: string;
let broker: FakeBroker;

beforeEach(() => {
  ws = tempDir('ws');
  scratch = tempDir('scratch');
  broker = createFakeBroker(ws);
  fs.mkdirSync(path.join(ws, 'sub/deeper'), { recursive: true });
  fs.writeFileSync(path.join(ws, 'f'), 'x marks\n');
  fs.writeFileSync(path.join(ws, 'sub/deeper/g'), 'another x\n');
});
afterEach(() => {
  removeDir(ws);
  removeDir(scratch);
});

const bash = (script: string) => runBash(script, { cwd: ws, broker, scratch: [scratch] });

describe('read-only commands', () => {
  it.each([
    ['cat f', 'x marks\n'],
    ['grep -r x . | sort', './f:x marks\n./sub/deeper/g:another x\n'],
    ['ls -R', '.:\nf\nsub\n\n./sub:\ndeeper\n\n./sub/deeper:\ng\n'],
  ])('%s produces zero requests', async (script, stdout) => {
    const result = await bash(script);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toBe(stdout);
    expect(broker.requests).toEqual([]);
  });

  it('writes to /dev/null and the scratch dir produce zero requests', async () => {
    const result = await bash(
      [
        'echo hidden > /dev/null',
        `cd "${scratch}"`,
        'echo t > t && mkdir d && mv t d/u && ln -s u d/l',
        'chmod 600 d/u && touch -d 2001-01-01 d/u && cat d/l && rm -r d',
      ].join('; '),
    );
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toBe('t\n');
    expect(fs.readdirSync(scratch)).toEqual([]);
    expect(broker.requests).toEqual([]);
  });

  it('a here-document uses TMPDIR (the scratch dir) without requests', async () => {
    const result = await bash('cat <<EOF\nheredoc $((1 + 1))\nEOF');
    expect(result.stdout).toBe('heredoc 2\n');
    expect(broker.requests).toEqual([]);
  });
});
