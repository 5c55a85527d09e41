import { defineConfig } from 'vitest/config';

export default defineConfig({
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
