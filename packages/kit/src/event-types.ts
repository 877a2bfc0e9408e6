// The event types by their REST names, from the one proto enum: what the API accepts in an
// endpoint's `events`. A module of their own (proto and rest only, no database) so the CLI can
// load them without the outbox's drizzle and pg.
import { events } from '@mcs/proto';
import { enumValueName } from '@mcs/rest';

/** Every event type by its REST name (`order.created`, …), from the one proto enum. */
export const EVENT_TYPES: readonly string[] = events.EventTypeSchema.values
  .map((v) => enumValueName(events.EventTypeSchema, v.number))
  .filter((n): n is string => n !== null);

/**
 * The operational event types (`webhook_endpoint.unhealthy`, `.disabled`, `.enabled`): about the
 * account's own webhook endpoints, sent only to endpoints that name them.
 */
export const OPERATIONAL_EVENT_TYPES: readonly string[] = EVENT_TYPES.filter((t) =>
  t.startsWith('webhook_endpoint.'),
);

/** The nine resource event types of spec 6.1: what `"*"` subscribes to. */
export const RESOURCE_EVENT_TYPES: readonly string[] = EVENT_TYPES.filter(
  (t) => !OPERATIONAL_EVENT_TYPES.includes(t),
);
