import { describe } from 'vitest';
import { fuzzProperties } from './harness/fuzz-suite.js';
import { properties } from './props/ipc.js';

// The socket's wire protocols (src/ipc/): line splitting, text token lines, JSON HostFileOperation lines.
describe('fuzz: socket protocols', () => {
  fuzzProperties(new URL('./props/ipc.ts', import.meta.url), Object.keys(properties));
});
