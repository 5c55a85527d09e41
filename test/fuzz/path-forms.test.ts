import { describe } from 'vitest';
import { fuzzProperties } from './harness/fuzz-suite.js';
import { properties } from './props/path-forms.js';

// The lexical and rule-matching forms of src/plugins/path-resolution, as file-safety uses them.
describe('fuzz: path forms', () => {
  fuzzProperties(new URL('./props/path-forms.ts', import.meta.url), Object.keys(properties));
});
