// EventService over Connect: the stored event, decoded, so the gateway renders exactly the
// envelope its deliveries carried (both are render(EventSchema, event) of the same bytes).
import { create, fromBinary } from '@bufbuild/protobuf';
import type { ServiceImpl } from '@connectrpc/connect';
import { callerOf } from '@mcs/kit/caller';
import { eventTypeName } from '@mcs/kit/outbox';
import { events as eventsProto, webhooks } from '@mcs/proto';
import type { Deps } from '../deps.ts';
import { getEvent, listEvents, type StoredEvent } from '../domain/events.ts';
import { eventDeliveries } from '../domain/insights.ts';
import { toProtoDelivery } from './endpoints.ts';

const decode = (e: StoredEvent) => fromBinary(eventsProto.EventSchema, e.payload);

export function eventHandlers(deps: Deps): ServiceImpl<typeof webhooks.EventService> {
  return {
    async getEvent(req, ctx) {
      return decode(await getEvent(deps.db, callerOf(ctx), req.id));
    },
    async listEvents(req, ctx) {
      const page = await listEvents(deps.db, callerOf(ctx), {
        limit: req.limit,
        startingAfter: req.startingAfter || undefined,
        type: req.type ? eventTypeName(req.type) : undefined,
      });
      return create(webhooks.ListEventsResponseSchema, {
        data: page.data.map(decode),
        hasMore: page.hasMore,
      });
    },
    async listEventDeliveries(req, ctx) {
      const data = await eventDeliveries(deps.db, callerOf(ctx), req.id);
      return create(webhooks.ListEventDeliveriesResponseSchema, { data: data.map(toProtoDelivery) });
    },
  };
}
