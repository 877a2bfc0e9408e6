// drizzle-orm as the services load it: patched (patches/drizzle-orm@*.patch) so that its
// package.json `exports` map is small. Node 24's ESM loader copies the nearest package.json's
// `exports` into the JS heap for every `.js` file it loads (the format check of each module), and
// drizzle-orm's lists 447 files (179 KB): the ~400 modules a service loads made ~200 MB of
// garbage at start-up. The patch maps the same subpaths with one `./*` pattern.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = dirname(fileURLToPath(import.meta.resolve('drizzle-orm')));
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  exports: Record<string, unknown>;
};

describe('drizzle-orm exports', () => {
  it('are a small map (the patch applied)', () => {
    expect(JSON.stringify(pkg.exports).length).toBeLessThan(32_000);
  });

  it('resolve every subpath this repository imports to the same files, for import and require', () => {
    const require = createRequire(import.meta.url);
    const cases: Array<[string, string]> = [
      ['drizzle-orm', 'index'],
      ['drizzle-orm/pg-core', 'pg-core/index'],
      ['drizzle-orm/node-postgres', 'node-postgres/index'],
      ['drizzle-orm/node-postgres/migrator', 'node-postgres/migrator'],
      ['drizzle-orm/sql/expressions', 'sql/expressions/index'],
      ['drizzle-orm/pg-core/columns/jsonb', 'pg-core/columns/jsonb'],
    ];
    for (const [specifier, file] of cases) {
      expect(fileURLToPath(import.meta.resolve(specifier))).toBe(join(root, `${file}.js`));
      expect(require.resolve(specifier)).toBe(join(root, `${file}.cjs`));
    }
  });
});
