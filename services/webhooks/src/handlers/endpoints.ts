// WebhookEndpointService over Connect: decode, call the domain, encode.
import { create, type Message } from '@bufbuild/protobuf';
import { timestampDate, timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { HandlerContext, ServiceImpl } from '@connectrpc/connect';
import { type Caller, callerOf } from '@mcs/kit/caller';
import type { Tx } from '@mcs/kit/db';
import { writeKeyed } from '@mcs/kit/idempotency';
import { eventTypeName } from '@mcs/kit/outbox';
import { webhooks } from '@mcs/proto';
import type { DeliveryStatus, Ordering } from '../db/schema.ts';
import type { Deps } from '../deps.ts';
import {
  type Delivery,
  eventTypeOf,
  listDeliveries,
  retryDelivery,
  sendTestEvent,
} from '../domain/deliveries.ts';
import {
  createEndpoint,
  deleteEndpoint,
  enableEndpoint,
  getEndpoint,
  listEndpoints,
  rotateSecret,
  updateEndpoint,
} from '../domain/endpoints.ts';
import type { QueuedDelivery } from '../domain/fanout.ts';
import { endpointStats } from '../domain/insights.ts';
import { endpointResource } from '../domain/operational.ts';
import { getReplay, type Replay, type ReplayCounts, replayCounts, startRecovery } from '../domain/replays.ts';

const DELIVERY_STATUS = {
  pending: webhooks.DeliveryStatus.PENDING,
  succeeded: webhooks.DeliveryStatus.SUCCEEDED,
  failed: webhooks.DeliveryStatus.FAILED,
  skipped: webhooks.DeliveryStatus.SKIPPED,
} as const satisfies Record<DeliveryStatus, webhooks.DeliveryStatus>;

function orderingOf(value: webhooks.EndpointOrdering | undefined): Ordering | undefined {
  switch (value) {
    case webhooks.EndpointOrdering.NONE:
      return 'none';
    case webhooks.EndpointOrdering.PER_RESOURCE:
      return 'per_resource';
    default:
      return undefined;
  }
}

const REPLAY_STATUS = {
  running: webhooks.ReplayStatus.RUNNING,
  completed: webhooks.ReplayStatus.COMPLETED,
  canceled: webhooks.ReplayStatus.CANCELED,
} as const;

/** The fields a recovery and a bulk resend share. */
export function replayFields(r: Replay, counts: ReplayCounts) {
  return {
    id: r.id,
    since: timestampFromDate(r.since),
    status: REPLAY_STATUS[r.status],
    total: r.total,
    queued: r.queued,
    deliveries: create(webhooks.ReplayCountsSchema, counts),
    livemode: r.livemode,
    createdAt: timestampFromDate(r.createdAt),
    ...(r.completedAt !== null ? { completedAt: timestampFromDate(r.completedAt) } : {}),
  };
}

export function toProtoRecovery(r: Replay, counts: ReplayCounts): webhooks.WebhookRecovery {
  return create(webhooks.WebhookRecoverySchema, {
    ...replayFields(r, counts),
    webhookEndpoint: r.endpointId ?? '',
  });
}

function deliveryStatusOf(value: webhooks.DeliveryStatus | undefined): DeliveryStatus | undefined {
  switch (value) {
    case undefined:
    case webhooks.DeliveryStatus.UNSPECIFIED:
      return undefined;
    case webhooks.DeliveryStatus.PENDING:
      return 'pending';
    case webhooks.DeliveryStatus.SUCCEEDED:
      return 'succeeded';
    case webhooks.DeliveryStatus.FAILED:
      return 'failed';
    case webhooks.DeliveryStatus.SKIPPED:
      return 'skipped';
    default: {
      const never: never = value;
      throw new Error(`unknown delivery status ${String(never)}`);
    }
  }
}

/** The endpoint as the REST API renders it (operational.ts); its secret only when given. */
export const toProtoEndpoint = endpointResource;

export function toProtoDelivery(d: Delivery): webhooks.WebhookDelivery {
  return create(webhooks.WebhookDeliverySchema, {
    id: d.id,
    webhookEndpoint: d.endpointId,
    event: d.eventId,
    eventType: eventTypeOf(d.eventType),
    status: DELIVERY_STATUS[d.status],
    attemptCount: d.attempts,
    ...(d.status === 'pending' && d.nextAttemptAt
      ? { nextAttemptAt: timestampFromDate(d.nextAttemptAt) }
      : {}),
    attempts: d.attemptLog.map((a) =>
      create(webhooks.WebhookAttemptSchema, {
        number: a.number,
        at: timestampFromDate(a.at),
        ...(a.statusCode !== null ? { statusCode: a.statusCode } : {}),
        ...(a.error !== null ? { error: a.error } : {}),
        latencyMs: a.latencyMs,
        ...(a.responseExcerpt !== null ? { responseExcerpt: a.responseExcerpt } : {}),
      }),
    ),
    livemode: d.livemode,
    createdAt: timestampFromDate(d.createdAt),
  });
}

export function endpointHandlers(deps: Deps): ServiceImpl<typeof webhooks.WebhookEndpointService> {
  const { db } = deps;
  /** A write in one transaction, once per idempotency key (kit/idempotency). */
  const write = <T extends Message>(ctx: HandlerContext, caller: Caller, fn: (tx: Tx) => Promise<T>) =>
    writeKeyed(db, deps.keys, ctx, caller, fn);
  return {
    async createWebhookEndpoint(req, ctx) {
      const caller = callerOf(ctx);
      return write(ctx, caller, async (tx) => {
        const input = {
          url: req.url,
          events: req.events,
          description: req.description,
          disableOnGone: req.disableOnGone,
          maxRate: req.maxRate,
          ordering: orderingOf(req.ordering),
          autoRecover: req.autoRecover,
        };
        const { endpoint, secret } = await createEndpoint(tx, caller, input, deps);
        return toProtoEndpoint(endpoint, secret);
      });
    },
    async getWebhookEndpoint(req, ctx) {
      return toProtoEndpoint(await getEndpoint(db, callerOf(ctx), req.id));
    },
    async listWebhookEndpoints(req, ctx) {
      const page = await listEndpoints(db, callerOf(ctx), {
        limit: req.limit,
        startingAfter: req.startingAfter || undefined,
      });
      return create(webhooks.ListWebhookEndpointsResponseSchema, {
        data: page.data.map((e) => toProtoEndpoint(e)),
        hasMore: page.hasMore,
      });
    },
    async updateWebhookEndpoint(req, ctx) {
      const caller = callerOf(ctx);
      // Operational events are queued only by the call that did the work.
      const sink = { leaseMs: deps.queue.leaseMs, queued: [] as QueuedDelivery[] };
      const answer = await write(ctx, caller, async (tx) => {
        sink.queued.length = 0; // a retried transaction starts over
        const input = {
          url: req.url,
          events: req.events,
          description: req.description,
          disabled: req.disabled,
          disableOnGone: req.disableOnGone,
          maxRate: req.maxRate,
          ordering: orderingOf(req.ordering),
          autoRecover: req.autoRecover,
        };
        return toProtoEndpoint(await updateEndpoint(tx, caller, req.id, input, deps, undefined, sink));
      });
      if (sink.queued.length > 0) deps.queue.enqueue(sink.queued);
      return answer;
    },
    async deleteWebhookEndpoint(req, ctx) {
      const caller = callerOf(ctx);
      const id = await db.transaction((tx) => deleteEndpoint(tx, caller, req.id));
      return create(webhooks.DeletedWebhookEndpointSchema, { id, deleted: true });
    },
    async enableWebhookEndpoint(req, ctx) {
      const caller = callerOf(ctx);
      const sink = { leaseMs: deps.queue.leaseMs, queued: [] as QueuedDelivery[] };
      const answer = await write(ctx, caller, async (tx) => {
        sink.queued.length = 0; // a retried transaction starts over
        return toProtoEndpoint(await enableEndpoint(tx, caller, req.id, undefined, sink));
      });
      if (sink.queued.length > 0) deps.queue.enqueue(sink.queued);
      return answer;
    },
    async rotateWebhookEndpointSecret(req, ctx) {
      const caller = callerOf(ctx);
      return write(ctx, caller, async (tx) => {
        const { endpoint, secret } = await rotateSecret(tx, caller, req.id, deps);
        return toProtoEndpoint(endpoint, secret);
      });
    },
    async listWebhookDeliveries(req, ctx) {
      const page = await listDeliveries(db, callerOf(ctx), req.id, {
        limit: req.limit,
        startingAfter: req.startingAfter || undefined,
        status: deliveryStatusOf(req.status),
      });
      return create(webhooks.ListWebhookDeliveriesResponseSchema, {
        data: page.data.map(toProtoDelivery),
        hasMore: page.hasMore,
      });
    },
    async retryWebhookDelivery(req, ctx) {
      const caller = callerOf(ctx);
      // Queued only by the call that did the work: a replayed answer sends nothing again.
      let queued: QueuedDelivery | undefined;
      const answer = await write(ctx, caller, async (tx) => {
        const r = await retryDelivery(tx, caller, req.id, req.delivery, deps.queue.leaseMs);
        queued = r.queued;
        return toProtoDelivery(r.delivery);
      });
      if (queued) deps.queue.enqueue([queued]);
      return answer;
    },
    async sendTestWebhook(req, ctx) {
      const caller = callerOf(ctx);
      const type = req.type ? eventTypeName(req.type) : undefined;
      let queued: QueuedDelivery | undefined;
      const answer = await write(ctx, caller, async (tx) => {
        const r = await sendTestEvent(tx, caller, req.id, type, deps.queue.leaseMs);
        queued = r.queued;
        return toProtoDelivery(r.delivery);
      });
      if (queued) deps.queue.enqueue([queued]);
      return answer;
    },
    async getWebhookEndpointStats(req, ctx) {
      const stats = await endpointStats(db, callerOf(ctx), req.id);
      return create(webhooks.WebhookEndpointStatsSchema, {
        buckets: stats.buckets.map((b) =>
          create(webhooks.WebhookStatsBucketSchema, {
            start: timestampFromDate(b.start),
            succeeded: b.succeeded,
            failed: b.failed,
          }),
        ),
        p50Ms: stats.p50,
        p90Ms: stats.p90,
        p99Ms: stats.p99,
        attempts: stats.attempts,
      });
    },
    async recoverWebhookEndpoint(req, ctx) {
      const caller = callerOf(ctx);
      const since = req.since ? timestampDate(req.since) : undefined;
      // webhook_endpoint.enabled, when it re-enables the endpoint: queued after commit.
      const sink = { leaseMs: deps.queue.leaseMs, queued: [] as QueuedDelivery[] };
      const answer = await write(ctx, caller, async (tx) => {
        sink.queued.length = 0; // a retried transaction starts over
        const { replay } = await startRecovery(tx, caller, req.id, since, new Date(), sink);
        return toProtoRecovery(replay, await replayCounts(tx, replay.id));
      });
      if (sink.queued.length > 0) deps.queue.enqueue(sink.queued);
      deps.replays.wake();
      return answer;
    },
    async getWebhookRecovery(req, ctx) {
      const caller = callerOf(ctx);
      await getEndpoint(db, caller, req.id);
      const replay = await getReplay(db, caller, 'recovery', req.recovery, req.id);
      return toProtoRecovery(replay, await replayCounts(db, replay.id));
    },
  };
}
