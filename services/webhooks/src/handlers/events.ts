// EventService over Connect: the stored event, decoded, so the gateway renders exactly the
// envelope its deliveries carried (both are render(EventSchema, event) of the same bytes); and
// resending events, one now or a time range in the background.
import { create, fromBinary, type Message } from '@bufbuild/protobuf';
import { timestampDate, timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { HandlerContext, ServiceImpl } from '@connectrpc/connect';
import { type Caller, callerOf } from '@mcs/kit/caller';
import type { Tx } from '@mcs/kit/db';
import { writeKeyed } from '@mcs/kit/idempotency';
import { eventTypeName } from '@mcs/kit/outbox';
import { events as eventsProto, webhooks } from '@mcs/proto';
import type { Deps } from '../deps.ts';
import { eventTypeOf } from '../domain/deliveries.ts';
import { getEvent, listEvents, type StoredEvent } from '../domain/events.ts';
import type { QueuedDelivery } from '../domain/fanout.ts';
import { eventDeliveries } from '../domain/insights.ts';
import {
  getReplay,
  type Replay,
  type ReplayCounts,
  replayCounts,
  resendEvent,
  startBulkResend,
} from '../domain/replays.ts';
import { replayFields, toProtoDelivery } from './endpoints.ts';

const decode = (e: StoredEvent) => fromBinary(eventsProto.EventSchema, e.payload);

function toProtoResend(r: Replay, counts: ReplayCounts): webhooks.EventResend {
  return create(webhooks.EventResendSchema, {
    ...replayFields(r, counts),
    ...(r.until !== null ? { until: timestampFromDate(r.until) } : {}),
    ...(r.type !== null ? { type: eventTypeOf(r.type) } : {}),
    ...(r.endpointId !== null ? { webhookEndpoint: r.endpointId } : {}),
  });
}

export function eventHandlers(deps: Deps): ServiceImpl<typeof webhooks.EventService> {
  const { db } = deps;
  const write = <T extends Message>(ctx: HandlerContext, caller: Caller, fn: (tx: Tx) => Promise<T>) =>
    writeKeyed(db, deps.keys, ctx, caller, fn);
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
    async resendEvent(req, ctx) {
      const caller = callerOf(ctx);
      // Queued only by the call that did the work: a replayed answer sends nothing again.
      let queued: QueuedDelivery[] = [];
      const answer = await write(ctx, caller, async (tx) => {
        const r = await resendEvent(tx, caller, req.id, req.endpoint, deps.queue.leaseMs);
        queued = r.queued;
        return create(webhooks.ResendEventResponseSchema, {
          data: r.deliveries.map(toProtoDelivery),
          hasMore: false,
        });
      });
      if (queued.length > 0) deps.queue.enqueue(queued);
      return answer;
    },
    async resendEvents(req, ctx) {
      const caller = callerOf(ctx);
      const input = {
        since: req.since ? timestampDate(req.since) : undefined,
        until: req.until ? timestampDate(req.until) : undefined,
        type: req.type ? eventTypeName(req.type) : undefined,
        endpoint: req.endpoint,
      };
      const answer = await write(ctx, caller, async (tx) => {
        const replay = await startBulkResend(tx, caller, input, deps.replays.rate);
        return toProtoResend(replay, await replayCounts(tx, replay.id));
      });
      deps.replays.wake();
      return answer;
    },
    async getEventResend(req, ctx) {
      const replay = await getReplay(db, callerOf(ctx), 'resend', req.id);
      return toProtoResend(replay, await replayCounts(db, replay.id));
    },
  };
}
