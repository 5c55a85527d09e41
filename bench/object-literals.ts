/**
 * What an object literal costs on this Node, by shape: the request path once spent tens of
 * µs per request in literals that spread an object and go on with more fields.
 *
 *   node --import tsx bench/object-literals.ts [--n 1000000]
 *
 * Prints ns per literal for each shape, after a warm-up. On Node 20 (V8 11.3) every member
 * after a leading spread is a runtime call (≈ 1 µs); the same fields spelled out, or a
 * spread at the end, cost tens of ns. `test/core/request-path-literals.test.ts` keeps the
 * costly shapes out of the modules every request runs through. Not a test: no thresholds.
 */
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { n: { type: 'string', default: '1000000' } } });
const n = Number(values.n);

const target = { role: 'path', path: '/ws/a/file.txt', access: 'read' };
const stats = { kind: 'file', links: 1 };

const shapes: Array<[string, (i: number) => object]> = [
  ['{ ...target }', () => ({ ...target })],
  ['{ ...target, lexical }', (i) => ({ ...target, lexical: i })],
  ['{ ...target, lexical, resolved, ...stats }', (i) => ({ ...target, lexical: i, resolved: i, ...stats })],
  ['Object.assign({ ...target }, { lexical }) (fields added to a spread copy)', (i) => Object.assign({ ...target }, { lexical: i })],
  ['{ ...(c ? { id } : {}), ok, decision }', (i) => ({ ...(i & 1 ? { id: i } : {}), ok: false, decision: 'deny' })],
  ['Object.assign({}, target, { lexical })', (i) => Object.assign({}, target, { lexical: i })],
  ['fields spelled out', (i) => ({ role: target.role, path: target.path, access: target.access, lexical: i })],
  ['{ a, b, ...(c ? { d } : {}) } (spread last)', (i) => ({ a: i, b: 2, ...(i & 1 ? { d: i } : {}) })],
];

console.log(`Node ${process.version} (V8 ${process.versions.v8}), ${n.toLocaleString('en')} literals per shape\n`);
console.log('| shape | ns per literal |\n|---|--:|');
let sink = 0;
for (const [label, make] of shapes) {
  for (let i = 0; i < n / 5; i += 1) sink += Object.keys(make(i)).length;
  const started = process.hrtime.bigint();
  for (let i = 0; i < n; i += 1) sink += make(i) === undefined ? 1 : 0;
  const ns = Number(process.hrtime.bigint() - started) / n;
  console.log(`| \`${label}\` | ${ns.toFixed(0)} |`);
}
if (sink < 0) console.log(sink);
