#!/usr/bin/env node
// `npx mcs` / `pnpm exec mcs` in the workspace. The CLI is TypeScript run by Node's type
// stripping (Node ≥ 22.18 / 23.6); `pnpm install` puts Node 24 first on the PATH of npx and pnpm.
const [major, minor] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 18)) {
  process.stderr.write(
    `mcs needs Node.js 24 (this is ${process.version}): run it as \`pnpm mcs …\` or \`npx mcs …\` in the mcs workspace\n`,
  );
  process.exit(1);
}
// Node's compile cache (as `pnpm start` sets it for its parts): the CLI's TypeScript is stripped
// and compiled once, and later runs start in about a quarter of the time. NODE_COMPILE_CACHE=''
// (or NODE_DISABLE_COMPILE_CACHE=1) turns it off.
if (process.env.NODE_COMPILE_CACHE === undefined && !process.env.NODE_DISABLE_COMPILE_CACHE) {
  const { enableCompileCache } = await import('node:module');
  enableCompileCache?.(new URL('../../../.data/compile-cache', import.meta.url).pathname);
}
await import('../src/main.ts');
