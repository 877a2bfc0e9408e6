// The outbox (outbox.ts) and its relay (relay.ts) against the real PostgreSQL and NATS JetStream
// of the machine: events published from memory after commit (those of one turn in one message),
// nothing for a rolled-back write, rows left behind taken by the poll once they have aged,
// deletes grouped into batches.
import { randomBytes } from 'node:crypto';
import { fromBinary } from '@bufbuild/protobuf';
import { events } from '@mcs/proto';
import { pgSchema, text } from 'drizzle-orm/pg-core';
import { AckPolicy, connect, DeliverPolicy, type JetStreamClient, type NatsConnection } from 'nats';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
// testkit is built on kit, so kit cannot depend on it (a cycle); until.ts imports nothing.
import { until } from '../../testkit/src/until.ts';
import { DEFAULT_DATABASE_URL, DEFAULT_NATS_URL } from './config.ts';
import { createDatabase, type Database } from './db.ts';
import { LINGER_BATCH_EVENTS } from './linger.ts';
import { createLogger } from './log.ts';
import { createEventPublisher, ensureStream, type StreamNames, streamNames } from './nats.ts';
import {
  appendEvent,
  insertWithEvent,
  type NewEvent,
  OUTBOX_SEQ_HEADER,
  outboxEntry,
  outboxTable,
  RESOURCE_VERSION_HEADER,
  transaction,
} from './outbox.ts';
import { type Relay, type RelayOptions, startRelay } from './relay.ts';

const schema = pgSchema('relay_test');
const outbox = outboxTable(schema);
const things = schema.table('things', { id: text('id').primaryKey() });

const serverUrl = process.env.DATABASE_URL ?? DEFAULT_DATABASE_URL;
const dbName = `mcs_test_${randomBytes(8).toString('hex')}`;
let database: Database;
let nc: NatsConnection;
let names: StreamNames;
const relays: Relay[] = [];

async function onMaintenance(query: string) {
  const u = new URL(serverUrl);
  u.pathname = '/postgres';
  const c = new pg.Client({ connectionString: u.toString() });
  await c.connect();
  try {
    await c.query(query);
  } finally {
    await c.end();
  }
}

beforeAll(async () => {
  await onMaintenance(`create database "${dbName}"`);
  const u = new URL(serverUrl);
  u.pathname = `/${dbName}`;
  database = createDatabase(u.toString(), { name: 'relay-test', max: 8 });
  await database.pool.query(`
    create schema relay_test;
    create table relay_test.outbox (
      seq bigserial primary key, event_id text not null unique, type text not null,
      payload bytea not null, resource_version integer, created_at timestamptz not null default now());
    create table relay_test.things (id text primary key);`);
  nc = await connect({ servers: process.env.NATS_URL ?? DEFAULT_NATS_URL });
  names = streamNames(`t${randomBytes(6).toString('hex')}`);
  await ensureStream(await nc.jetstreamManager(), names);
});
afterEach(async () => {
  for (const r of relays.splice(0)) await r.stop();
  await database.pool.query('truncate relay_test.outbox, relay_test.things');
});
afterAll(async () => {
  await (await nc?.jetstreamManager())?.streams.delete(names.stream).catch(() => {});
  await nc?.close();
  await database?.close();
  await onMaintenance(`drop database if exists "${dbName}" with (force)`);
});

/** The relay's own pool, recording every statement it sends (the database is the real one). */
function recordingPool(): {
  pool: pg.Pool;
  statements: Array<{ text: string; values: unknown[] | undefined }>;
} {
  const statements: Array<{ text: string; values: unknown[] | undefined }> = [];
  const real = database.pool;
  const note = (text: unknown, values: unknown) => {
    if (typeof text === 'string') statements.push({ text: text.trim(), values: values as unknown[] });
    // A named statement comes as a config object.
    else if (text && typeof (text as pg.QueryConfig).text === 'string') {
      const config = text as pg.QueryConfig;
      statements.push({ text: config.text.trim(), values: config.values as unknown[] });
    }
  };
  const pool = Object.create(real) as pg.Pool;
  pool.query = ((text: unknown, values?: unknown) => {
    note(text, values);
    return real.query(text as string, values as unknown[]);
  }) as pg.Pool['query'];
  pool.connect = (async () => {
    const client = await real.connect();
    const query = client.query.bind(client);
    return Object.assign(Object.create(client), {
      query: (text: unknown, values?: unknown) => {
        note(text, values);
        return query(text as string, values as unknown[]);
      },
      release: () => client.release(),
    });
  }) as pg.Pool['connect'];
  return { pool, statements };
}

function relay(over: Partial<RelayOptions> = {}): Relay {
  const r = startRelay({
    pool: database.pool,
    schema: 'relay_test',
    js: createEventPublisher(nc),
    names,
    log: createLogger('relay-test', 'silent'),
    // By default no poll in the test's time: what arrives came from memory.
    pollMs: 60_000,
    minAgeMs: 60_000,
    ...over,
  });
  relays.push(r);
  return r;
}

let n = 0;
function newEvent(resourceVersion?: number): NewEvent {
  return {
    type: events.EventType.ORDER_CREATED,
    accountId: `acct_${++n}`,
    livemode: false,
    data: { case: 'order', value: { id: `ord_${n}` } as never },
    ...(resourceVersion === undefined ? {} : { resourceVersion }),
  };
}

/** Event ids in the stream, in stream order (every event of every message, repeats included). */
async function streamEventIds(): Promise<string[]> {
  return (await streamMessages()).map((m) => m.id);
}

/** The stream's events in stream order: event id, outbox seq and resource version (a batch's events in its order). */
async function streamMessages(): Promise<
  Array<{ id: string; seq: string | undefined; version: string | undefined }>
> {
  const jsm = await nc.jetstreamManager();
  const info = await jsm.streams.info(names.stream);
  const total = info.state.messages;
  if (total === 0) return [];
  const name = `probe${randomBytes(4).toString('hex')}`;
  await jsm.consumers.add(names.stream, {
    name,
    ack_policy: AckPolicy.None,
    deliver_policy: DeliverPolicy.All,
    inactive_threshold: 5_000_000_000,
  });
  const consumer = await nc.jetstream().consumers.get(names.stream, name);
  const ids: Array<{ id: string; seq: string | undefined; version: string | undefined }> = [];
  const batch = await consumer.fetch({ max_messages: total, expires: 2_000 });
  let read = 0;
  for await (const m of batch) {
    if (m.subject === names.batch) {
      // Several events in one message (EventBatch): seq and version are its fields.
      for (const item of fromBinary(events.EventBatchSchema, m.data).events) {
        ids.push({
          id: fromBinary(events.EventSchema, item.event).id,
          seq: item.outboxSeq > 0n ? String(item.outboxSeq) : undefined,
          version: item.resourceVersion > 0 ? String(item.resourceVersion) : undefined,
        });
      }
    } else {
      ids.push({
        id: fromBinary(events.EventSchema, m.data).id,
        seq: m.headers?.get(OUTBOX_SEQ_HEADER) || undefined,
        version: m.headers?.get(RESOURCE_VERSION_HEADER) || undefined,
      });
    }
    if (++read === total) break;
  }
  return ids;
}

const outboxIds = async () =>
  (await database.pool.query<{ event_id: string }>('select event_id from relay_test.outbox')).rows.map(
    (r) => r.event_id,
  );
const streamStart = async () => (await nc.jetstreamManager()).streams.info(names.stream);
/** Events in the stream (a batch message counts its events). */
const streamEventCount = async () => (await streamEventIds()).length;

describe('outbox relay', () => {
  it('publishes a committed transaction’s events from memory and deletes their rows', async () => {
    const before = await streamEventCount();
    const { pool, statements } = recordingPool();
    const r = relay({ pool });
    const ids = await r.publishAfter(() =>
      transaction(database.db, async (tx) => [
        (await appendEvent(tx, outbox, newEvent())).id,
        (await appendEvent(tx, outbox, newEvent())).id,
      ]),
    );
    const got = await until('both events in the stream', async () => {
      const all = await streamEventIds();
      return all.length >= before + 2 && all;
    });
    expect(got.slice(before)).toEqual(expect.arrayContaining(ids));
    await until('an empty outbox', async () => (await outboxIds()).length === 0);
    // Nothing read back: besides the start-up poll's one look, the relay sent one delete for both.
    const own = statements.filter((st) => !st.text.startsWith('select 1 from'));
    expect(own.map((st) => st.text)).toEqual([expect.stringMatching(/^delete from .* = any/)]);
    expect(own[0]!.values).toEqual([expect.arrayContaining(ids)]);
  });

  it('publishes every event with its outbox seq and resource version, by each way out, seqs increasing in commit order', async () => {
    const r = relay({ minAgeMs: 0, pollMs: 50 });
    const before = await streamEventCount();
    const ids: string[] = [];
    // From memory: transaction() and insertWithEvent.
    ids.push(
      await r.publishAfter(() =>
        transaction(database.db, async (tx) => (await appendEvent(tx, outbox, newEvent(1))).id),
      ),
    );
    const made = newEvent(2);
    await r.publishAfter(() =>
      insertWithEvent(database.db, things, { id: `thing_${n}` }, { outbox, of: () => made }),
    );
    // Its event id is made inside insertWithEvent: read it from the stream.
    const two = await until('two events in the stream', async () => {
      const all = (await streamMessages()).slice(before);
      return all.length >= 2 && all;
    });
    ids.push(two[1]!.id);
    // Read back (a plain db.transaction), then the poll (written outside publishAfter).
    ids.push(
      await r.publishAfter(() =>
        database.db.transaction(async (tx) => (await appendEvent(tx, outbox, newEvent(3))).id),
      ),
    );
    ids.push((await appendEvent(database.db, outbox, newEvent(4))).id);
    const got = await until('four events in the stream', async () => {
      const all = (await streamMessages()).slice(before);
      return all.length >= 4 && all;
    });
    expect(got.map((m) => m.id)).toEqual(ids);
    const seqs = got.map((m) => Number(m.seq));
    expect(seqs.every((q) => Number.isInteger(q) && q > 0)).toBe(true);
    expect([...seqs].sort((a, b) => a - b)).toEqual(seqs);
    expect(new Set(seqs).size).toBe(4);
    // The resource version travels with the event, whichever way it went out (the poll reads it
    // from the row).
    expect(got.map((m) => m.version)).toEqual(['1', '2', '3', '4']);
  });

  it('publishes nothing for a transaction() that rolled back inside a write that went on', async () => {
    const r = relay({ minAgeMs: 0, pollMs: 100_000 });
    const before = await streamEventCount();
    const kept = await r.publishAfter(async () => {
      // An error caught by the write itself, e.g. an idempotency replay answering instead.
      await transaction(database.db, async (tx) => {
        await appendEvent(tx, outbox, newEvent());
        throw new Error('replay instead');
      }).catch(() => {});
      // A savepoint that rolls back inside a transaction that commits.
      return transaction(database.db, async (tx) => {
        const e = await appendEvent(tx, outbox, newEvent());
        await transaction(tx, async (sp) => {
          await appendEvent(sp, outbox, newEvent());
          throw new Error('savepoint rolled back');
        }).catch(() => {});
        return e;
      });
    });
    await until('an empty outbox', async () => (await outboxIds()).length === 0);
    await new Promise((res) => setTimeout(res, 200));
    expect((await streamEventIds()).slice(before)).toEqual([kept.id]);
  });

  it('reads back the events of a plain db.transaction and publishes only those that committed', async () => {
    const { pool, statements } = recordingPool();
    const r = relay({ pool });
    const before = await streamEventCount();
    const kept = await r.publishAfter(async () => {
      await database.db
        .transaction(async (tx) => {
          await appendEvent(tx, outbox, newEvent());
          throw new Error('rolled back');
        })
        .catch(() => {});
      return database.db.transaction((tx) => appendEvent(tx, outbox, newEvent()));
    });
    await until('an empty outbox', async () => (await outboxIds()).length === 0);
    await new Promise((res) => setTimeout(res, 200));
    expect((await streamEventIds()).slice(before)).toEqual([kept.id]);
    // Both ids were asked for; only the committed one existed.
    const read = statements.filter((st) => st.text.includes('event_id = any($2'));
    expect(read.map((st) => (st.values![1] as string[]).length)).toEqual([2]);
  });

  it('publishes an insertWithEvent row only when the insert took', async () => {
    const r = relay();
    const before = await streamEventCount();
    const first = newEvent();
    const a = await r.publishAfter(() =>
      insertWithEvent(database.db, things, { id: 'thing_1' }, { outbox, of: () => first }),
    );
    expect(a).toEqual({ id: 'thing_1' });
    // The same id again conflicts: neither row nor event is written, and nothing is published.
    const b = await r.publishAfter(() =>
      insertWithEvent(database.db, things, { id: 'thing_1' }, { outbox, of: () => newEvent() }),
    );
    expect(b).toBeUndefined();
    await until('an empty outbox', async () => (await outboxIds()).length === 0);
    await new Promise((res) => setTimeout(res, 200));
    expect(await streamEventCount()).toBe(before + 1);
  });

  it('publishes nothing for a write that rolled back', async () => {
    const r = relay({ minAgeMs: 0, pollMs: 50 });
    const before = await streamEventCount();
    await expect(
      r.publishAfter(() =>
        transaction(database.db, async (tx) => {
          await appendEvent(tx, outbox, newEvent());
          throw new Error('changed my mind');
        }),
      ),
    ).rejects.toThrow('changed my mind');
    await new Promise((res) => setTimeout(res, 300));
    expect(await streamEventCount()).toBe(before);
    expect(await outboxIds()).toEqual([]);
  });

  it('nested publishAfter joins the outer write and publishes when it commits', async () => {
    const real = nc.jetstream();
    const calls: string[] = [];
    const js = {
      publish: (...args: Parameters<JetStreamClient['publish']>) => {
        calls.push(args[2]!.msgID!);
        return real.publish(...args);
      },
    } as JetStreamClient;
    const r = relay({ js });
    const event = await r.publishAfter(() =>
      transaction(database.db, async (tx) => {
        const inner = await r.publishAfter(() => appendEvent(tx, outbox, newEvent()));
        // Not committed yet: nothing may leave.
        expect(calls).toEqual([]);
        return inner;
      }),
    );
    // Published at the end of the event-loop turn, with whatever else committed in it.
    await until('the relay to publish', async () => calls.length > 0);
    expect(calls).toEqual([event.id]);
    await until('an empty outbox', async () => (await outboxIds()).length === 0);
  });

  it('leaves a row whose publish failed to the poll, which takes it once it has aged', async () => {
    const real = nc.jetstream();
    let failing = true;
    const js = {
      publish: (...args: Parameters<JetStreamClient['publish']>) =>
        failing ? Promise.reject(new Error('JetStream unreachable (injected)')) : real.publish(...args),
    } as JetStreamClient;
    const r = relay({ js, pollMs: 50, minAgeMs: 600 });
    const before = await streamEventCount();
    const committedAt = Date.now();
    const event = await r.publishAfter(() =>
      transaction(database.db, (tx) => appendEvent(tx, outbox, newEvent())),
    );
    await new Promise((res) => setTimeout(res, 100));
    expect(await outboxIds()).toEqual([event.id]);
    failing = false;
    await until('an empty outbox', async () => (await outboxIds()).length === 0);
    expect(Date.now() - committedAt).toBeGreaterThanOrEqual(550);
    const ids = await streamEventIds();
    expect(ids.slice(before)).toEqual([event.id]);
  });

  it('deletes a published row whose delete failed without publishing it again, past the duplicate window', async () => {
    // JetStream's window shortened to 0.3 s for this test: only the relay can keep the event from
    // being stored twice once PostgreSQL is back.
    const jsm = await nc.jetstreamManager();
    const window = (await streamStart()).config.duplicate_window;
    await jsm.streams.update(names.stream, { duplicate_window: 300_000_000 });
    // PostgreSQL refusing the relay's deletes (as if gone) until the trigger is dropped.
    await database.pool.query(`
      create function relay_test.no_delete() returns trigger language plpgsql
        as $$ begin raise exception 'PostgreSQL unreachable (injected)'; end $$;
      create trigger no_delete before delete on relay_test.outbox
        for each row execute function relay_test.no_delete();`);
    try {
      const r = relay({ pollMs: 50, minAgeMs: 300 });
      const before = await streamEventCount();
      const event = await r.publishAfter(() =>
        transaction(database.db, (tx) => appendEvent(tx, outbox, newEvent())),
      );
      await until('the event in the stream', async () => (await streamEventCount()) === before + 1);
      // The row aged past minAgeMs and the window while its delete kept failing: polled, not republished.
      await new Promise((res) => setTimeout(res, 1_000));
      expect(await outboxIds()).toEqual([event.id]);
      await database.pool.query('drop trigger no_delete on relay_test.outbox');
      await until('an empty outbox', async () => (await outboxIds()).length === 0);
      expect((await streamEventIds()).slice(before)).toEqual([event.id]);
    } finally {
      await database.pool.query(
        'drop trigger if exists no_delete on relay_test.outbox; drop function if exists relay_test.no_delete()',
      );
      await jsm.streams.update(names.stream, { duplicate_window: window });
    }
  });

  it('polls rows left behind by another process, and only once they have aged', async () => {
    // A row committed by a process that died before publishing it.
    const { event, row } = outboxEntry(newEvent());
    await database.db.insert(outbox).values(row);
    const before = await streamEventCount();
    const started = Date.now();
    relay({ pollMs: 50, minAgeMs: 500 });
    await new Promise((res) => setTimeout(res, 250));
    expect(await outboxIds()).toEqual([event.id]);
    await until('an empty outbox', async () => (await outboxIds()).length === 0);
    expect(Date.now() - started).toBeGreaterThanOrEqual(400);
    expect((await streamEventIds()).slice(before)).toEqual([event.id]);
  });

  it('wake() publishes fresh rows that were not handed over', async () => {
    const r = relay();
    const { event, row } = outboxEntry(newEvent());
    await database.db.insert(outbox).values(row);
    const before = await streamEventCount();
    r.wake();
    await until('an empty outbox', async () => (await outboxIds()).length === 0);
    expect((await streamEventIds()).slice(before)).toEqual([event.id]);
  });

  it('publishes the events of one turn as one message, deletes them in one statement, and drops a repeated lone publish (Nats-Msg-Id)', async () => {
    const { pool, statements } = recordingPool();
    const deletes = () => statements.filter((st) => st.text.startsWith('delete'));
    const r = relay({ pool, deleteWindowMs: 100 });
    const messagesBefore = (await streamStart()).state.messages;
    const before = await streamEventCount();
    const list = await r.publishAfter(() =>
      transaction(database.db, async (tx) => {
        const out = [];
        for (let i = 0; i < 40; i++) out.push(await appendEvent(tx, outbox, newEvent()));
        return out;
      }),
    );
    await until('an empty outbox', async () => (await outboxIds()).length === 0);
    // 40 events in ONE message (an EventBatch), in commit order; one delete statement for them.
    expect(deletes().map((st) => (st.values![0] as string[]).length)).toEqual([40]);
    expect((await streamStart()).state.messages).toBe(messagesBefore + 1);
    expect((await streamMessages()).slice(before).map((m) => m.id)).toEqual(list.map((e) => e.id));
    // A lone event goes with its id as Nats-Msg-Id: published again (a replica's poll meeting the
    // fast path), JetStream drops it. (A batch has no such id: its events published again are
    // stored again, and the webhooks consumer records an event id once.)
    const lone = outboxEntry(newEvent()).row;
    r.publish([lone]);
    await until(
      'the lone event in the stream',
      async () => (await streamStart()).state.messages === messagesBefore + 2,
    );
    await until('a second delete statement', async () => deletes().length === 2);
    r.publish([lone]);
    await until('a third delete statement', async () => deletes().length === 3);
    expect((await streamStart()).state.messages).toBe(messagesBefore + 2);
  });

  it('splits a large turn into batches of at most 256 events', async () => {
    const r = relay();
    const before = await streamEventCount();
    const messagesBefore = (await streamStart()).state.messages;
    const rows = Array.from({ length: 600 }, () => outboxEntry(newEvent()).row);
    r.publish(rows);
    await until('600 events in the stream', async () => (await streamEventCount()) === before + 600);
    expect((await streamStart()).state.messages).toBe(messagesBefore + 3);
    expect((await streamMessages()).slice(before).map((m) => m.id)).toEqual(rows.map((row) => row.eventId));
  });

  describe('linger under load', () => {
    /** The real publisher, noting when each event was handed to it. */
    function timedPublisher() {
      const real = createEventPublisher(nc);
      const at = new Map<string, number>();
      const js = {
        publish: (subject: string, payload: Uint8Array, opts: { msgID?: string }) => {
          const now = performance.now();
          if (subject === names.batch) {
            for (const item of fromBinary(events.EventBatchSchema, payload).events)
              at.set(fromBinary(events.EventSchema, item.event).id, now);
          } else at.set(opts.msgID!, now);
          return real.publish(subject, payload, opts as never);
        },
      };
      return { js, at };
    }
    const rows = (count: number) => Array.from({ length: count }, () => outboxEntry(newEvent()).row);
    const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

    it('below 250 events/s publishes each event at once, however long the linger', async () => {
      const { js, at } = timedPublisher();
      const r = relay({ js, lingerMs: 60_000 });
      for (const [row] of Array.from({ length: 5 }, () => rows(1))) {
        r.publish([row!]);
        await until(`event ${row!.eventId} published`, async () => at.has(row!.eventId), {
          timeoutMs: 2_000,
        });
        await pause(20);
      }
    });

    it('from 250 events/s holds what follows a publish for lingerMs, then publishes it together', async () => {
      const { js, at } = timedPublisher();
      const r = relay({ js, lingerMs: 300 });
      const before = await streamEventCount();
      const burst = rows(60); // 60 events in one turn: the rate of 600/s
      r.publish(burst);
      await until('the burst published', async () => burst.every((row) => at.has(row.eventId)));
      const first = Math.min(...burst.map((row) => at.get(row.eventId)!));
      const trickle = rows(5);
      for (const row of trickle) {
        r.publish([row]);
        await pause(10);
      }
      await until('the trickle published', async () => trickle.every((row) => at.has(row.eventId)));
      const times = trickle.map((row) => at.get(row.eventId)!);
      // Held until 300 ms after the burst began to go out (timers never fire early; 2 ms for rounding)…
      expect(Math.min(...times)).toBeGreaterThanOrEqual(first + 298);
      // …and sent in the same turn.
      expect(Math.max(...times) - Math.min(...times)).toBeLessThan(1);
      await until('all 65 in the stream', async () => (await streamEventCount()) === before + 65);
    });

    /** A burst that starts the rate (published at once, nothing came before), and when it went. */
    async function startLoad(at: Map<string, number>, r: Relay) {
      const burst = rows(60);
      r.publish(burst);
      await until('the burst published', async () => burst.every((row) => at.has(row.eventId)));
      return Math.min(...burst.map((row) => at.get(row.eventId)!));
    }

    it(`under load, fewer than ${LINGER_BATCH_EVENTS} events wait past lingerMs for more, up to lingerMaxMs`, async () => {
      const { js, at } = timedPublisher();
      const r = relay({ js, lingerMs: 100, lingerMaxMs: 400 });
      const first = await startLoad(at, r);
      const few = rows(LINGER_BATCH_EVENTS - 1);
      for (const row of few) {
        r.publish([row]);
        await pause(5);
      }
      await until('the few published', async () => few.every((row) => at.has(row.eventId)), {
        timeoutMs: 3_000,
      });
      const times = few.map((row) => at.get(row.eventId)!);
      // Not at lingerMs (100): held to lingerMaxMs after the burst went (2 ms for rounding)…
      expect(Math.min(...times)).toBeGreaterThanOrEqual(first + 398);
      // …and sent in the same turn.
      expect(Math.max(...times) - Math.min(...times)).toBeLessThan(1);
    });

    it(`under load, ${LINGER_BATCH_EVENTS} events go together once lingerMs passed, without waiting for lingerMaxMs`, async () => {
      const { js, at } = timedPublisher();
      const r = relay({ js, lingerMs: 150, lingerMaxMs: 5_000 });
      const first = await startLoad(at, r);
      const batch = rows(LINGER_BATCH_EVENTS);
      for (const row of batch) {
        r.publish([row]);
        await pause(2);
      }
      await until('the batch published', async () => batch.every((row) => at.has(row.eventId)), {
        timeoutMs: 3_000,
      });
      const times = batch.map((row) => at.get(row.eventId)!);
      expect(Math.min(...times)).toBeGreaterThanOrEqual(first + 148);
      expect(Math.max(...times) - Math.min(...times)).toBeLessThan(1);
      // The batch filled within ~30 ms of its first event: far from the 5 s lingerMaxMs.
      expect(Math.max(...times)).toBeLessThan(first + 2_000);
    });
  });
});
