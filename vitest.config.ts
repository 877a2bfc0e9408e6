import { defineConfig } from 'vitest/config';

// One project per service, package and the gateway (each has its own vitest.config.ts), plus the
// cross-service suites under test/.
export default defineConfig({
  test: {
    projects: [
      'services/*/vitest.config.ts',
      'packages/*/vitest.config.ts',
      'gateway/vitest.config.ts',
      'test/vitest.config.ts',
      'test/vitest.alone.config.ts',
    ],
  },
});
