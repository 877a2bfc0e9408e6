// The consumer and fan-out against the real PostgreSQL and NATS JetStream: the messages ready
// together are recorded by one statement and acked after it; a redelivered event (another
// stream message with the same event id) records nothing twice; a failed batch is acked never; a
// message holding several events (EventBatch) is recorded whole and acked once.
import { create, toBinary } from '@bufbuild/protobuf';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import type { Caller } from '@mcs/kit/caller';
import { type Db, NAMED_MAX_ROWS } from '@mcs/kit/db';
import { createLogger } from '@mcs/kit/log';
import { connectNats, ensureStream, type StreamNames, streamNames } from '@mcs/kit/nats';
import { commerce, events } from '@mcs/proto';
import { createTestNats, freshDatabase, type MigratedDatabase, type TestNats, until } from '@mcs/testkit';
import { drizzle } from 'drizzle-orm/node-postgres';
import type { NatsConnection } from 'nats';
import type pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startConsumer } from './consumer.ts';
import { migrateWebhooks } from './db/migrate.ts';
import { createEndpoint } from './domain/endpoints.ts';
import { envelopeBody, type QueuedDelivery, recordEvents } from './domain/fanout.ts';
import { createSecretBox } from './domain/secrets.ts';
import { countingDb } from './testing.ts';

let db: MigratedDatabase;
let nats: TestNats;
let nc: NatsConnection;
let names: StreamNames;
const box = createSecretBox(Buffer.alloc(32, 5));
const log = createLogger('consumer-test', process.env.TEST_LOG ?? 'silent');
const open: Array<{ stop(): Promise<void> }> = [];
let n = 0;

beforeAll(async () => {
  db = await freshDatabase(migrateWebhooks);
  nats = createTestNats();
  nc = await connectNats(nats.url, 'consumer-test');
  names = streamNames(nats.prefix);
  await ensureStream(await nc.jetstreamManager(), names);
});
afterEach(async () => {
  for (const o of open.splice(0).reverse()) await o.stop();
});
afterAll(async () => {
  await nc?.close();
  await nats?.drop();
  await db?.close();
});

async function account(endpoints: Array<{ events: string[]; status?: 'unhealthy' }>) {
  const caller: Caller = { accountId: `acct_c${++n}`, livemode: false };
  const ids: string[] = [];
  for (const e of endpoints) {
    const { endpoint } = await db.db.transaction((tx) =>
      createEndpoint(
        tx,
        caller,
        { url: `https://example.com/hook/${++n}`, events: e.events },
        { box, policy: { allowHttp: false, allowPrivate: false } },
      ),
    );
    if (e.status)
      await db.pool.query('update webhooks.endpoints set status = $2 where id = $1', [endpoint.id, e.status]);
    ids.push(endpoint.id);
  }
  return { caller, endpointIds: ids };
}

function orderEvent(caller: Caller, type = events.EventType.ORDER_CREATED) {
  const event = create(events.EventSchema, {
    id: `evt_c${++n}`,
    type,
    createdAt: timestampFromMs(Date.now()),
    data: { case: 'order', value: create(commerce.OrderSchema, { id: `ord_${n}`, currency: 'EUR' }) },
    livemode: caller.livemode,
    accountId: caller.accountId,
  });
  return { event, payload: toBinary(events.EventSchema, event) };
}

async function count(sql: string, params: unknown[]): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(sql, params);
  return rows[0]!.n;
}

describe('fan-out (recordEvents)', () => {
  it('records a batch in one statement and returns what each first attempt needs', async () => {
    const { caller, endpointIds } = await account([
      { events: ['*'] },
      { events: ['order.created'] },
      { events: ['order.updated'] },
      { events: ['*'], status: 'unhealthy' },
    ]);
    const [all, created, , unhealthy] = endpointIds;
    const a = orderEvent(caller);
    const b = orderEvent(caller);
    const counted = countingDb(db.pool);
    const now = new Date();
    // `a` twice: a message and its redelivery in one batch.
    const queued = await recordEvents(counted.db, [a, b, a], 15_000, now);
    expect(counted.statements).toHaveLength(1);
    expect(queued).toHaveLength(4); // 2 events × 2 enabled matching endpoints
    const sealed = await db.pool.query<{ id: string; secret_sealed: Buffer; url: string }>(
      'select id, secret_sealed, url from webhooks.endpoints where id = any($1)',
      [[all, created]],
    );
    const byId = new Map(sealed.rows.map((r) => [r.id, r]));
    for (const q of queued) {
      expect(q.lease.getTime()).toBe(now.getTime() + 15_000);
      const ev = q.target!.eventId === a.event.id ? a.event : b.event;
      expect(q.target).toEqual({
        eventId: ev.id,
        url: byId.get(q.endpointId)!.url,
        secretSealed: byId.get(q.endpointId)!.secret_sealed,
        body: envelopeBody(ev),
        attempts: 0,
        scheduleStart: 0,
        maxRate: null,
      });
    }
    // The unhealthy endpoint gets its deliveries listed as skipped, and nothing to attempt.
    expect(
      await count(
        `select count(*)::int as n from webhooks.deliveries where endpoint_id = $1 and status = 'skipped'`,
        [unhealthy],
      ),
    ).toBe(2);
    expect(queued.some((q) => q.endpointId === unhealthy)).toBe(false);
    // Recorded again (JetStream redelivered the batch): nothing new, nothing to attempt.
    expect(await recordEvents(db.db, [b, a], 15_000)).toEqual([]);
    expect(
      await count('select count(*)::int as n from webhooks.deliveries where event_id = any($1)', [
        [a.event.id, b.event.id],
      ]),
    ).toBe(6);
    expect(
      await count('select count(*)::int as n from webhooks.events where id = any($1)', [
        [a.event.id, b.event.id],
      ]),
    ).toBe(2);
  });
  it('records a batch larger than a named statement takes (kit/db NAMED_MAX_ROWS) the same way, once', async () => {
    // A backlog after an outage arrives as batches of thousands of events: they go unnamed, each
    // planned for its own size (a generic plan's nested loop was quadratic in the batch).
    const { caller, endpointIds } = await account([{ events: ['*'] }, { events: ['order.created'] }]);
    const batch = Array.from({ length: NAMED_MAX_ROWS * 20 + 3 }, () => orderEvent(caller));
    const queued = await recordEvents(db.db, batch, 15_000);
    expect(queued).toHaveLength(batch.length * 2);
    const pairs = new Set(queued.map((q) => `${q.target!.eventId} ${q.endpointId}`));
    for (const { event } of batch)
      for (const id of endpointIds) expect(pairs.has(`${event.id} ${id}`)).toBe(true);
    for (const q of queued) {
      const { event } = batch.find((b) => b.event.id === q.target!.eventId)!;
      expect(q.target!.body).toBe(envelopeBody(event));
    }
    // Again, with a few new events among them: only those are recorded.
    const more = [...batch, orderEvent(caller), orderEvent(caller)];
    const again = await recordEvents(db.db, more, 15_000);
    expect(new Set(again.map((q) => q.target!.eventId))).toEqual(
      new Set(more.slice(-2).map((e) => e.event.id)),
    );
    expect(
      await count('select count(*)::int as n from webhooks.deliveries where endpoint_id = any($1)', [
        endpointIds,
      ]),
    ).toBe(more.length * 2);
  });
});

describe('fan-out of operational events and paused endpoints', () => {
  it('sends webhook_endpoint.* only to endpoints naming it, never to the endpoint it is about', async () => {
    const { caller, endpointIds } = await account([
      { events: ['*'] },
      { events: ['webhook_endpoint.unhealthy'] },
      { events: ['webhook_endpoint.unhealthy', 'order.created'] },
      { events: ['webhook_endpoint.disabled'] },
    ]);
    const [star, monitor, subject] = endpointIds;
    const { event, payload } = orderEvent(caller, events.EventType.WEBHOOK_ENDPOINT_UNHEALTHY);
    const queued = await recordEvents(db.db, [{ event, payload, aboutEndpoint: subject! }], 15_000);
    expect(queued.map((q) => q.endpointId)).toEqual([monitor]);
    // "*" still gets every resource event.
    const order = await recordEvents(db.db, [orderEvent(caller)], 15_000);
    expect(order.map((q) => q.endpointId).sort()).toEqual([star, subject].sort());
  });

  it('schedules a paused endpoint’s new deliveries at the pause’s end and does not start them', async () => {
    const { caller, endpointIds } = await account([{ events: ['*'] }, { events: ['*'] }]);
    const [paused, other] = endpointIds;
    // A pause shorter than the lease: still not started now (the lease is no "not before").
    const until = new Date(Date.now() + 2_000);
    await db.pool.query('update webhooks.endpoints set paused_until = $2 where id = $1', [paused, until]);
    const { event, payload } = orderEvent(caller);
    const queued = await recordEvents(db.db, [{ event, payload }], 15_000);
    expect(queued.map((q) => q.endpointId)).toEqual([other]);
    expect(queued[0]!.target).toBeDefined();
    const { rows } = await db.pool.query(
      'select status, next_attempt_at from webhooks.deliveries where event_id = $1 and endpoint_id = $2',
      [event.id, paused],
    );
    expect(rows).toEqual([{ status: 'pending', next_attempt_at: until }]);
  });
});

describe('consumer', () => {
  it('records the messages ready together with one statement, acks them, and records a repeat once', async () => {
    const { caller, endpointIds } = await account([{ events: ['*'] }]);
    const js = nc.jetstream();
    const sent = Array.from({ length: 20 }, () => orderEvent(caller));
    for (const e of sent) await js.publish(names.subject('order.created'), e.payload, { msgID: e.event.id });
    // The same event again under another message id (a republish after the duplicate window).
    await js.publish(names.subject('order.created'), sent[0]!.payload, {
      msgID: `${sent[0]!.event.id}-again`,
    });
    // Undecodable: terminated, and the batch around it still recorded.
    await js.publish(names.subject('order.created'), new Uint8Array([0xff, 0xff, 0xff]));

    const counted = countingDb(db.pool);
    const got: QueuedDelivery[] = [];
    open.push(
      await startConsumer({
        nc,
        names,
        db: counted.db,
        log,
        leaseMs: 15_000,
        onQueued: (q) => got.push(...q),
      }),
    );
    await until('20 enqueued deliveries', async () => got.length >= 20);
    const jsm = await nc.jetstreamManager();
    await until('the consumer to have acked everything', async () => {
      const info = await jsm.consumers.info(names.stream, names.durable('webhooks'));
      return info.num_ack_pending === 0 && info.num_pending === 0;
    });
    // Interest retention: once the only consumer acked (or terminated) them, the stream keeps none.
    await until('an empty stream', async () => (await jsm.streams.info(names.stream)).state.messages === 0);
    await new Promise((r) => setTimeout(r, 200));
    expect(new Set(got.map((q) => q.deliveryId)).size).toBe(20);
    expect(got).toHaveLength(20);
    expect(got.every((q) => q.endpointId === endpointIds[0])).toBe(true);
    // 22 messages, all of them ready at once: far fewer statements than messages.
    expect(counted.statements.length).toBeGreaterThanOrEqual(1);
    expect(counted.statements.length).toBeLessThanOrEqual(3);
    expect(
      await count('select count(*)::int as n from webhooks.deliveries where event_id = any($1)', [
        sent.map((e) => e.event.id),
      ]),
    ).toBe(20);
  });

  it('records every event of a batch message (EventBatch) with its seq and version, and acks it once; terminates one it cannot read', async () => {
    const { caller, endpointIds } = await account([{ events: ['*'] }]);
    const js = nc.jetstream();
    const sent = Array.from({ length: 6 }, () => orderEvent(caller));
    const batch = create(events.EventBatchSchema, {
      events: sent.map((e, i) => ({
        event: e.payload,
        outboxSeq: BigInt(100 + i),
        resourceVersion: i === 0 ? 0 : 1,
      })),
    });
    await js.publish(names.batch, toBinary(events.EventBatchSchema, batch));
    // A batch whose second event is not an Event: the whole message is terminated, none of it recorded.
    const bad = orderEvent(caller);
    await js.publish(
      names.batch,
      toBinary(
        events.EventBatchSchema,
        create(events.EventBatchSchema, {
          events: [{ event: bad.payload }, { event: new Uint8Array([0xff, 0xff]) }],
        }),
      ),
    );
    const got: QueuedDelivery[] = [];
    open.push(
      await startConsumer({ nc, names, db: db.db, log, leaseMs: 15_000, onQueued: (q) => got.push(...q) }),
    );
    await until('6 enqueued deliveries', async () => got.length >= 6);
    const jsm = await nc.jetstreamManager();
    await until('an empty stream', async () => (await jsm.streams.info(names.stream)).state.messages === 0);
    const info = await jsm.consumers.info(names.stream, names.durable('webhooks'));
    expect(info.num_ack_pending).toBe(0);
    expect(info.num_redelivered).toBe(0);
    expect(got.every((q) => q.endpointId === endpointIds[0])).toBe(true);
    const { rows } = await db.pool.query<{
      id: string;
      outbox_seq: string | null;
      resource_version: number | null;
    }>(
      'select id, outbox_seq::text, resource_version from webhooks.events where id = any($1) order by outbox_seq',
      [[...sent.map((e) => e.event.id), bad.event.id]],
    );
    expect(rows.map((r) => r.id)).toEqual(sent.map((e) => e.event.id));
    expect(rows.map((r) => r.outbox_seq)).toEqual(['100', '101', '102', '103', '104', '105']);
    // A version travels with a seq and a resource; 0 means none.
    expect(rows.map((r) => r.resource_version)).toEqual([null, 1, 1, 1, 1, 1]);
  });

  it('acks nothing when recording fails, so JetStream delivers the batch again', async () => {
    const { caller } = await account([{ events: ['*'] }]);
    const e = orderEvent(caller);
    // A database that refuses every statement, as during an outage: at the pool, the one way in
    // for drizzle's queries and for named statements (kit/db executeNamed) alike.
    let refuse = true;
    const down = () => Promise.reject(new Error('database down (injected)'));
    const pool = Object.create(db.pool) as pg.Pool;
    pool.query = ((...args: unknown[]) =>
      refuse
        ? down()
        : (db.pool.query as (...a: unknown[]) => unknown).apply(db.pool, args)) as pg.Pool['query'];
    pool.connect = (() => (refuse ? down() : db.pool.connect())) as pg.Pool['connect'];
    const failing = drizzle(pool) as Db;
    const got: QueuedDelivery[] = [];
    open.push(
      await startConsumer({ nc, names, db: failing, log, leaseMs: 15_000, onQueued: (q) => got.push(...q) }),
    );
    await nc.jetstream().publish(names.subject('order.created'), e.payload, { msgID: e.event.id });
    const jsm = await nc.jetstreamManager();
    await until('the event to be delivered to a consumer', async () => {
      const info = await jsm.consumers.info(names.stream, names.durable('webhooks'));
      return info.num_redelivered > 0 || info.num_ack_pending > 0;
    });
    expect(got).toEqual([]);
    refuse = false;
    await until('the redelivered event to be enqueued', async () => got.length === 1, 10_000);
    expect(got[0]!.target!.eventId).toBe(e.event.id);
  });
});
