import { Writable } from 'node:stream';
import { expect, it } from 'vitest';
import { createLogger } from '../../src/core/index.js';

it('every line carries exactly one phase, whoever sets it', () => {
  const raw: string[] = [];
  const destination = new Writable({
    write(chunk, _encoding, callback) {
      raw.push(...String(chunk).split('\n').filter(Boolean));
      callback();
    },
  });
  const log = createLogger({ destination, level: 'debug' });
  log.info('no phase anywhere');
  log.info({ phase: 'commit' }, 'phase in the call');
  const child = log.child({ phase: 'kernel', requestId: 'r1' });
  child.info('phase bound by a child');
  child.child({ extra: 1 }).warn('phase bound by a grandparent');
  log.child({ requestId: 'r2' }).info({ phase: 'audit' }, 'child without phase, call with one');
  expect(raw.map((line) => line.match(/"phase":/g)?.length)).toEqual([1, 1, 1, 1, 1]);
  expect(raw.map((line) => (JSON.parse(line) as { phase: string }).phase)).toEqual(['broker', 'commit', 'kernel', 'kernel', 'audit']);
});
