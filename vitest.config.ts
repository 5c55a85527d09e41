import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  // Examples import the package by name, as an embedder does: in the repository that is the
  // sources (tsconfig.json's `paths` says the same to tsc and tsx), in an installed package dist/.
  resolve: { alias: [{ find: /^brokered-shell$/, replacement: fileURLToPath(new URL('./src/index.ts', import.meta.url)) }] },
  test: {
    include: ['test/**/*.test.ts', 'examples/**/*.test.ts'],
    globalSetup: ['test/setup/debian-packages.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // Vitest's default (one less than the CPUs) is a single worker on these 2-core machines;
    // most test files wait on child processes and disks, and two workers halve the suite.
    maxWorkers: 2,
  },
});
