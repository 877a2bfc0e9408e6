// executeNamed against a real PostgreSQL: small batches run as named prepared statements, large
// ones unnamed (planned for their own values; kit/db.ts NAMED_MAX_ROWS says why).
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_DATABASE_URL } from './config.ts';
import { createDatabase, type Database, executeNamed, NAMED_MAX_ROWS } from './db.ts';

let database: Database;
beforeAll(() => {
  database = createDatabase(process.env.DATABASE_URL ?? DEFAULT_DATABASE_URL, {
    name: 'kit-db-test',
    max: 1,
  });
});
afterAll(() => database?.close());

describe('executeNamed', () => {
  it('prepares a batch of up to NAMED_MAX_ROWS rows under its name, and runs a larger one unnamed', async () => {
    await database.db.transaction(async (tx) => {
      const sum = (name: string, values: number[]) =>
        executeNamed<{ n: number; total: number }>(
          tx,
          name,
          sql`select count(*)::int as n, sum(v)::int as total from unnest(${sql.param(values)}::int[]) as t(v)`,
          { rows: values.length },
        );
      const prepared = async () => {
        const { rows } = await tx.execute<{ name: string }>(
          sql`select name from pg_prepared_statements where name like 'mcs_test_batch_%'`,
        );
        return rows.map((r) => r.name).sort();
      };
      const small = Array.from({ length: NAMED_MAX_ROWS }, (_, i) => i + 1);
      const large = Array.from({ length: NAMED_MAX_ROWS * 40 }, (_, i) => i + 1);
      expect(await sum('mcs_test_batch_small', small)).toEqual([
        { n: small.length, total: (small.length * (small.length + 1)) / 2 },
      ]);
      expect(await sum('mcs_test_batch_large', large)).toEqual([
        { n: large.length, total: (large.length * (large.length + 1)) / 2 },
      ]);
      expect(await prepared()).toEqual(['mcs_test_batch_small']);
      // The same name serves small batches after a large one ran unnamed.
      expect(await sum('mcs_test_batch_large', [5, 6])).toEqual([{ n: 2, total: 11 }]);
      expect(await prepared()).toEqual(['mcs_test_batch_large', 'mcs_test_batch_small']);
      await tx.execute(sql`deallocate all`);
    });
  });
});
