import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: { name: 'accounts', include: ['src/**/*.test.ts'], testTimeout: 30000 },
});
