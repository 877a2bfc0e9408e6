import { defineConfig } from 'vitest/config';
import { ALONE } from './vitest.config.ts';

// The timing-sensitive e2e files (see ALONE): after all other projects, one file at a time.
export default defineConfig({
  test: {
    name: 'e2e-alone',
    include: ALONE,
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Not maxWorkers: 1, which `pnpm test`'s --maxWorkers=2 overrides; this holds.
    fileParallelism: false,
    sequence: { groupOrder: 1 },
  },
});
