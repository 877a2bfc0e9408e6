// Fan-out: record an event in the log and one delivery per matching endpoint, atomically. The
// JetStream message is acked only after this commits, and both inserts are idempotent, so a
// redelivered message records nothing twice.

import { timestampMs } from '@bufbuild/protobuf/wkt';
import type { Db } from '@mcs/kit/db';
import { encodeTime } from '@mcs/kit/ids';
import { eventTypeName } from '@mcs/kit/outbox';
import { events as eventsProto } from '@mcs/proto';
import { render } from '@mcs/rest';
import { sql } from 'drizzle-orm';

export interface QueuedDelivery {
  deliveryId: string;
  endpointId: string;
  /** The next_attempt_at this worker set; the attempt starts only if it still holds (a lease). */
  lease: Date;
}

/** The exact bytes every delivery of `event` sends, and GET /v1/events returns. */
export function envelopeBody(event: eventsProto.Event): string {
  return JSON.stringify(render(eventsProto.EventSchema, event));
}

/**
 * Records the event and its deliveries in ONE statement (a round trip per event, no explicit
 * transaction): the deliveries are inserted only if the event row was new, so a redelivered
 * message records nothing twice. Delivery ids are derived from the event and endpoint
 * (`dlv_` + the event's time + 16 hex digits of md5(event, endpoint)): valid, time-ordered and
 * the same on every replay.
 */
export async function recordEvent(
  db: Db,
  event: eventsProto.Event,
  payload: Uint8Array,
  leaseMs: number,
  now = new Date(),
): Promise<QueuedDelivery[]> {
  const type = eventTypeName(event.type);
  const lease = new Date(now.getTime() + leaseMs);
  const createdAt = new Date(event.createdAt ? timestampMs(event.createdAt) : now.getTime());
  const { rows } = await db.execute<{ id: string; endpoint_id: string }>(sql`
    with ev as (
      insert into webhooks.events (id, account_id, livemode, type, payload, body, created_at)
      values (${event.id}, ${event.accountId}, ${event.livemode}, ${type}, ${Buffer.from(payload)},
              ${envelopeBody(event)}, ${createdAt})
      on conflict do nothing
      returning id
    ), ins as (
      insert into webhooks.deliveries
        (id, event_id, endpoint_id, account_id, livemode, status, next_attempt_at, created_at)
      select 'dlv_' || ${encodeTime(createdAt.getTime())} || substr(md5(ev.id || e.id), 1, 16),
             ev.id, e.id, e.account_id, e.livemode,
             -- An unhealthy endpoint gets nothing until re-enabled; the delivery stays listed as not sent.
             case when e.status = 'enabled' then 'pending' else 'skipped' end,
             case when e.status = 'enabled' then ${lease}::timestamptz end,
             ${now}
        from ev, webhooks.endpoints e
       where e.account_id = ${event.accountId} and e.livemode = ${event.livemode}
         and e.status in ('enabled', 'unhealthy')
         and e.events && array[${type}, '*']::text[]
      on conflict do nothing
      returning id, endpoint_id, status
    )
    select id, endpoint_id from ins where status = 'pending'`);
  return rows.map((r) => ({ deliveryId: r.id, endpointId: r.endpoint_id, lease }));
}
