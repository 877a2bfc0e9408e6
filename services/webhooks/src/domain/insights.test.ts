// The dashboard's views of deliveries: an event's deliveries to every endpoint, and an
// endpoint's 24-hour success and latency, against a real database.
import { create, toBinary } from '@bufbuild/protobuf';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import type { Caller } from '@mcs/kit/caller';
import { commerce, events as eventsProto } from '@mcs/proto';
import { apiErrorOf, freshDatabase, type MigratedDatabase } from '@mcs/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateWebhooks } from '../db/migrate.ts';
import { attempts } from '../db/schema.ts';
import { createEndpoint } from './endpoints.ts';
import { recordEvent } from './fanout.ts';
import { endpointStats, eventDeliveries } from './insights.ts';
import { createSecretBox } from './secrets.ts';

let db: MigratedDatabase;
const box = createSecretBox(Buffer.alloc(32, 5));
let n = 0;

beforeAll(async () => {
  db = await freshDatabase(migrateWebhooks);
});
afterAll(() => db?.close());

const endpoint = (caller: Caller) =>
  db.db
    .transaction((tx) =>
      createEndpoint(
        tx,
        caller,
        { url: 'https://93.184.215.14/hook', events: ['*'] },
        { box, policy: { allowHttp: false, allowPrivate: false } },
      ),
    )
    .then((r) => r.endpoint);

async function emit(caller: Caller) {
  const event = create(eventsProto.EventSchema, {
    id: `evt_i${String(++n).padStart(6, '0')}`,
    type: eventsProto.EventType.ORDER_CREATED,
    createdAt: timestampFromMs(Date.now()),
    data: { case: 'order', value: create(commerce.OrderSchema, { id: `ord_${n}`, currency: 'EUR' }) },
    livemode: caller.livemode,
    accountId: caller.accountId,
  });
  await recordEvent(db.db, event, toBinary(eventsProto.EventSchema, event), 5_000);
  return event;
}

describe('eventDeliveries', () => {
  it("lists one delivery per endpoint of the caller's event, and nothing of another account's", async () => {
    const caller: Caller = { accountId: 'acct_ins1', livemode: false };
    const [a, b] = [await endpoint(caller), await endpoint(caller)];
    const event = await emit(caller);
    const list = await eventDeliveries(db.db, caller, event.id);
    expect(list.map((d) => d.endpointId).sort()).toEqual([a.id, b.id].sort());
    expect(list.every((d) => d.eventId === event.id && d.status === 'pending')).toBe(true);
    const other: Caller = { accountId: 'acct_ins2', livemode: false };
    expect((await apiErrorOf(eventDeliveries(db.db, other, event.id))).code).toBe('resource_missing');
    expect((await apiErrorOf(eventDeliveries(db.db, { ...caller, livemode: true }, event.id))).code).toBe(
      'resource_missing',
    );
  });
});

describe('endpointStats', () => {
  it('counts attempts per hour over 24 h and takes latency percentiles of answered ones', async () => {
    const caller: Caller = { accountId: 'acct_ins3', livemode: false };
    const ep = await endpoint(caller);
    const now = new Date('2030-05-05T12:30:00Z');
    const rows = [];
    for (let i = 0; i < 10; i++) {
      const event = await emit(caller);
      const [d] = await eventDeliveries(db.db, caller, event.id);
      // 1…10 ms in the current hour, an error an hour earlier, one too old to count.
      rows.push({
        deliveryId: d!.id,
        number: 1,
        at: new Date('2030-05-05T12:10:00Z'),
        statusCode: 200,
        error: null,
        latencyMs: (i + 1) * 10,
        responseExcerpt: 'ok',
      });
      if (i < 3)
        rows.push({
          deliveryId: d!.id,
          number: 2,
          at: new Date('2030-05-05T11:59:00Z'),
          statusCode: null,
          error: 'timeout',
          latencyMs: 10_000,
          responseExcerpt: null,
        });
      if (i === 0)
        rows.push({
          deliveryId: d!.id,
          number: 3,
          at: new Date('2030-05-04T12:59:00Z'),
          statusCode: 500,
          error: 'HTTP 500',
          latencyMs: 1,
          responseExcerpt: null,
        });
    }
    await db.db.insert(attempts).values(rows);
    // As recording an attempt does (delivery/record.ts): the delivery's last attempt time.
    await db.pool.query(
      `update webhooks.deliveries d set last_attempt_at = a.at
         from (select delivery_id, max(at) at from webhooks.attempts group by delivery_id) a
        where a.delivery_id = d.id`,
    );
    // A delivery last attempted before the window is not read at all, whatever its attempts say.
    const stale = await eventDeliveries(db.db, caller, (await emit(caller)).id);
    await db.db.insert(attempts).values({
      deliveryId: stale[0]!.id,
      number: 1,
      at: new Date('2030-05-05T12:00:00Z'),
      statusCode: 200,
      error: null,
      latencyMs: 5,
      responseExcerpt: 'ok',
    });
    await db.pool.query(
      `update webhooks.deliveries set last_attempt_at = '2030-05-01T00:00:00Z' where id = $1`,
      [stale[0]!.id],
    );
    const stats = await endpointStats(db.db, caller, ep.id, now);
    expect(stats.buckets).toHaveLength(24);
    expect(stats.buckets[0]!.start.toISOString()).toBe('2030-05-04T13:00:00.000Z');
    expect(stats.buckets.at(-1)).toMatchObject({ succeeded: 10, failed: 0 });
    expect(stats.buckets.at(-2)).toMatchObject({ succeeded: 0, failed: 3 });
    expect(stats.attempts).toBe(13);
    expect(stats.p50).toBe(50);
    expect(stats.p90).toBe(90);
    expect(stats.p99).toBe(100);
  });
});
