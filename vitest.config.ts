import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// Every Node process a test spawns (a stack's parts, `mcs`, scripts) inherits this: Node's
// compile cache, as `pnpm start` sets it, so a part or a CLI run starts without compiling again.
process.env.NODE_COMPILE_CACHE ??= fileURLToPath(new URL('.data/compile-cache', import.meta.url));

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
