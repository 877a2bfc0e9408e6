// Recording an attempt (record.ts recordAttempt) against a real database, when PostgreSQL picks it
// as a deadlock victim: the API changing an endpoint locks the endpoint and then its deliveries,
// a failure's record locks the delivery and then the endpoint.
import type { Caller } from '@mcs/kit/caller';
import { freshDatabase, type MigratedDatabase, until } from '@mcs/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateWebhooks } from '../db/migrate.ts';
import { createEndpoint } from '../domain/endpoints.ts';
import { createSecretBox } from '../domain/secrets.ts';
import { recordAttempt } from './record.ts';

let db: MigratedDatabase;
const box = createSecretBox(Buffer.alloc(32, 5));

beforeAll(async () => {
  db = await freshDatabase(migrateWebhooks);
});
afterAll(() => db?.close());

describe('recordAttempt', () => {
  it('runs again when PostgreSQL picks it as a deadlock victim, and the attempt is recorded', async () => {
    const caller: Caller = { accountId: 'acct_deadlock', livemode: false };
    const { endpoint } = await db.db.transaction((tx) =>
      createEndpoint(
        tx,
        caller,
        { url: 'https://93.184.215.14/hooks', events: ['*'] },
        { box, policy: { allowHttp: false, allowPrivate: true } },
      ),
    );
    const deliveryId = 'dlv_deadlock';
    await db.pool.query(
      `insert into webhooks.deliveries (id, event_id, endpoint_id, account_id, livemode, status, next_attempt_at, created_at)
       values ($1, 'evt_deadlock', $2, $3, false, 'pending', now() + interval '1 minute', now())`,
      [deliveryId, endpoint.id, caller.accountId],
    );

    // The other writer holds the endpoint's row...
    const other = await db.pool.connect();
    try {
      await other.query('begin');
      await other.query('update webhooks.endpoints set updated_at = now() where id = $1', [endpoint.id]);
      // ...while the record takes the delivery's and waits for the endpoint's...
      const recorded = recordAttempt(
        db.db,
        { schedule: [60_000], warnAfterMs: 3_600_000, leaseMs: 15_000 },
        {
          deliveryId,
          endpointId: endpoint.id,
          eventId: 'evt_deadlock',
          number: 1,
          run: 1,
          at: new Date(),
          result: {
            ok: false,
            statusCode: 500,
            error: 'HTTP 500',
            latencyMs: 3,
            excerpt: 'no',
            retryAfterMs: null,
          },
        },
        new Date(),
      );
      await until('the record waiting for the endpoint row', async () => {
        const { rows } = await db.pool.query(
          `select count(*)::int as n from pg_stat_activity
            where datname = current_database() and wait_event_type = 'Lock'
              and query like '%update webhooks.endpoints set failing_since%'`,
        );
        return rows[0].n > 0;
      });
      // ...and then wants the delivery's: a cycle, and the record (waiting longest) is the victim.
      await other.query('update webhooks.deliveries set attempts = attempts where id = $1', [deliveryId]);
      await other.query('commit');
      await expect(recorded).resolves.toMatchObject({ transition: null });
    } finally {
      other.release();
    }
    const { rows } = await db.pool.query(
      `select d.status, d.attempts, a.status_code, e.failing_since is not null as failing
         from webhooks.deliveries d join webhooks.attempts a on a.delivery_id = d.id
         join webhooks.endpoints e on e.id = d.endpoint_id where d.id = $1`,
      [deliveryId],
    );
    expect(rows).toEqual([{ status: 'pending', attempts: 1, status_code: 500, failing: true }]);
  });
});
