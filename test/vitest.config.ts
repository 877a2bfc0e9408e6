import { defineConfig } from 'vitest/config';

/**
 * The files that time the stack under faults against fixed limits (a 503 within 100 ms while a
 * part or PostgreSQL is down, recovery within seconds, a healthy endpoint's p99 beside hostile
 * ones): they run after every other file, one at a time (vitest.alone.config.ts), so another
 * test's stack is not competing for the machine's two cores while they measure.
 */
export const ALONE = [
  'e2e/supervisor.test.ts',
  'chaos/hostile.test.ts',
  'chaos/kill.test.ts',
  'chaos/nats.test.ts',
  'chaos/postgres.test.ts',
  'chaos/sigstop.test.ts',
];

export default defineConfig({
  test: {
    name: 'e2e',
    include: ['e2e/**/*.test.ts', 'deploy/**/*.test.ts', 'chaos/**/*.test.ts'],
    exclude: ALONE,
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
