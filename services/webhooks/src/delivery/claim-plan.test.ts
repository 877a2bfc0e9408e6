// Claims and success records find their deliveries by id, whatever PostgreSQL's statistics say
// (claims.ts, "Finding rows by id"): what such a statement reads must not grow with the number of
// pending deliveries. The adverse case is built on purpose: statistics taken while few deliveries
// were pending (100 of 2,100), then a backlog of 20,000 sharing one next_attempt_at (as one
// fan-out writes them). Measured with EXPLAIN ANALYZE on the real statements, rolled back: the rows of
// webhooks.deliveries a statement looked at, kept or filtered out.
import { freshDatabase, type MigratedDatabase } from '@mcs/testkit';
import { type SQL, sql } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateWebhooks } from '../db/migrate.ts';
import { claimStatement } from './claims.ts';
import { type Attempted, successesStatement } from './record.ts';

let db: MigratedDatabase;
const LEASE = new Date('2030-01-01T00:00:00Z');
const BATCH = 32;

beforeAll(async () => {
  db = await freshDatabase(migrateWebhooks);
  // This database's own table: no autovacuum run may refresh the statistics mid-test.
  await db.db.execute(sql`alter table webhooks.deliveries set (autovacuum_enabled = false)`);
  await insertDeliveries('old', 2_000, 'succeeded');
  await insertDeliveries('few', 100, 'pending');
  await db.db.execute(sql`analyze webhooks.deliveries`);
});
afterAll(() => db?.close());

async function insertDeliveries(prefix: string, count: number, status: 'pending' | 'succeeded') {
  await db.db.execute(sql`
    insert into webhooks.deliveries
      (id, event_id, endpoint_id, account_id, livemode, status, next_attempt_at, created_at)
    select ${`dlv_${prefix}_`} || lpad(g::text, 6, '0'), ${`evt_${prefix}_`} || g, 'we_plan', 'acct_plan', false,
           ${status}, case when ${status} = 'pending' then ${LEASE}::timestamptz end, now()
      from generate_series(1, ${count}::int) g`);
}

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Actual Rows': number;
  'Actual Loops': number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Index Recheck'?: number;
  'Rows Removed by Join Filter'?: number;
  Plans?: PlanNode[];
}

/** Runs `statement` under EXPLAIN ANALYZE in a transaction that is rolled back. */
async function explain(statement: SQL): Promise<{ rows: number; indexes: string[] }> {
  const client = await db.pool.connect();
  try {
    await client.query('begin');
    const q = new PgDialect().sqlToQuery(sql`explain (analyze, format json) ${statement}`);
    const { rows } = await client.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(q.sql, q.params);
    const plan = rows[0]!['QUERY PLAN'][0]!.Plan;
    const indexes: string[] = [];
    let looked = 0;
    const walk = (n: PlanNode) => {
      if (n['Index Name']) indexes.push(n['Index Name']);
      const loops = n['Actual Loops'];
      if (n['Relation Name'] === 'deliveries' && n['Node Type'] !== 'ModifyTable')
        looked +=
          (n['Actual Rows'] +
            (n['Rows Removed by Filter'] ?? 0) +
            (n['Rows Removed by Index Recheck'] ?? 0)) *
          loops;
      looked += (n['Rows Removed by Join Filter'] ?? 0) * loops;
      for (const c of n.Plans ?? []) walk(c);
    };
    walk(plan);
    return { rows: looked, indexes };
  } finally {
    await client.query('rollback');
    client.release();
  }
}

const ids = (prefix: string) =>
  Array.from({ length: BATCH }, (_, i) => `dlv_${prefix}_${String(i + 1).padStart(6, '0')}`);

const claimOf = (prefix: string) =>
  claimStatement(
    ids(prefix).map((deliveryId) => ({ deliveryId, lease: LEASE })),
    new Date(),
    new Date(LEASE.getTime() + 60_000),
  );

const successesOf = (prefix: string) =>
  successesStatement(
    ids(prefix).map(
      (deliveryId): Attempted => ({
        deliveryId,
        endpointId: 'we_plan',
        eventId: 'evt_plan',
        number: 1,
        run: 1,
        at: new Date(),
        result: { ok: true, statusCode: 200, error: null, latencyMs: 3, excerpt: '', retryAfterMs: null },
      }),
    ),
    new Date(),
  );

describe('statements that name deliveries by id', () => {
  it('a claim and a success record of 32 look at 32 rows with 20,000 pending', async () => {
    await insertDeliveries('many', 20_000, 'pending');
    for (const statement of [claimOf('many'), successesOf('many')]) {
      const { rows, indexes } = await explain(statement);
      // By primary key: each named row, not every pending one.
      expect(indexes).toContain('deliveries_pkey');
      expect(indexes).not.toContain('deliveries_due_idx');
      expect(rows).toBeLessThanOrEqual(BATCH * 2);
    }
  });
});
