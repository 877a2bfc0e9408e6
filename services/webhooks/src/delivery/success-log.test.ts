// The group commit of successes (record.ts createSuccessLog) against a real database: plain
// successes wait out the whole window, one that an ordered delivery's release waits on takes the
// short window, and everything waiting goes with it.
import { createLogger } from '@mcs/kit/log';
import { freshDatabase, type MigratedDatabase } from '@mcs/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateWebhooks } from '../db/migrate.ts';
import { type Attempted, createSuccessLog } from './record.ts';

let db: MigratedDatabase;
const log = createLogger('success-log-test', process.env.TEST_LOG ?? 'silent');

beforeAll(async () => {
  db = await freshDatabase(migrateWebhooks);
});
afterAll(() => db?.close());

async function pending(id: string): Promise<Attempted> {
  await db.pool.query(
    `insert into webhooks.deliveries (id, event_id, endpoint_id, account_id, livemode, status, next_attempt_at, created_at)
     values ($1, $2, 'we_log', 'acct_log', false, 'pending', now() + interval '1 minute', now())`,
    [id, `evt_${id}`],
  );
  return {
    deliveryId: id,
    endpointId: 'we_log',
    eventId: `evt_${id}`,
    number: 1,
    run: 1,
    at: new Date(),
    result: { ok: true, statusCode: 200, error: null, latencyMs: 2, excerpt: 'ok', retryAfterMs: null },
  };
}

const statusOf = async (ids: string[]) =>
  (
    await db.pool.query<{ status: string }>(
      'select status from webhooks.deliveries where id = any($1) order by id',
      [ids],
    )
  ).rows.map((r) => r.status);

describe('createSuccessLog', () => {
  it('holds plain successes for the window; one a release waits on goes within the short window, with them', async () => {
    const singles: string[] = [];
    const successes = createSuccessLog({
      db: db.db,
      log,
      clock: () => new Date(),
      single: async (a) => {
        singles.push(a.deliveryId);
      },
      windowMs: 5_000,
      urgentMs: 20,
    });
    const plain = await pending('dlv_log_plain');
    const ordered = await pending('dlv_log_ordered');

    successes.add(plain);
    await new Promise((r) => setTimeout(r, 300));
    expect(await statusOf(['dlv_log_plain'])).toEqual(['pending']);

    const t0 = Date.now();
    const released = new Promise<number>((resolve) =>
      successes.add(ordered, async () => resolve(Date.now() - t0)),
    );
    // Well inside the 5 s window: the short one, then the statement.
    expect(await released).toBeLessThan(2_500);
    expect(await statusOf(['dlv_log_ordered', 'dlv_log_plain'])).toEqual(['succeeded', 'succeeded']);
    expect(singles).toEqual([]);
    await successes.flush();
  });

  it('flush records what waits at once', async () => {
    const successes = createSuccessLog({
      db: db.db,
      log,
      clock: () => new Date(),
      single: async () => {},
      windowMs: 60_000,
    });
    successes.add(await pending('dlv_log_flush'));
    await successes.flush();
    expect(await statusOf(['dlv_log_flush'])).toEqual(['succeeded']);
  });
});
