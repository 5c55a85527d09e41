/**
 * The per-path order of changes (src/core/path-order.ts): related names (the same, a
 * directory above, a name below) run one after another in arrival order; unrelated ones
 * at once; ALL_PATHS waits for everything before it and holds back everything after it;
 * a hold keeps the names until it settles.
 */
import { describe, expect, it } from 'vitest';
import { ALL_PATHS, PathOrder, type OrderKeys } from '../../src/core/path-order.js';

/** A task that records when it starts and ends only once `finish` is called. */
function gate(order: PathOrder, keys: OrderKeys, log: string[], name: string) {
  let finish: () => void = () => undefined;
  const finished = new Promise<void>((resolve) => (finish = resolve));
  const done = order.run(keys, async () => {
    log.push(`start ${name}`);
    await finished;
    log.push(`end ${name}`);
  });
  return { finish, done };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('PathOrder', () => {
  it.each<[string, OrderKeys, boolean]>([
    ['the same name', ['/w/a'], true],
    ['a name below', ['/w/a/b'], true],
    ['a directory above', ['/w'], true],
    ['a sibling', ['/w/b'], false],
    ['a name that only starts the same', ['/w/ab'], false],
    ['every path', ALL_PATHS, true],
  ])('%s waits: %s', async (_name, keys, waits) => {
    const order = new PathOrder();
    const log: string[] = [];
    const first = gate(order, ['/w/a'], log, 'first');
    const second = gate(order, keys, log, 'second');
    await settle();
    expect(log).toEqual(waits ? ['start first'] : ['start first', 'start second']);
    first.finish();
    second.finish();
    await Promise.all([first.done, second.done]);
    expect(log.indexOf('start second') > log.indexOf('end first')).toBe(waits);
  });

  it('a later change does not overtake an earlier one it conflicts with, even one still waiting', async () => {
    const order = new PathOrder();
    const log: string[] = [];
    const a = gate(order, ['/w/a'], log, 'a');
    const all = gate(order, ALL_PATHS, log, 'all');
    const b = gate(order, ['/w/b'], log, 'b');
    await settle();
    expect(log).toEqual(['start a']);
    a.finish();
    await settle();
    expect(log).toEqual(['start a', 'end a', 'start all']);
    all.finish();
    b.finish();
    await Promise.all([a.done, all.done, b.done]);
    expect(log).toEqual(['start a', 'end a', 'start all', 'end all', 'start b', 'end b']);
    await settle();
    expect(order.size).toBe(0);
  });

  it('keeps the names through the hold after the task, and lets them go when the task fails', async () => {
    const order = new PathOrder();
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    const log: string[] = [];
    await order.run(['/w/a'], async () => void log.push('held'), () => held);
    const next = order.run(['/w/a'], async () => void log.push('next'));
    await settle();
    expect(log).toEqual(['held']);
    release();
    await next;
    await expect(order.run(['/w/a'], async () => Promise.reject(new Error('no')))).rejects.toThrow('no');
    await order.run(['/w/a'], async () => void log.push('after a failure'));
    expect(log).toEqual(['held', 'next', 'after a failure']);
  });
});
