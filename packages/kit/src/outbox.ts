// The transactional outbox (docs/design.md "Events and their guarantees"): a write and its event
// commit in one transaction (appendEvent, insertWithEvent, transaction), and the relay
// (relay.ts) publishes committed events to JetStream, then deletes their rows. What a write
// committed reaches the relay through collectEvents, without reading it back.
import { AsyncLocalStorage } from 'node:async_hooks';
import { create, toBinary } from '@bufbuild/protobuf';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import { events } from '@mcs/proto';
import { enumValueName } from '@mcs/rest';
import { sql } from 'drizzle-orm';
import { bigserial, integer, type PgSchema, type PgTable, text, timestamp } from 'drizzle-orm/pg-core';
import { bytea, type Tx } from './db.ts';
import { newId } from './ids.ts';

export { bytea };

/** The outbox table of a service, in that service's schema. */
export function outboxTable(schema: PgSchema) {
  return schema.table('outbox', {
    seq: bigserial('seq', { mode: 'number' }).primaryKey(),
    eventId: text('event_id').notNull().unique(),
    type: text('type').notNull(),
    payload: bytea('payload').notNull(),
    /** The event's resource version (NewEvent.resourceVersion), for the poll to publish it with. */
    resourceVersion: integer('resource_version'),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  });
}
export type OutboxTable = ReturnType<typeof outboxTable>;

export { EVENT_TYPES, OPERATIONAL_EVENT_TYPES, RESOURCE_EVENT_TYPES } from './event-types.ts';

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
  /**
   * The version of the event's resource (the one its `data` is, e.g. the order) after this
   * change: 1 for the resource's first event, then 2, 3, … with no gap over the events of that
   * resource, drawn by the statement that made the change, under the resource's row lock.
   * Published in RESOURCE_VERSION_HEADER: the webhooks service holds a per_resource delivery
   * of version v until it has the event of version v − 1 (docs/api.md "Ordered delivery").
   */
  resourceVersion?: number;
}

/**
 * The JetStream header carrying an event's outbox `seq`: the order in which the changes of one
 * resource committed (see OutboxRow.outboxSeq). The webhooks service orders per_resource deliveries by it.
 */
export const OUTBOX_SEQ_HEADER = 'Mcs-Outbox-Seq';

/**
 * The JetStream header carrying an event's resource version (NewEvent.resourceVersion): tells
 * the webhooks service that the resource's event of the version before it exists, and is to be
 * delivered first, even when it has not arrived yet (a failed fast publish, replicas whose
 * publishes cross).
 */
export const RESOURCE_VERSION_HEADER = 'Mcs-Resource-Version';

/** An outbox row as the relay publishes it: the event id, its REST type name and the proto bytes. */
export interface OutboxRow {
  eventId: string;
  type: string;
  payload: Uint8Array;
  /**
   * The row's `seq` (bigserial), when the statement that wrote it returned it; published in the
   * OUTBOX_SEQ_HEADER. The events of one resource are written under that resource's row lock,
   * each in the transaction that changed it, so their seqs (drawn by the insert, after the lock,
   * from a sequence without cache) increase in the order the changes committed: a later change
   * waits for the lock until the earlier one committed. Not the event id (made from the
   * writer's clock: replicas' clocks differ) nor the JetStream stream sequence (the fast path
   * and the poll of several replicas publish in any order).
   */
  outboxSeq?: string;
  /** NewEvent.resourceVersion, written to the row and published in RESOURCE_VERSION_HEADER. */
  resourceVersion?: number;
}

/** The event of `input` and its outbox row, built in JS: id and time are known before any write. */
export function outboxEntry(input: NewEvent): { event: events.Event; row: OutboxRow } {
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
    row: {
      eventId: event.id,
      type: eventTypeName(event.type),
      payload: toBinary(events.EventSchema, event),
      ...(input.resourceVersion === undefined ? {} : { resourceVersion: input.resourceVersion }),
    },
  };
}

/**
 * What the write running under `Relay.publishAfter` wrote so far (nothing is collected outside
 * one). An event is handed to the relay only once it is known to be committed:
 * - a statement outside any transaction (on the pool) commits by itself: `committed` as soon as
 *   it succeeded;
 * - a transaction opened by `transaction()` below collects its events aside and adds them to
 *   `committed` once its COMMIT succeeded; a rollback drops them;
 * - a transaction the outbox did not open (plain `db.transaction`, a savepoint) may still roll
 *   back while the write goes on and succeeds (a caught error, an idempotency replay): its event
 *   ids go to `unverified`, and after the write the relay reads back whichever of them exist,
 *   i.e. committed, and publishes those (the poll's statements, for these rows only).
 */
export interface CollectedEvents {
  committed: OutboxRow[];
  unverified: string[];
}
const collecting = new AsyncLocalStorage<CollectedEvents>();
/** The events of each transaction opened by `transaction()`, until it commits. */
const byTransaction = new WeakMap<object, OutboxRow[]>();

/** drizzle's transactions (and savepoints) have rollback(); the pool-backed db does not. */
/** Whether `db` is a transaction (else the pool). */
export const isTransaction = (db: Tx): boolean =>
  typeof (db as { rollback?: unknown }).rollback === 'function';

/**
 * Tells the relay that a statement on `db` wrote `row` to the outbox and succeeded; call it
 * right after such a statement (appendEvent and insertWithEvent do). Outside `publishAfter` it
 * does nothing: the poll publishes the row.
 */
export function eventWritten(db: Tx, row: OutboxRow): void {
  const pending = byTransaction.get(db);
  if (pending) {
    pending.push(row);
    return;
  }
  const store = collecting.getStore();
  if (!store) return;
  if (isTransaction(db)) store.unverified.push(row.eventId);
  else store.committed.push(row);
}

/**
 * `db.transaction(fn)` whose events (appendEvent, insertWithEvent on its `tx`) reach the relay
 * of the enclosing `publishAfter` once the COMMIT succeeded, and never if it rolled back. Use it
 * for every transaction that writes events; a plain db.transaction also works, one statement
 * slower (see CollectedEvents).
 */
export async function transaction<T>(db: Tx, fn: (tx: Tx) => Promise<T>): Promise<T> {
  const rows: OutboxRow[] = [];
  const result = await db.transaction((tx) => {
    byTransaction.set(tx, rows);
    return fn(tx);
  });
  // A savepoint's release is no commit: its events join the transaction around it.
  for (const row of rows) eventWritten(db, row);
  return result;
}

/**
 * Runs `write`, collecting the events it commits (see CollectedEvents), and hands them to
 * `written` once it resolved (the relay's publishAfter). A write that fails hands over nothing:
 * rows that committed anyway are left to the relay's poll. Inside another collection it simply
 * runs `write`; the outer one collects its events.
 */
export async function collectEvents<T>(
  write: () => Promise<T>,
  written: (collected: CollectedEvents) => void,
): Promise<T> {
  if (collecting.getStore()) return write();
  const collected: CollectedEvents = { committed: [], unverified: [] };
  const result = await collecting.run(collected, write);
  written(collected);
  return result;
}

/** Writes an event in the caller's transaction; it is published once that transaction commits. */
export async function appendEvent(tx: Tx, table: OutboxTable, input: NewEvent): Promise<events.Event> {
  const { event, row } = outboxEntry(input);
  const [written] = await tx.insert(table).values(row).returning({ seq: table.seq });
  if (written) row.outboxSeq = String(written.seq);
  eventWritten(tx, row);
  return event;
}

/**
 * Inserts one row and its event in ONE statement, so a create costs one round trip and needs
 * no transaction (docs/performance.md: ingest):
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
  const cols = [outbox.eventId, outbox.type, outbox.payload, outbox.resourceVersion].map((c) =>
    sql.identifier(c.name),
  );
  const e = db
    .$with('e', { seq: sql<string>`seq`.mapWith(String).as('seq') })
    .as(
      sql`insert into ${outbox} (${sql.join(cols, sql`, `)}) select ${row.eventId}::text, ${row.type}::text, ${Buffer.from(row.payload.buffer, row.payload.byteOffset, row.payload.byteLength)}::bytea, ${row.resourceVersion ?? null}::integer from ${o} returning seq::text as seq`,
    );
  const rows = (await db.with(o, e).select().from(o).leftJoin(e, sql`true`)) as unknown as Array<
    Record<string, { seq?: string | null } | T['$inferSelect']>
  >;
  const first = rows[0];
  // Written only if the insert took: a conflict writes neither row nor event.
  if (first === undefined) return undefined;
  const seq = (first.e as { seq?: string | null } | null)?.seq;
  if (seq) row.outboxSeq = seq;
  eventWritten(db, row);
  return first.o as T['$inferSelect'];
}
