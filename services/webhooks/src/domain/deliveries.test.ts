// Deliveries, resends, test events and the event log, against a real database.
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import type { Caller } from '@mcs/kit/caller';
import { newId } from '@mcs/kit/ids';
import { commerce, events as eventsProto } from '@mcs/proto';
import { render } from '@mcs/rest';
import { apiErrorOf, freshDatabase, type MigratedDatabase } from '@mcs/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateWebhooks } from '../db/migrate.ts';
import { defaultTestType, eventTypeOf, listDeliveries, retryDelivery, sendTestEvent } from './deliveries.ts';
import { createEndpoint, EVENT_TYPES } from './endpoints.ts';
import { getEvent, listEvents } from './events.ts';
import { envelopeBody, recordEvent } from './fanout.ts';
import { sampleData } from './samples.ts';
import { createSecretBox } from './secrets.ts';

let db: MigratedDatabase;
const box = createSecretBox(Buffer.alloc(32, 4));
const LEASE = 5_000;
let n = 0;

beforeAll(async () => {
  db = await freshDatabase(migrateWebhooks);
});
afterAll(() => db?.close());

async function account(events: string[] = ['*']) {
  const caller: Caller = { accountId: `acct_d${++n}`, livemode: false };
  const { endpoint } = await db.db.transaction((tx) =>
    createEndpoint(
      tx,
      caller,
      { url: 'https://93.184.215.14/hook', events },
      { box, policy: { allowHttp: false, allowPrivate: false } },
    ),
  );
  return { caller, endpoint };
}

/** An order event for `caller`, recorded by fan-out as the consumer does. */
async function emit(caller: Caller, type = eventsProto.EventType.ORDER_CREATED) {
  const event = create(eventsProto.EventSchema, {
    id: newId('evt', Date.now() + ++n),
    type,
    createdAt: timestampFromMs(Date.now()),
    data: {
      case: 'order',
      value: create(commerce.OrderSchema, {
        id: `ord_${n}`,
        status: commerce.OrderStatus.PENDING,
        currency: 'EUR',
      }),
    },
    livemode: caller.livemode,
    accountId: caller.accountId,
  });
  const payload = toBinary(eventsProto.EventSchema, event);
  const queued = await recordEvent(db.db, event, payload, LEASE);
  return { event, payload, queued };
}

async function fail(deliveryId: string, attempts: number, status: 'failed' | 'pending' = 'failed') {
  for (let i = 1; i <= attempts; i++) {
    await db.pool.query(
      `insert into webhooks.attempts (delivery_id, number, at, status_code, error, latency_ms, response_excerpt)
       values ($1, $2, now(), 500, 'HTTP 500', 12, 'nope')`,
      [deliveryId, i],
    );
  }
  await db.pool.query(
    `update webhooks.deliveries set status = $2, attempts = $3, next_attempt_at = null where id = $1`,
    [deliveryId, status, attempts],
  );
}

const codeOf = async (p: Promise<unknown>) => (await apiErrorOf(p)).code;

describe('listDeliveries', () => {
  it('lists newest first, each with its attempts in order, paged and filtered', async () => {
    const { caller, endpoint } = await account();
    const a = await emit(caller);
    const b = await emit(caller);
    await fail(a.queued[0]!.deliveryId, 3);
    const page = await listDeliveries(db.db, caller, endpoint.id, {});
    expect(page.hasMore).toBe(false);
    expect(page.data.map((d) => d.eventId)).toEqual([b.event.id, a.event.id]);
    const failed = page.data[1]!;
    expect(failed).toMatchObject({
      status: 'failed',
      attempts: 3,
      eventType: 'order.created',
      endpointId: endpoint.id,
    });
    expect(failed.attemptLog.map((x) => x.number)).toEqual([1, 2, 3]);
    expect(failed.attemptLog[0]).toMatchObject({
      statusCode: 500,
      error: 'HTTP 500',
      latencyMs: 12,
      responseExcerpt: 'nope',
    });
    expect(page.data[0]!.attemptLog).toEqual([]);

    const first = await listDeliveries(db.db, caller, endpoint.id, { limit: 1 });
    expect(first.hasMore).toBe(true);
    const second = await listDeliveries(db.db, caller, endpoint.id, {
      limit: 1,
      startingAfter: first.data[0]!.id,
    });
    expect(second.data.map((d) => d.eventId)).toEqual([a.event.id]);
    const onlyFailed = await listDeliveries(db.db, caller, endpoint.id, { status: 'failed' });
    expect(onlyFailed.data.map((d) => d.id)).toEqual([a.queued[0]!.deliveryId]);
  });

  it("refuses another account's endpoint", async () => {
    const { endpoint } = await account();
    const { caller: other } = await account();
    expect(await codeOf(listDeliveries(db.db, other, endpoint.id, {}))).toBe('resource_missing');
  });
});

describe('retryDelivery', () => {
  it('starts the schedule over for a failed delivery and queues it', async () => {
    const { caller, endpoint } = await account();
    const { queued } = await emit(caller);
    const id = queued[0]!.deliveryId;
    await fail(id, 6);
    const now = new Date();
    const { delivery, queued: again } = await db.db.transaction((tx) =>
      retryDelivery(tx, caller, endpoint.id, id, LEASE, now),
    );
    expect(delivery).toMatchObject({ id, status: 'pending', attempts: 6 });
    expect(again).toEqual({
      deliveryId: id,
      endpointId: endpoint.id,
      lease: new Date(now.getTime() + LEASE),
    });
    const { rows } = await db.pool.query('select * from webhooks.deliveries where id = $1', [id]);
    expect(rows[0]).toMatchObject({ status: 'pending', attempts: 6, schedule_start: 6 });
    expect(rows[0].next_attempt_at).toEqual(again?.lease);
  });

  it('keeps the schedule of a pending delivery, just due now', async () => {
    const { caller, endpoint } = await account();
    const { queued } = await emit(caller);
    const id = queued[0]!.deliveryId;
    await fail(id, 2, 'pending');
    await db.db.transaction((tx) => retryDelivery(tx, caller, endpoint.id, id, LEASE));
    const { rows } = await db.pool.query('select * from webhooks.deliveries where id = $1', [id]);
    expect(rows[0]).toMatchObject({ status: 'pending', attempts: 2, schedule_start: 0 });
  });

  it('leaves a delivery whose attempt is in flight (its lease ahead) as it is, queuing nothing', async () => {
    const { caller, endpoint } = await account();
    const { queued } = await emit(caller);
    const id = queued[0]!.deliveryId;
    // Claimed for an attempt: its lease ends within LEASE.
    const now = new Date();
    const lease = new Date(now.getTime() + LEASE / 2);
    await db.pool.query('update webhooks.deliveries set next_attempt_at = $2 where id = $1', [id, lease]);
    const retry = () => db.db.transaction((tx) => retryDelivery(tx, caller, endpoint.id, id, LEASE, now));
    // Twenty retries at once (the endpoint's lock makes them take turns): not one more attempt.
    const answers = await Promise.all(Array.from({ length: 20 }, retry));
    for (const a of answers) {
      expect(a.queued).toBeUndefined();
      expect(a.delivery).toMatchObject({ id, status: 'pending' });
    }
    const { rows } = await db.pool.query('select next_attempt_at from webhooks.deliveries where id = $1', [
      id,
    ]);
    expect(rows[0].next_attempt_at).toEqual(lease);
    // A retry due later than a lease is made due now, as before.
    await db.pool.query('update webhooks.deliveries set next_attempt_at = $2 where id = $1', [
      id,
      new Date(now.getTime() + 10 * LEASE),
    ]);
    expect((await retry()).queued).toMatchObject({ deliveryId: id });
  });

  it('refuses while the endpoint is unhealthy or disabled, and unknown deliveries', async () => {
    const { caller, endpoint } = await account();
    const { queued } = await emit(caller);
    const id = queued[0]!.deliveryId;
    const retry = (endpointId: string, deliveryId: string) =>
      apiErrorOf(db.db.transaction((tx) => retryDelivery(tx, caller, endpointId, deliveryId, LEASE)));
    for (const status of ['unhealthy', 'disabled']) {
      await db.pool.query('update webhooks.endpoints set status = $2 where id = $1', [endpoint.id, status]);
      const err = await retry(endpoint.id, id);
      expect(err).toMatchObject({ code: 'invalid_state_transition', param: 'id' });
      expect(err.err.rawMessage).toContain(`/v1/webhooks/${endpoint.id}/enable`);
    }
    await db.pool.query(`update webhooks.endpoints set status = 'enabled' where id = $1`, [endpoint.id]);
    expect(await retry(endpoint.id, 'dlv_nope')).toMatchObject({
      code: 'resource_missing',
      param: 'delivery',
    });
    // A delivery of another endpoint of the same account is not reachable through this one.
    const { endpoint: second } = await db.db.transaction((tx) =>
      createEndpoint(
        tx,
        caller,
        { url: 'https://93.184.215.14/other', events: ['*'] },
        { box, policy: { allowHttp: false, allowPrivate: false } },
      ),
    );
    expect(await retry(second.id, id)).toMatchObject({ code: 'resource_missing', param: 'delivery' });
  });
});

describe('test events', () => {
  it('builds sample data of the right kind for every event type', () => {
    const now = new Date('2026-01-02T03:04:05.000Z');
    for (const type of EVENT_TYPES) {
      const data = sampleData(type, true, now);
      expect(data.case, type).toBeDefined();
      const event = create(eventsProto.EventSchema, {
        id: 'evt_x',
        type: eventTypeOf(type),
        data,
        livemode: true,
      });
      const json = render(eventsProto.EventSchema, event) as Record<string, any>;
      expect(json.type).toBe(type);
      expect(json.data.object, type).toBe(type.split('.')[0]);
      expect(json.data.id).toMatch(/^[a-z]+_[0-9a-z]{26}$/);
      expect(json.data).toMatchObject({ livemode: true, created_at: now.toISOString() });
    }
    const failed = render(
      eventsProto.EventSchema,
      create(eventsProto.EventSchema, { data: sampleData('order.created', false, now) }),
    ) as Record<string, any>;
    expect(failed.data).toMatchObject({ status: 'pending', total: 1200, currency: 'EUR' });
  });

  it('defaults to the first subscribed type, order.created for "*"', async () => {
    expect(defaultTestType((await account(['message.sent', 'order.created'])).endpoint)).toBe('message.sent');
    expect(defaultTestType((await account(['*'])).endpoint)).toBe('order.created');
  });

  it('records a test event for this endpoint only, outside the event log', async () => {
    const { caller, endpoint } = await account(['order.updated']);
    await db.db.transaction((tx) =>
      createEndpoint(
        tx,
        caller,
        { url: 'https://93.184.215.14/other', events: ['*'] },
        { box, policy: { allowHttp: false, allowPrivate: false } },
      ),
    );
    const { delivery, queued, event } = await db.db.transaction((tx) =>
      sendTestEvent(tx, caller, endpoint.id, undefined, LEASE),
    );
    expect(delivery).toMatchObject({
      endpointId: endpoint.id,
      eventType: 'order.updated',
      status: 'pending',
    });
    expect(queued).toMatchObject({ deliveryId: delivery.id, endpointId: endpoint.id });
    const { rows } = await db.pool.query('select * from webhooks.deliveries where event_id = $1', [event.id]);
    expect(rows).toHaveLength(1);
    const stored = await db.pool.query('select body, test from webhooks.events where id = $1', [event.id]);
    expect(stored.rows[0]).toEqual({ body: envelopeBody(event), test: true });
    expect(await codeOf(getEvent(db.db, caller, event.id))).toBe('resource_missing');
    expect((await listEvents(db.db, caller, {})).data).toEqual([]);
  });

  it('refuses an endpoint that is not enabled', async () => {
    const { caller, endpoint } = await account();
    await db.pool.query(`update webhooks.endpoints set status = 'unhealthy' where id = $1`, [endpoint.id]);
    expect(
      await codeOf(db.db.transaction((tx) => sendTestEvent(tx, caller, endpoint.id, undefined, LEASE))),
    ).toBe('invalid_state_transition');
  });
});

describe('the event log', () => {
  it('returns events as published, newest first, by type, per account and mode', async () => {
    const { caller } = await account();
    const a = await emit(caller, eventsProto.EventType.ORDER_CREATED);
    const b = await emit(caller, eventsProto.EventType.ORDER_UPDATED);
    const c = await emit(caller, eventsProto.EventType.ORDER_CREATED);

    const all = await listEvents(db.db, caller, {});
    expect(all.data.map((e) => e.id)).toEqual([c.event.id, b.event.id, a.event.id]);
    expect(fromBinary(eventsProto.EventSchema, all.data[0]!.payload)).toEqual(c.event);
    expect((await listEvents(db.db, caller, { type: 'order.created' })).data.map((e) => e.id)).toEqual([
      c.event.id,
      a.event.id,
    ]);
    const page = await listEvents(db.db, caller, { limit: 2 });
    expect(page.hasMore).toBe(true);
    expect(
      (await listEvents(db.db, caller, { startingAfter: page.data[1]!.id })).data.map((e) => e.id),
    ).toEqual([a.event.id]);
    expect(await codeOf(listEvents(db.db, caller, { limit: 101 }))).toBe('invalid_value');
    for (const startingAfter of ['garbage', 'ord_01kaaaaaaaaaaaaaaaaaaaaaaa']) {
      const e = await apiErrorOf(listEvents(db.db, caller, { startingAfter }));
      expect([e.code, e.param]).toEqual(['invalid_value', 'starting_after']);
    }

    expect(Buffer.from((await getEvent(db.db, caller, b.event.id)).payload)).toEqual(Buffer.from(b.payload));
    for (const other of [
      { ...caller, accountId: 'acct_someone_else' },
      { ...caller, livemode: true },
    ]) {
      expect(await codeOf(getEvent(db.db, other, b.event.id))).toBe('resource_missing');
      expect((await listEvents(db.db, other, {})).data).toEqual([]);
    }
  });
});
