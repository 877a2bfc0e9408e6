// The transactional outbox (DESIGN.md "Events and their guarantees"): a write and its event
// commit in one transaction; a relay publishes committed rows to JetStream with the event id as
// Nats-Msg-Id (JetStream drops duplicates), then deletes them. Several replicas share one outbox
// through FOR UPDATE SKIP LOCKED; a crash between publish and delete only republishes.
import { create, toBinary } from '@bufbuild/protobuf';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import { events } from '@mcs/proto';
import { enumValueName } from '@mcs/rest';
import { bigserial, type PgSchema, text, timestamp } from 'drizzle-orm/pg-core';
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

/** Writes an event in the caller's transaction; it is published once that transaction commits. */
export async function appendEvent(tx: Tx, table: OutboxTable, input: NewEvent): Promise<events.Event> {
  const event = create(events.EventSchema, {
    id: newId('evt'),
    type: input.type,
    createdAt: timestampFromMs(input.createdAtMs ?? Date.now()),
    data: input.data,
    livemode: input.livemode,
    accountId: input.accountId,
  });
  await tx.insert(table).values({
    eventId: event.id,
    type: eventTypeName(event.type),
    payload: toBinary(events.EventSchema, event),
  });
  return event;
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
