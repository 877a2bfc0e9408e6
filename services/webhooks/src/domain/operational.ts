// Operational events (webhook_endpoint.unhealthy, .disabled, .enabled): an endpoint's status
// transition recorded as an event of its account, in the transaction that makes it. They are
// events like the others — the envelope, signed deliveries, GET /v1/events — written straight
// into the event log by the fan-out statement (this service owns the log, so they need no trip
// through JetStream), and delivered only to endpoints that name the type ("*" means the nine
// resource types) other than the endpoint they are about. The caller queues the returned
// deliveries once its transaction committed; until then, or if it never does, they hold their
// lease and the poller sends them.
import { create, toBinary } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { Tx } from '@mcs/kit/db';
import { newId } from '@mcs/kit/ids';
import { events as eventsProto, webhooks } from '@mcs/proto';
import type { EndpointStatus, Ordering } from '../db/schema.ts';
import type { Endpoint } from './endpoints.ts';
import { type QueuedDelivery, recordEvents } from './fanout.ts';

const STATUS = {
  enabled: webhooks.EndpointStatus.ENABLED,
  unhealthy: webhooks.EndpointStatus.UNHEALTHY,
  disabled: webhooks.EndpointStatus.DISABLED,
} as const satisfies Record<EndpointStatus, webhooks.EndpointStatus>;

const ORDERING = {
  none: webhooks.EndpointOrdering.NONE,
  per_resource: webhooks.EndpointOrdering.PER_RESOURCE,
} as const satisfies Record<Ordering, webhooks.EndpointOrdering>;

const REASON = {
  gone: webhooks.DisabledReason.GONE,
  manual: webhooks.DisabledReason.MANUAL,
} as const;

/** The endpoint as the REST API renders it; its secret only when given (create, rotate). */
export function endpointResource(e: Endpoint, secret?: string): webhooks.WebhookEndpoint {
  return create(webhooks.WebhookEndpointSchema, {
    id: e.id,
    url: e.url,
    events: e.events,
    ...(e.description !== null ? { description: e.description } : {}),
    status: STATUS[e.status],
    ...(e.status === 'disabled' && e.disabledReason !== null
      ? { disabledReason: REASON[e.disabledReason] }
      : {}),
    ...(e.failingSince !== null ? { failingSince: timestampFromDate(e.failingSince) } : {}),
    ...(e.lastError !== null ? { lastError: e.lastError } : {}),
    disableOnGone: e.disableOnGone,
    ...(e.maxRate !== null ? { maxRate: e.maxRate } : {}),
    ordering: ORDERING[e.ordering],
    autoRecover: e.autoRecover,
    ...(secret !== undefined ? { secret } : {}),
    livemode: e.livemode,
    createdAt: timestampFromDate(e.createdAt),
  });
}

export type OperationalType = 'unhealthy' | 'disabled' | 'enabled';

const TYPE = {
  unhealthy: eventsProto.EventType.WEBHOOK_ENDPOINT_UNHEALTHY,
  disabled: eventsProto.EventType.WEBHOOK_ENDPOINT_DISABLED,
  enabled: eventsProto.EventType.WEBHOOK_ENDPOINT_ENABLED,
} as const satisfies Record<OperationalType, eventsProto.EventType>;

/**
 * Records `webhook_endpoint.<kind>` about `endpoint` (as it is after the transition) and its
 * deliveries, in `tx`. Returns the deliveries to queue after commit.
 */
export function recordEndpointEvent(
  tx: Tx,
  kind: OperationalType,
  endpoint: Endpoint,
  leaseMs: number,
  now = new Date(),
): Promise<QueuedDelivery[]> {
  const event = create(eventsProto.EventSchema, {
    id: newId('evt', now.getTime()),
    type: TYPE[kind],
    createdAt: timestampFromDate(now),
    data: { case: 'webhookEndpoint', value: endpointResource(endpoint) },
    livemode: endpoint.livemode,
    accountId: endpoint.accountId,
  });
  const payload = toBinary(eventsProto.EventSchema, event);
  return recordEvents(tx, [{ event, payload, aboutEndpoint: endpoint.id }], leaseMs, now);
}
