// The batch's array literals (group-commit arrayLiteral) against pg's own conversion, and what
// PostgreSQL reads from them.
import { createRequire } from 'node:module';
import fc from 'fast-check';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { arrayLiteral, sortByKey } from './group-commit.ts';

const { prepareValue } = createRequire(import.meta.url)('pg/lib/utils.js') as {
  prepareValue(value: unknown): unknown;
};

const element = fc.oneof(
  fc.string(),
  fc.string({ unit: fc.constantFrom('"', '\\', '{', '}', ',', ' ', 'NULL', 'a', 'é', '\u0001') }),
  fc.constant(null),
  fc.boolean(),
  fc.integer(),
  fc.bigInt(),
  fc.date({ noInvalidDate: true, min: new Date(0), max: new Date(4102444800000) }),
  fc.uint8Array().map((a) => Buffer.from(a)),
  fc.uint8Array(),
  fc.array(fc.string(), { maxLength: 3 }),
  fc.dictionary(fc.string(), fc.string(), { maxKeys: 3 }),
);

describe('arrayLiteral', () => {
  it('writes exactly what pg writes for the same array', () => {
    fc.assert(
      fc.property(fc.array(element, { maxLength: 8 }), (values) => {
        expect(arrayLiteral(values)).toBe(prepareValue(values));
      }),
      { numRuns: 3_000 },
    );
  });
});

describe('arrayLiteral read by PostgreSQL', () => {
  const pool = new pg.Pool({
    connectionString: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
    max: 1,
  });
  beforeAll(() => pool.query('select 1'));
  afterAll(() => pool.end());

  it('text and bytea arrays come back as they were', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.option(
            fc.string({ unit: 'grapheme' }).map((s) => s.replaceAll('\u0000', '')),
            { nil: null },
          ),
          {
            maxLength: 6,
          },
        ),
        fc.array(
          fc.uint8Array({ maxLength: 40 }).map((a) => Buffer.from(a)),
          { maxLength: 6 },
        ),
        async (texts, bytes) => {
          const { rows } = await pool.query<{ t: Array<string | null>; b: Buffer[] }>(
            'select $1::text[] as t, $2::bytea[] as b',
            [arrayLiteral(texts), arrayLiteral(bytes)],
          );
          expect(rows[0]!.t).toEqual(texts);
          expect(rows[0]!.b.map((b) => b.toString('hex'))).toEqual(bytes.map((b) => b.toString('hex')));
        },
      ),
      { numRuns: 200 },
    );
  });
});

describe('sortByKey', () => {
  it('orders a batch as a stable sort by key would, creates without a key first', () => {
    const key = fc.option(fc.string({ maxLength: 6 }), { nil: undefined });
    fc.assert(
      fc.property(fc.array(key, { maxLength: 70 }), (keys) => {
        const batch = keys.map((k, i) => ({ key: k, i }));
        const expected = [...batch].sort((a, b) => {
          if (a.key === b.key) return 0;
          if (a.key === undefined) return -1;
          if (b.key === undefined) return 1;
          return a.key < b.key ? -1 : 1;
        });
        sortByKey(batch);
        expect(batch).toEqual(expected);
      }),
    );
  });
});
