// The transactional outbox (DESIGN.md "Events and their guarantees"): a write and its event
// commit in one transaction; a relay publishes committed rows to JetStream with the event id as
// Nats-Msg-Id (JetStream drops duplicates), then deletes them. Several replicas share one outbox
// through FOR UPDATE SKIP LOCKED; a crash between publish and delete only republishes.
import { create, toBinary } from '@bufbuild/protobuf';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import { events } from '@mcs/proto';
import { enumValueName } from '@mcs/rest';
import { sql } from 'drizzle-orm';
import { bigserial, type PgSchema, type PgTable, text, timestamp } from 'drizzle-orm/pg-core';
import type { JetStreamClient } from 'nats';
import type pg from 'pg';
import { bytea, type Tx } from './db.ts';

export { bytea };

import { newId } from './ids.ts';
import type { Logger } from './log.ts';
import type { StreamNames } from './nats.ts';

/** The outbox table of a service, in that service's schema. */
export function outboxTable(schema: PgSchema) {
  return schema.table('outbox', {
    seq: bigserial('seq', { mode: 'number' }).primaryKey(),
    eventId: text('event_id').notNull().unique(),
    type: text('type').notNull(),
    payload: bytea('payload').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  });
}
export type OutboxTable = ReturnType<typeof outboxTable>;

/** Every event type of spec 6.1 by its REST name (`order.created`, …), from the one proto enum. */
export const EVENT_TYPES: readonly string[] = events.EventTypeSchema.values
  .map((v) => enumValueName(events.EventTypeSchema, v.number))
  .filter((n): n is string => n !== null);

/** The REST name of an event type, e.g. `order.created` (one enum is the source of every type). */
export function eventTypeName(type: events.EventType): string {
  const name = enumValueName(events.EventTypeSchema, type);
  if (!name) throw new Error(`not an event type: ${type}`);
  return name;
}

export interface NewEvent {
  type: events.EventType;
  accountId: string;
  livemode: boolean;
  data: events.Event['data'];
  /** Defaults to now; pass the resource's own timestamp so event and resource agree. */
  createdAtMs?: number;
}

/** The event of `input` and its outbox row, built in JS: id and time are known before any write. */
export function outboxEntry(input: NewEvent): {
  event: events.Event;
  row: { eventId: string; type: string; payload: Uint8Array };
} {
  const event = create(events.EventSchema, {
    id: newId('evt'),
    type: input.type,
    createdAt: timestampFromMs(input.createdAtMs ?? Date.now()),
    data: input.data,
    livemode: input.livemode,
    accountId: input.accountId,
  });
  return {
    event,
    row: { eventId: event.id, type: eventTypeName(event.type), payload: toBinary(events.EventSchema, event) },
  };
}

/** Writes an event in the caller's transaction; it is published once that transaction commits. */
export async function appendEvent(tx: Tx, table: OutboxTable, input: NewEvent): Promise<events.Event> {
  const { event, row } = outboxEntry(input);
  await tx.insert(table).values(row);
  return event;
}

/**
 * Inserts one row and its event in ONE statement, so a create costs one round trip and needs
 * no transaction (DESIGN.md "Targets": ingest):
 *
 *   with o as (insert into <table> … on conflict do nothing returning *),
 *        e as (insert into <outbox> (event_id, type, payload) select … from o)
 *   select * from o
 *
 * A single statement commits whole or not at all, so row and event commit together; when the
 * insert conflicts (an idempotency key already taken) `o` is empty and neither is written, and
 * the result is undefined. The event is built before the statement from `event.of(values)`: the
 * values carry the row's id and timestamps, so the event holds the row as it will be stored.
 * Without `event` it is the plain insert … on conflict do nothing returning *.
 */
export async function insertWithEvent<T extends PgTable, V extends T['$inferInsert']>(
  db: Tx,
  table: T,
  values: V,
  event?: { outbox: OutboxTable; of: (values: V) => NewEvent },
): Promise<T['$inferSelect'] | undefined> {
  // drizzle's builders do not type-check over a generic table; the shapes are the table's own.
  const insert = db
    .insert(table as PgTable)
    .values(values as never)
    .onConflictDoNothing()
    .returning();
  if (!event) return ((await insert) as Array<T['$inferSelect']>)[0];
  const { row } = outboxEntry(event.of(values));
  const { outbox } = event;
  const o = db.$with('o').as(insert);
  const cols = [outbox.eventId, outbox.type, outbox.payload].map((c) => sql.identifier(c.name));
  const e = db
    .$with('e', {})
    .as(
      sql`insert into ${outbox} (${sql.join(cols, sql`, `)}) select ${row.eventId}::text, ${row.type}::text, ${Buffer.from(row.payload.buffer, row.payload.byteOffset, row.payload.byteLength)}::bytea from ${o}`,
    );
  const rows = await db.with(o, e).select().from(o);
  return rows[0] as T['$inferSelect'] | undefined;
}

export interface RelayOptions {
  pool: pg.Pool;
  /** Schema that holds the outbox table. */
  schema: string;
  js: JetStreamClient;
  names: StreamNames;
  log: Logger;
  /** Fallback poll for rows written by other replicas or left by a crash. */
  pollMs?: number;
  batch?: number;
}

export interface Relay {
  /** Call after a commit that appended events: publishes them without waiting for the poll. */
  wake(): void;
  stop(): Promise<void>;
}

export function startRelay(opts: RelayOptions): Relay {
  const { pool, js, names, log } = opts;
  const batch = opts.batch ?? 256;
  const table = `"${opts.schema}".outbox`;
  let running: Promise<void> | null = null;
  let again = false;
  let stopped = false;
  let failures = 0;

  async function drainOnce(): Promise<number> {
    const client = await pool.connect();
    try {
      await client.query('begin');
      const { rows } = await client.query<{ seq: number; event_id: string; type: string; payload: Buffer }>(
        `select seq, event_id, type, payload from ${table} order by seq limit $1 for update skip locked`,
        [batch],
      );
      if (rows.length > 0) {
        await Promise.all(
          rows.map((r) =>
            js.publish(names.subject(r.type), r.payload, { msgID: r.event_id, timeout: 5_000 }),
          ),
        );
        await client.query(`delete from ${table} where seq = any($1::bigint[])`, [rows.map((r) => r.seq)]);
      }
      await client.query('commit');
      return rows.length;
    } catch (err) {
      await client.query('rollback').catch(() => {});
      throw err;
    } finally {
      client.release();
    }
  }

  async function drain(): Promise<void> {
    do {
      again = false;
      try {
        while (!stopped && (await drainOnce()) === batch) {}
        failures = 0;
      } catch (err) {
        failures++;
        log.warn({ err: (err as Error).message, failures }, 'outbox relay: publish failed, will retry');
        await new Promise((r) => setTimeout(r, Math.min(5_000, 100 * 2 ** failures)));
        again = true;
      }
    } while (again && !stopped);
  }

  function wake(): void {
    if (stopped) return;
    if (running) {
      again = true;
      return;
    }
    running = drain().finally(() => {
      running = null;
    });
  }

  const timer = setInterval(wake, opts.pollMs ?? 1_000);
  timer.unref();
  wake();

  return {
    wake,
    async stop() {
      stopped = true;
      clearInterval(timer);
      await running;
    },
  };
}
