import { describe } from 'vitest';
import { fuzzProperties } from './harness/fuzz-suite.js';
import { properties } from './props/path-walk.js';

// The resolving walk (src/plugins/path-resolution resolve.ts, walk.ts) on random real trees, against the kernel.
describe('fuzz: path resolution walk', () => {
  fuzzProperties(new URL('./props/path-walk.ts', import.meta.url), Object.keys(properties), { runsDivisor: 4 });
});
