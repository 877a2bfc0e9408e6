import { randomBytes } from 'node:crypto';
import { encodeTime } from '@mcs/kit/ids';
import { freshDatabase, type MigratedDatabase } from '@mcs/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateWebhooks } from '../db/migrate.ts';
import { purgeBefore } from './retention.ts';

let db: MigratedDatabase;
beforeAll(async () => {
  db = await freshDatabase(migrateWebhooks);
});
afterAll(() => db?.close());

const DAY = 86_400_000;
/** An id made at `ms` (newId never goes back in time within a process, so it cannot make old ones). */
const idAt = (prefix: string, ms: number) =>
  `${prefix}_${encodeTime(ms)}${[...randomBytes(16)].map((b) => '0123456789abcdefghjkmnpqrstvwxyz'[b & 31]).join('')}`;
const now = Date.now();
const cutoff = new Date(now - 30 * DAY);

async function event(atMs: number, resource?: { key: string; version: number }): Promise<string> {
  const id = idAt('evt', atMs);
  await db.pool.query(
    `insert into webhooks.events (id, account_id, livemode, type, payload, body, created_at, resource_key, resource_version)
     values ($1, 'acct_r', false, 'order.created', '\\x00', '{}', $2, $3, $4)`,
    [id, new Date(atMs), resource?.key ?? null, resource?.version ?? null],
  );
  return id;
}

async function delivery(
  eventId: string,
  atMs: number,
  status: string,
  origin = 'event',
  endpointId = `we_${Math.random()}`,
): Promise<string> {
  const id = idAt('dlv', atMs);
  await db.pool.query(
    `insert into webhooks.deliveries (id, event_id, endpoint_id, account_id, livemode, status, attempts, origin, created_at)
     values ($1, $2, $3, 'acct_r', false, $4, 1, $5, $6)`,
    [id, eventId, endpointId, status, origin, new Date(atMs)],
  );
  await db.pool.query(
    `insert into webhooks.attempts (delivery_id, number, at, status_code, latency_ms) values ($1, 1, $2, 200, 5)`,
    [id, new Date(atMs)],
  );
  return id;
}

const count = async (sql: string, ids: string[]) =>
  (await db.pool.query<{ n: number }>(sql, [ids])).rows[0]!.n;
const events = (ids: string[]) =>
  count('select count(*)::int n from webhooks.events where id = any($1)', ids);
const deliveries = (ids: string[]) =>
  count('select count(*)::int n from webhooks.deliveries where id = any($1)', ids);
const attempts = (ids: string[]) =>
  count('select count(*)::int n from webhooks.attempts where delivery_id = any($1)', ids);

describe('retention', () => {
  it('removes events past the cutoff with their deliveries and attempts, but none still pending', async () => {
    const old = await event(now - 40 * DAY);
    const oldDone = [
      await delivery(old, now - 40 * DAY, 'succeeded'),
      await delivery(old, now - 40 * DAY, 'failed'),
    ];
    // Resent a week ago, done: goes with its event.
    const resent = await delivery(old, now - 7 * DAY, 'succeeded', 'resend');
    // An old event whose resend is still pending stays whole, until it settles.
    const held = await event(now - 35 * DAY);
    const heldDeliveries = [
      await delivery(held, now - 35 * DAY, 'failed'),
      await delivery(held, now - DAY, 'pending', 'resend'),
    ];
    const recent = await event(now - 29 * DAY);
    const recentDelivery = await delivery(recent, now - 29 * DAY, 'succeeded');

    // More events than one slice (3), so the purge pages past the held one.
    const more = [];
    for (let i = 0; i < 7; i++) more.push(await event(now - 31 * DAY - i));

    const purged = await purgeBefore(db.db, cutoff, 3);
    expect(purged).toMatchObject({ events: 8, deliveries: 3, attempts: 3 });
    expect(await events([old, ...more])).toBe(0);
    expect(await deliveries([...oldDone, resent])).toBe(0);
    expect(await attempts([...oldDone, resent])).toBe(0);
    expect(await events([held, recent])).toBe(2);
    expect(await deliveries([...heldDeliveries, recentDelivery])).toBe(3);
    expect(await attempts([...heldDeliveries, recentDelivery])).toBe(3);

    // Settled, the held event goes at the next run; a second run of the same finds nothing else.
    await db.pool.query(`update webhooks.deliveries set status = 'succeeded' where id = $1`, [
      heldDeliveries[1],
    ]);
    expect(await purgeBefore(db.db, cutoff, 3)).toMatchObject({ events: 1, deliveries: 2, attempts: 2 });
    expect(await purgeBefore(db.db, cutoff, 3)).toMatchObject({ events: 0, deliveries: 0, attempts: 0 });
    expect(await events([recent])).toBe(1);
  });

  it('keeps the newest event of each resource, which per_resource ordering of its next change needs', async () => {
    const key = 'order:ord_retained';
    const v1 = await event(now - 50 * DAY, { key, version: 1 });
    const v2 = await event(now - 45 * DAY, { key, version: 2 });
    const other = await event(now - 45 * DAY, { key: 'order:ord_newer', version: 1 });
    await event(now - DAY, { key: 'order:ord_newer', version: 2 });
    await purgeBefore(db.db, cutoff);
    expect(await events([v1, other])).toBe(0);
    expect(await events([v2])).toBe(1);
    // Its next change arrives: the old version goes at the next run.
    await event(now, { key, version: 3 });
    await purgeBefore(db.db, cutoff);
    expect(await events([v2])).toBe(0);
  });

  it('removes e-mails sent and replays finished before the cutoff, nothing unsent or running', async () => {
    const at = (days: number) => new Date(now - days * DAY);
    await db.pool.query(
      `insert into webhooks.notifications (id, account_id, endpoint_id, kind, detail, created_at, sent_at) values
         ('ntf_old', 'acct_r', 'we_1', 'unhealthy', '{}', $1, $1),
         ('ntf_unsent', 'acct_r', 'we_1', 'unhealthy', '{}', $1, null),
         ('ntf_new', 'acct_r', 'we_1', 'unhealthy', '{}', $2, $2)`,
      [at(40), at(1)],
    );
    await db.pool.query(
      `insert into webhooks.replays (id, kind, account_id, livemode, since, status, created_at, completed_at) values
         ('rcv_old', 'recovery', 'acct_r', false, $1, 'completed', $1, $1),
         ('rcv_running', 'recovery', 'acct_r', false, $1, 'running', $1, null),
         ('rcv_new', 'recovery', 'acct_r', false, $2, 'completed', $2, $2)`,
      [at(40), at(1)],
    );
    const purged = await purgeBefore(db.db, cutoff);
    expect(purged).toMatchObject({ notifications: 1, replays: 1 });
    const left = await db.pool.query(
      `select id from webhooks.notifications union all select id from webhooks.replays order by id`,
    );
    expect(left.rows.map((r) => r.id)).toEqual(['ntf_new', 'ntf_unsent', 'rcv_new', 'rcv_running']);
  });
});
