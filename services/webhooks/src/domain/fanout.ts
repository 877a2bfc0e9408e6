// Fan-out: record an event in the log and one delivery per matching endpoint, in one
// transaction. The JetStream message is acked only after this commits, and both inserts are
// idempotent, so a redelivered message records nothing twice.

import { timestampMs } from '@bufbuild/protobuf/wkt';
import type { Db } from '@mcs/kit/db';
import { newId } from '@mcs/kit/ids';
import { eventTypeName } from '@mcs/kit/outbox';
import { events as eventsProto } from '@mcs/proto';
import { render } from '@mcs/rest';
import { and, arrayOverlaps, eq, inArray } from 'drizzle-orm';
import { deliveries, endpoints, events } from '../db/schema.ts';

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

export async function recordEvent(
  db: Db,
  event: eventsProto.Event,
  payload: Uint8Array,
  leaseMs: number,
  now = new Date(),
): Promise<QueuedDelivery[]> {
  const type = eventTypeName(event.type);
  const lease = new Date(now.getTime() + leaseMs);
  return db.transaction(async (tx) => {
    const inserted = await tx
      .insert(events)
      .values({
        id: event.id,
        accountId: event.accountId,
        livemode: event.livemode,
        type,
        payload,
        body: envelopeBody(event),
        createdAt: new Date(event.createdAt ? timestampMs(event.createdAt) : now.getTime()),
      })
      .onConflictDoNothing()
      .returning({ id: events.id });
    if (inserted.length === 0) {
      // Seen before (JetStream redelivered it): its deliveries were recorded with a lease, and
      // the poller claims any that are still pending once that lease runs out.
      return [];
    }
    const targets = await tx
      .select({ id: endpoints.id, status: endpoints.status })
      .from(endpoints)
      .where(
        and(
          eq(endpoints.accountId, event.accountId),
          eq(endpoints.livemode, event.livemode),
          inArray(endpoints.status, ['enabled', 'unhealthy']),
          arrayOverlaps(endpoints.events, [type, '*']),
        ),
      );
    if (targets.length === 0) return [];
    const rows = targets.map((t) => ({
      id: newId('dlv', now.getTime()),
      eventId: event.id,
      endpointId: t.id,
      accountId: event.accountId,
      livemode: event.livemode,
      // An unhealthy endpoint gets nothing until re-enabled; the delivery stays listed as not sent.
      status: t.status === 'enabled' ? ('pending' as const) : ('skipped' as const),
      nextAttemptAt: t.status === 'enabled' ? lease : null,
      createdAt: now,
    }));
    await tx.insert(deliveries).values(rows).onConflictDoNothing();
    return rows
      .filter((r) => r.status === 'pending')
      .map((r) => ({ deliveryId: r.id, endpointId: r.endpointId, lease }));
  });
}
