// Deliveries as the account sees them: the list per endpoint with every attempt, resending one
// now, and test events. Resends and test events are queued by the caller after commit.
import { create, toBinary } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { apiError } from '@mcs/errors';
import type { Caller } from '@mcs/kit/caller';
import type { Tx } from '@mcs/kit/db';
import { newId } from '@mcs/kit/ids';
import { pageLimit, pageStart } from '@mcs/kit/resources';
import { events as eventsProto } from '@mcs/proto';
import { enumValueName } from '@mcs/rest';
import { and, asc, desc, eq, inArray, lt } from 'drizzle-orm';
import { attempts, type DeliveryStatus, deliveries, events } from '../db/schema.ts';
import { type Endpoint, getEndpoint } from './endpoints.ts';
import { envelopeBody, type QueuedDelivery } from './fanout.ts';
import { sampleData } from './samples.ts';

export interface Attempt {
  number: number;
  at: Date;
  statusCode: number | null;
  error: string | null;
  latencyMs: number;
  responseExcerpt: string | null;
}

export interface Delivery {
  id: string;
  endpointId: string;
  eventId: string;
  eventType: string;
  status: DeliveryStatus;
  attempts: number;
  nextAttemptAt: Date | null;
  livemode: boolean;
  createdAt: Date;
  attemptLog: Attempt[];
}

/** What the engine needs to send a delivery at once. */
export interface DeliveryQueue {
  /** How long a queued delivery is reserved for this process (see delivery/engine.ts). */
  leaseMs: number;
  enqueue(items: QueuedDelivery[]): void;
}

export const deliveryColumns = {
  id: deliveries.id,
  endpointId: deliveries.endpointId,
  eventId: deliveries.eventId,
  eventType: events.type,
  status: deliveries.status,
  attempts: deliveries.attempts,
  nextAttemptAt: deliveries.nextAttemptAt,
  livemode: deliveries.livemode,
  createdAt: deliveries.createdAt,
};

export async function withAttempts(tx: Tx, rows: Omit<Delivery, 'attemptLog'>[]): Promise<Delivery[]> {
  if (rows.length === 0) return [];
  const log = await tx
    .select()
    .from(attempts)
    .where(
      inArray(
        attempts.deliveryId,
        rows.map((r) => r.id),
      ),
    )
    .orderBy(asc(attempts.deliveryId), asc(attempts.number));
  return rows.map((r) => ({
    ...r,
    attemptLog: log
      .filter((a) => a.deliveryId === r.id)
      .map(({ number, at, statusCode, error, latencyMs, responseExcerpt }) => ({
        number,
        at,
        statusCode,
        error,
        latencyMs,
        responseExcerpt,
      })),
  }));
}

/** The deliveries to the caller's endpoint `endpointId`, newest first. */
export async function listDeliveries(
  tx: Tx,
  caller: Caller,
  endpointId: string,
  opts: { limit?: number; startingAfter?: string | undefined; status?: DeliveryStatus | undefined },
): Promise<{ data: Delivery[]; hasMore: boolean }> {
  const limit = pageLimit(opts.limit);
  const after = pageStart('dlv', opts.startingAfter);
  const endpoint = await getEndpoint(tx, caller, endpointId);
  const rows = await tx
    .select(deliveryColumns)
    .from(deliveries)
    .innerJoin(events, eq(events.id, deliveries.eventId))
    .where(
      and(
        eq(deliveries.endpointId, endpoint.id),
        after ? lt(deliveries.id, after) : undefined,
        opts.status ? eq(deliveries.status, opts.status) : undefined,
      ),
    )
    .orderBy(desc(deliveries.id))
    .limit(limit + 1);
  return { data: await withAttempts(tx, rows.slice(0, limit)), hasMore: rows.length > limit };
}

async function getDelivery(tx: Tx, endpoint: Endpoint, id: string): Promise<Delivery> {
  const [row] = await tx
    .select(deliveryColumns)
    .from(deliveries)
    .innerJoin(events, eq(events.id, deliveries.eventId))
    .where(and(eq(deliveries.id, id), eq(deliveries.endpointId, endpoint.id)));
  if (!row) {
    throw apiError('resource_missing', {
      param: 'delivery',
      message: `No such delivery to webhook endpoint ${endpoint.id}: ${id}.`,
    });
  }
  const [withLog] = await withAttempts(tx, [row]);
  return withLog!;
}

/** Resends and test events go only to an enabled endpoint: an unhealthy one gets nothing (spec 3.1). */
function requireEnabled(endpoint: Endpoint): void {
  if (endpoint.status === 'enabled') return;
  throw apiError('invalid_state_transition', {
    param: 'id',
    message:
      endpoint.status === 'unhealthy'
        ? `Webhook endpoint ${endpoint.id} is unhealthy and receives nothing until re-enabled: POST /v1/webhooks/${endpoint.id}/enable (or Settings → API), then retry.`
        : `Webhook endpoint ${endpoint.id} is disabled: enable it (POST /v1/webhooks/${endpoint.id}/enable) first.`,
  });
}

/**
 * Sends delivery `id` again now. A pending one is simply due at once and continues its schedule;
 * a failed, skipped or succeeded one becomes pending and starts the retry schedule over, so if
 * this attempt fails it is retried as a fresh delivery would be (and the end of that run turns
 * the endpoint unhealthy as usual). A manual resend is outside the 6-attempt rule of automatic
 * delivery: attempt numbers continue in the log. A pending one whose attempt is in flight, or due
 * within `leaseMs`, is left as it is (answered, nothing queued).
 */
export async function retryDelivery(
  tx: Tx,
  caller: Caller,
  endpointId: string,
  id: string,
  leaseMs: number,
  now = new Date(),
): Promise<{ delivery: Delivery; queued: QueuedDelivery | undefined }> {
  const endpoint = await getEndpoint(tx, caller, endpointId, { lock: true });
  requireEnabled(endpoint);
  const current = await getDelivery(tx, endpoint, id);
  // An attempt in flight holds the delivery's lease, which ends within leaseMs; a fresh delivery
  // or a retry due that soon looks the same. Another attempt now would run beside that one with
  // the same number (the receiver getting the event twice at once, and one of the two answers
  // lost from the log), so the delivery is left as it is: its attempt is made within leaseMs.
  const due = current.nextAttemptAt?.getTime();
  if (
    current.status === 'pending' &&
    due !== undefined &&
    due > now.getTime() &&
    due <= now.getTime() + leaseMs
  ) {
    return { delivery: current, queued: undefined };
  }
  const lease = new Date(now.getTime() + leaseMs);
  await tx
    .update(deliveries)
    .set({
      status: 'pending',
      nextAttemptAt: lease,
      ...(current.status !== 'pending' ? { scheduleStart: current.attempts } : {}),
    })
    .where(eq(deliveries.id, current.id));
  return {
    delivery: { ...current, status: 'pending', nextAttemptAt: now },
    queued: { deliveryId: current.id, endpointId: endpoint.id, lease },
  };
}

/** The type a test event gets by default: the endpoint's first subscribed type. */
export function defaultTestType(endpoint: Endpoint): string {
  return endpoint.events.find((t) => t !== '*') ?? 'order.created';
}

/**
 * Records a test event of `type` with sample data (samples.ts) and one delivery of it to this
 * endpoint only. The event is flagged as a test: GET /v1/events does not list it.
 */
export async function sendTestEvent(
  tx: Tx,
  caller: Caller,
  endpointId: string,
  type: string | undefined,
  leaseMs: number,
  now = new Date(),
): Promise<{ delivery: Delivery; queued: QueuedDelivery; event: eventsProto.Event }> {
  const endpoint = await getEndpoint(tx, caller, endpointId, { lock: true });
  requireEnabled(endpoint);
  const typeName = type ?? defaultTestType(endpoint);
  const enumValue = eventTypeOf(typeName);
  const event = create(eventsProto.EventSchema, {
    id: newId('evt', now.getTime()),
    type: enumValue,
    createdAt: timestampFromDate(now),
    data: sampleData(typeName, caller.livemode, now),
    livemode: caller.livemode,
    accountId: caller.accountId,
  });
  await tx.insert(events).values({
    id: event.id,
    accountId: caller.accountId,
    livemode: caller.livemode,
    type: typeName,
    payload: toBinary(eventsProto.EventSchema, event),
    body: envelopeBody(event),
    test: true,
    createdAt: now,
  });
  const lease = new Date(now.getTime() + leaseMs);
  const deliveryId = newId('dlv', now.getTime());
  await tx.insert(deliveries).values({
    id: deliveryId,
    eventId: event.id,
    endpointId: endpoint.id,
    accountId: caller.accountId,
    livemode: caller.livemode,
    status: 'pending',
    nextAttemptAt: lease,
    createdAt: now,
  });
  return {
    event,
    delivery: {
      id: deliveryId,
      endpointId: endpoint.id,
      eventId: event.id,
      eventType: typeName,
      status: 'pending',
      attempts: 0,
      nextAttemptAt: now,
      livemode: caller.livemode,
      createdAt: now,
      attemptLog: [],
    },
    queued: { deliveryId, endpointId: endpoint.id, lease },
  };
}

/** The enum value of an event type's REST name. */
export function eventTypeOf(name: string): eventsProto.EventType {
  const value = eventsProto.EventTypeSchema.values.find(
    (v) => enumValueName(eventsProto.EventTypeSchema, v.number) === name,
  );
  if (!value)
    throw apiError('invalid_event_type', { param: 'type', message: `Unknown event type "${name}".` });
  return value.number;
}
