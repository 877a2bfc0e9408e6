// Fan-out: record events in the log and one delivery per matching endpoint, atomically, a batch
// of events per statement. The JetStream messages are acked only after it commits, and both
// inserts are idempotent, so a redelivered message records nothing twice.

import { createHash } from 'node:crypto';
import { timestampMs } from '@bufbuild/protobuf/wkt';
import { executeNamed, type Tx } from '@mcs/kit/db';
import { encodeTime } from '@mcs/kit/ids';
import { eventTypeName, OPERATIONAL_EVENT_TYPES } from '@mcs/kit/outbox';
import type { Context } from '@mcs/kit/tracing';
import { events as eventsProto } from '@mcs/proto';
import { render } from '@mcs/rest';
import { sql } from 'drizzle-orm';

/** What an attempt needs besides the delivery id: where, signed with what, which bytes. */
export interface AttemptTarget {
  eventId: string;
  url: string;
  /** The endpoint's sealed signing secret (domain/secrets.ts). */
  secretSealed: Uint8Array;
  /** The exact bytes to send (envelopeBody). */
  body: string;
  /** The delivery's attempt count and schedule start when the lease was taken. */
  attempts: number;
  scheduleStart: number;
  /** The endpoint's max_rate (deliveries per second) when read; null: unlimited. */
  maxRate: number | null;
  /** per_resource: the resource key its endpoint orders it by (set by the engine's claim). */
  orderingKey?: string | null;
}

export interface QueuedDelivery {
  deliveryId: string;
  endpointId: string;
  /** The next_attempt_at this worker set; the attempt starts only if it still holds (a lease). */
  lease: Date;
  /**
   * Read by the statement that wrote `lease` (fan-out, or the engine's claim): while the lease
   * is fresh enough to cover a whole attempt, the engine starts it without claiming it again
   * (delivery/engine.ts). Absent: the engine claims it first.
   */
  target?: AttemptTarget;
  /** With tracing on: the trace of the event's publish, continued by the attempt (in memory only). */
  trace?: Context;
  /** Known to have an ordering_key (per_resource): the engine claims it with the ordering rule. */
  ordered?: boolean;
  /**
   * Attempts already made when it was queued (absent: none, or not known). A failing endpoint's
   * one slot goes to the delivery furthest along its schedule (delivery/engine.ts).
   */
  attempts?: number;
}

/** The exact bytes every delivery of `event` sends, and GET /v1/events returns. */
export function envelopeBody(event: eventsProto.Event): string {
  return JSON.stringify(render(eventsProto.EventSchema, event));
}

/**
 * The resource an event is about, as `<kind>:<id>` (`order:ord_…`): the key per-resource
 * ordering serializes on (delivery/engine.ts). Null for an event without data.
 */
export function resourceKey(event: eventsProto.Event): string | null {
  const data = event.data as { case: string | undefined; value?: { id?: string } };
  if (!data.case || !data.value?.id) return null;
  return `${data.case}:${data.value.id}`;
}

/** One consumed event: the decoded message and its bytes as published. */
export interface IncomingEvent {
  event: eventsProto.Event;
  payload: Uint8Array;
  /** An operational event is never delivered to the endpoint it is about. */
  aboutEndpoint?: string;
  /**
   * The event's outbox seq (the JetStream header kit/outbox OUTBOX_SEQ_HEADER): where its change
   * committed among its resource's. Without one (the webhooks service's own events, test
   * events), per_resource endpoints get the event unordered.
   */
  seq?: string | null;
  /**
   * The resource's version after this change (the JetStream header kit/outbox
   * RESOURCE_VERSION_HEADER): 1, 2, 3, … over the resource's events, without a gap. A
   * per_resource delivery of version v waits for version v − 1 to be recorded (delivery/engine.ts).
   */
  version?: number | null;
}

/**
 * Records a batch of events and their deliveries in ONE statement (one round trip for the
 * whole batch, no explicit transaction): the deliveries of an event are inserted only if its
 * event row was new, so a redelivered message records nothing twice. Delivery ids are derived
 * from the event and endpoint (`dlv_` + the event's time + 16 hex digits of md5(event,
 * endpoint)): valid, time-ordered and the same on every replay.
 *
 * Returns the fresh pending deliveries with their lease (next_attempt_at = now + leaseMs,
 * written by the same statement) and everything their first attempt needs, so the engine can
 * start it without another statement.
 */
export async function recordEvents(
  db: Tx,
  incoming: readonly IncomingEvent[],
  leaseMs: number,
  now = new Date(),
): Promise<QueuedDelivery[]> {
  // One row per event id: a message and its redelivery may meet in one batch.
  const byId = new Map<
    string,
    {
      event: eventsProto.Event;
      payload: Uint8Array;
      body: string;
      type: string;
      about: string | null;
      seq: string | null;
      version: number | null;
    }
  >();
  for (const { event, payload, aboutEndpoint, seq, version } of incoming) {
    if (byId.has(event.id)) continue;
    const type = eventTypeName(event.type);
    byId.set(event.id, {
      event,
      payload,
      body: envelopeBody(event),
      type,
      about: aboutEndpoint ?? null,
      seq: seq ?? null,
      version: version ?? null,
    });
  }
  if (byId.size === 0) return [];
  const list = [...byId.values()];
  const createdAt = list.map(({ event }) => (event.createdAt ? timestampMs(event.createdAt) : now.getTime()));
  const lease = new Date(now.getTime() + leaseMs);
  // Named: with a batch of one or two events (a quiet moment) planning this statement cost
  // more than running it.
  const rows = await executeNamed<{
    id: string;
    event_id: string;
    endpoint_id: string;
    ordered: boolean;
    url: string;
    secret_sealed: Buffer;
    max_rate: number | null;
  }>(
    db,
    'mcs_record_events',
    sql`
    with input as (
      select * from unnest(
        ${sql.param(list.map((e) => e.event.id))}::text[],
        ${sql.param(list.map((e) => e.event.accountId))}::text[],
        ${sql.param(list.map((e) => e.event.livemode))}::boolean[],
        ${sql.param(list.map((e) => e.type))}::text[],
        ${sql.param(list.map((e) => Buffer.from(e.payload.buffer, e.payload.byteOffset, e.payload.byteLength)))}::bytea[],
        ${sql.param(list.map((e) => e.body))}::text[],
        ${sql.param(createdAt.map((ms) => new Date(ms)))}::timestamptz[],
        ${sql.param(createdAt.map((ms) => encodeTime(ms)))}::text[],
        ${sql.param(list.map((e) => !OPERATIONAL_EVENT_TYPES.includes(e.type)))}::boolean[],
        ${sql.param(list.map((e) => e.about))}::text[],
        ${sql.param(list.map((e) => (e.seq === null && e.version === null ? null : resourceKey(e.event))))}::text[],
        ${sql.param(list.map((e) => e.seq))}::bigint[],
        ${sql.param(list.map((e) => e.version))}::integer[]
      ) as t(id, account_id, livemode, type, payload, body, created_at, id_time, star, about, resource, seq, version)
    ), ev as (
      insert into webhooks.events
        (id, account_id, livemode, type, payload, body, created_at, outbox_seq, resource_key, resource_version)
      select id, account_id, livemode, type, payload, body, created_at, seq,
             case when version is not null then resource end, case when resource is not null then version end
        from input
      on conflict do nothing
      returning id, account_id, livemode, type
    ), ins as (
      insert into webhooks.deliveries
        (id, event_id, endpoint_id, account_id, livemode, status, next_attempt_at, ordering_key, ordering_seq,
         ordering_version, created_at)
      select 'dlv_' || i.id_time || substr(md5(ev.id || e.id), 1, 16),
             ev.id, e.id, e.account_id, e.livemode,
             -- An unhealthy endpoint gets nothing until re-enabled; the delivery stays listed as not sent.
             case when e.status = 'enabled' then 'pending' else 'skipped' end,
             -- An endpoint paused by a Retry-After gets its deliveries due when the pause ends.
             case when e.status <> 'enabled' then null
                  when e.paused_until > ${now}::timestamptz then e.paused_until
                  else ${lease}::timestamptz end,
             -- per_resource: the resource and where its change committed (an event without a
             -- seq, or without a resource, goes unordered).
             case when e.ordering = 'per_resource' and i.seq is not null then i.resource end,
             case when e.ordering = 'per_resource' and i.resource is not null then i.seq end,
             -- and its version when a predecessor exists, which the claim waits for.
             case when e.ordering = 'per_resource' and i.resource is not null and i.seq is not null
                   and i.version > 1 then i.version end,
             ${now}
        from ev
        join input i on i.id = ev.id
        join webhooks.endpoints e
          on e.account_id = ev.account_id and e.livemode = ev.livemode
         and e.status in ('enabled', 'unhealthy')
         -- "*" means the resource types; operational types go to endpoints naming them, and
         -- never to the endpoint they are about.
         and e.events && case when i.star then array[ev.type, '*'] else array[ev.type] end
         and e.id is distinct from i.about
      on conflict do nothing
      returning id, event_id, endpoint_id, status, next_attempt_at, ordering_key
    )
    select ins.id, ins.event_id, ins.endpoint_id, ins.ordering_key is not null as ordered,
           e.url, e.secret_sealed, e.max_rate
      from ins join webhooks.endpoints e on e.id = ins.endpoint_id
     where ins.status = 'pending' and not coalesce(e.paused_until > ${now}::timestamptz, false)`,
    { rows: list.length },
  );
  return rows.map((r) =>
    // An ordered delivery is claimed first: the claim holds it back while an earlier change of
    // its resource is still pending at that endpoint, or another is in flight (delivery/engine.ts).
    r.ordered
      ? { deliveryId: r.id, endpointId: r.endpoint_id, lease, ordered: true }
      : {
          deliveryId: r.id,
          endpointId: r.endpoint_id,
          lease,
          target: {
            eventId: r.event_id,
            url: r.url,
            secretSealed: r.secret_sealed,
            body: byId.get(r.event_id)!.body,
            attempts: 0,
            scheduleStart: 0,
            maxRate: r.max_rate,
          },
        },
  );
}

/** One event: recordEvents of a batch of one. */
export function recordEvent(
  db: Tx,
  event: eventsProto.Event,
  payload: Uint8Array,
  leaseMs: number,
  now = new Date(),
): Promise<QueuedDelivery[]> {
  return recordEvents(db, [{ event, payload }], leaseMs, now);
}

/**
 * The id fan-out gives the delivery of event `eventId` (created at `createdAt`) to `endpointId`
 * (the SQL of recordEvents, in JS): a recovery adding a delivery fan-out did not make uses it,
 * so that delivery can exist once only.
 */
export function fanoutDeliveryId(eventId: string, createdAt: Date, endpointId: string): string {
  const hash = createHash('md5')
    .update(eventId + endpointId)
    .digest('hex');
  return `dlv_${encodeTime(createdAt.getTime())}${hash.slice(0, 16)}`;
}
