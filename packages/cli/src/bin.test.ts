// bin/mcs.js, what `npx mcs` and `pnpm exec mcs` run: the CLI starts from Node's compile cache
// (.data/compile-cache) unless the caller chose another or none.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

const BIN = fileURLToPath(new URL('../bin/mcs.js', import.meta.url));
const CACHE = fileURLToPath(new URL('../../../.data/compile-cache/', import.meta.url));

/** `mcs --help` with Node's compile-cache debug lines on stderr. */
function help(env: Record<string, string>): Promise<{ stdout: string; stderr: string }> {
  const base = { ...process.env };
  delete base.NODE_COMPILE_CACHE;
  delete base.NODE_DISABLE_COMPILE_CACHE;
  return new Promise((resolve, reject) =>
    execFile(
      process.execPath,
      [BIN, '--help'],
      { env: { ...base, NODE_DEBUG_NATIVE: 'COMPILE_CACHE', ...env } },
      (err, stdout, stderr) => (err ? reject(err) : resolve({ stdout, stderr })),
    ),
  );
}

it('runs from the compile cache under .data by default', async () => {
  await help({}); // the first run may fill it
  const { stdout, stderr } = await help({});
  expect(stdout).toMatch(/^usage: mcs /);
  expect(stderr).toContain(`resolved path ${CACHE.replace(/\/$/, '')}`);
  expect(stderr).toMatch(
    /retrieving transpile cache for StrippedTypeScript \S+\/cli\/src\/main\.ts\.\.\.success/,
  );
});

it("leaves the cache alone when NODE_COMPILE_CACHE is '' or NODE_DISABLE_COMPILE_CACHE is set", async () => {
  const cases: Record<string, string>[] = [{ NODE_COMPILE_CACHE: '' }, { NODE_DISABLE_COMPILE_CACHE: '1' }];
  for (const env of cases) {
    const { stdout, stderr } = await help(env);
    expect(stdout).toMatch(/^usage: mcs /);
    expect(stderr, JSON.stringify(env)).not.toContain('[compile cache] resolved path');
  }
});
