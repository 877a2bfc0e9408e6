import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    name: 'e2e',
    include: ['e2e/**/*.test.ts', 'deploy/**/*.test.ts', 'chaos/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
