import { describe } from 'vitest';
import { fuzzProperties } from './harness/fuzz-suite.js';
import { properties } from './props/kernel-protocol.js';

// The kernel channel's broker side (src/sandbox/protocol.ts): decodeRequest, requestReader, answers.
describe('fuzz: kernel channel protocol', () => {
  fuzzProperties(new URL('./props/kernel-protocol.ts', import.meta.url), Object.keys(properties));
});
