import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    name: 'webhooks',
    include: ['src/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    passWithNoTests: true,
  },
});
