// The webhooks schema: endpoints, the event log, deliveries and their attempts.
// Migrations: `pnpm --filter @mcs/webhooks db:generate`.
// Each keyed write's answer goes to kit's idempotency.keys (kit/idempotency), in the write's own
// statement or transaction; migration 0006 creates that table when missing.

import { bytea } from '@mcs/kit/outbox';
import { sql } from 'drizzle-orm';
import { bigint, boolean, index, integer, pgSchema, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';

export const webhooks = pgSchema('webhooks');

const ts = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });

export type EndpointStatus = 'enabled' | 'unhealthy' | 'disabled';
export type DisabledReason = 'gone' | 'manual';
/** per_resource: events of one resource are delivered one at a time, in order (delivery/engine.ts). */
export type Ordering = 'none' | 'per_resource';

export const endpoints = webhooks.table(
  'endpoints',
  {
    id: text('id').primaryKey(),
    accountId: text('account_id').notNull(),
    livemode: boolean('livemode').notNull(),
    url: text('url').notNull(),
    /** Event types, or '*' for all. */
    events: text('events').array().notNull(),
    description: text('description'),
    status: text('status').$type<EndpointStatus>().notNull(),
    /** AES-256-GCM sealed signing secret (see domain/secrets.ts); never stored in clear. */
    secretSealed: bytea('secret_sealed').notNull(),
    /** While status is 'disabled': 'gone' (the receiver answered 410) or 'manual'. */
    disabledReason: text('disabled_reason').$type<DisabledReason>(),
    failingSince: ts('failing_since'),
    lastError: text('last_error'),
    /** When the early-warning e-mail of the current failing stretch was written (one per stretch). */
    warnedAt: ts('warned_at'),
    /** A 410 answer disables the endpoint at once (else it is an ordinary failure). */
    disableOnGone: boolean('disable_on_gone').notNull().default(true),
    /** Deliveries started per second at most; null: unlimited. */
    maxRate: integer('max_rate'),
    /**
     * A 429/503 answer's Retry-After: no attempt to this endpoint starts before then (its
     * pending deliveries are moved there, and fan-out schedules new ones there).
     */
    pausedUntil: ts('paused_until'),
    /**
     * max_rate across replicas: the GCRA theoretical arrival time, i.e. the end of the start slots
     * reserved so far (delivery/rate-slots.ts).
     */
    rateTat: ts('rate_tat'),
    ordering: text('ordering').$type<Ordering>().notNull().default('none'),
    /** While unhealthy, probe it (a signed ping) on a backoff; a 2xx re-enables it and replays its backlog. */
    autoRecover: boolean('auto_recover').notNull().default(false),
    /** When the next probe is due (auto_recover, while unhealthy); null: none planned. */
    probeAt: ts('probe_at'),
    /** Probes made since it turned unhealthy (the backoff's step). */
    probes: integer('probes').notNull().default(0),
    createdAt: ts('created_at').notNull(),
    updatedAt: ts('updated_at').notNull(),
  },
  (t) => [
    index('endpoints_account_idx').on(t.accountId, t.livemode, t.id),
    index('endpoints_probe_idx').on(t.probeAt).where(sql`${t.probeAt} is not null`),
  ],
);

/** The event log: every event of every account, as delivered. */
export const events = webhooks.table(
  'events',
  {
    id: text('id').primaryKey(),
    accountId: text('account_id').notNull(),
    livemode: boolean('livemode').notNull(),
    type: text('type').notNull(),
    /** The proto Event, as published. */
    payload: bytea('payload').notNull(),
    /** The envelope JSON, exactly the bytes every delivery of this event sends. */
    body: text('body').notNull(),
    /** A test event (POST /v1/webhooks/{id}/test): delivered, but not part of GET /v1/events. */
    test: boolean('test').notNull().default(false),
    /**
     * Its outbox seq in the service that wrote it (the Mcs-Outbox-Seq header; null without one):
     * where its change committed among its resource's. per_resource deliveries made later (a
     * recovery) are ordered by it.
     */
    outboxSeq: bigint('outbox_seq', { mode: 'number' }),
    /**
     * With a resource version (the Mcs-Resource-Version header, kit/outbox
     * NewEvent.resourceVersion; null without one): the resource it is about (`order:ord_…`,
     * domain/fanout.ts resourceKey) and its version after this change. A per_resource delivery
     * of version v waits until version v − 1 of its resource is here (delivery/engine.ts).
     */
    resourceKey: text('resource_key'),
    resourceVersion: integer('resource_version'),
    createdAt: ts('created_at').notNull(),
  },
  (t) => [
    index('events_account_idx').on(t.accountId, t.livemode, t.id),
    index('events_account_type_idx').on(t.accountId, t.livemode, t.type, t.id),
    index('events_resource_version_idx')
      .on(t.resourceKey, t.resourceVersion)
      .where(sql`${t.resourceVersion} is not null`),
  ],
);

export type DeliveryStatus = 'pending' | 'succeeded' | 'failed' | 'skipped';
/** event: fan-out (one per event and endpoint); resend: POST /v1/events/{id}/resend or a bulk resend. */
export type DeliveryOrigin = 'event' | 'resend';

export const deliveries = webhooks.table(
  'deliveries',
  {
    id: text('id').primaryKey(),
    eventId: text('event_id').notNull(),
    endpointId: text('endpoint_id').notNull(),
    accountId: text('account_id').notNull(),
    livemode: boolean('livemode').notNull(),
    status: text('status').$type<DeliveryStatus>().notNull(),
    /** Attempts made so far; also the number of the last row in `attempts`. */
    attempts: integer('attempts').notNull().default(0),
    /**
     * The value of `attempts` when the current run of the retry schedule began: 0, or the count
     * at a manual resend of a failed or skipped delivery. Attempt `attempts - scheduleStart` of
     * the run decides the next delay, and the last one failing turns the endpoint unhealthy.
     */
    scheduleStart: integer('schedule_start').notNull().default(0),
    /**
     * When a worker may next claim it. Fresh deliveries get a lease in the future so the process
     * that queued them in memory sends them first; if it dies, any replica claims them after.
     */
    nextAttemptAt: ts('next_attempt_at'),
    lastAttemptAt: ts('last_attempt_at'),
    origin: text('origin').$type<DeliveryOrigin>().notNull().default('event'),
    /**
     * The resource the event is about (`order:ord_…`) when its endpoint orders deliveries per
     * resource; null otherwise (the unordered path never looks at it).
     */
    orderingKey: text('ordering_key'),
    /**
     * With ordering_key: the event's outbox seq in the service that wrote it (kit/outbox
     * OutboxRow.outboxSeq), i.e. the order in which the resource's changes committed. Deliveries
     * of one endpoint and resource go in this order.
     */
    orderingSeq: bigint('ordering_seq', { mode: 'number' }),
    /**
     * With ordering_key: the lease its engine's claim took for an attempt. The attempt is in
     * flight while this equals next_attempt_at and is in the future (recording the attempt moves
     * next_attempt_at), and no other delivery of its resource starts meanwhile.
     */
    orderingLease: ts('ordering_lease'),
    /** With ordering_key: held back by the claim behind another delivery of its resource (engine release()). */
    orderingHeld: boolean('ordering_held').notNull().default(false),
    /**
     * With ordering_key, from fan-out only: the event's resource version when above 1. The claim
     * holds the delivery until the event of the version before it is in the event log, at most
     * WEBHOOK_ORDERING_WAIT after this row was made (delivery/engine.ts claimOrdered). Null on
     * resends and recoveries (no new change: they never wait for a predecessor).
     */
    orderingVersion: integer('ordering_version'),
    /** The recovery or bulk resend that last (re)queued it, for that job's progress counts. */
    replayId: text('replay_id'),
    createdAt: ts('created_at').notNull(),
  },
  (t) => [
    // Fan-out makes one delivery per event and endpoint; resends add new ones on purpose.
    uniqueIndex('deliveries_event_endpoint_idx')
      .on(t.eventId, t.endpointId)
      .where(sql`${t.origin} = 'event'`),
    // A recovery looks up the resends of an event to an endpoint (domain/replays.ts backlogSql):
    // few rows, and fan-out's inserts (origin 'event') never touch it.
    index('deliveries_resend_idx').on(t.eventId, t.endpointId).where(sql`${t.origin} = 'resend'`),
    index('deliveries_due_idx').on(t.nextAttemptAt).where(sql`${t.status} = 'pending'`),
    index('deliveries_endpoint_idx').on(t.endpointId, t.id),
    index('deliveries_ordering_idx')
      .on(t.endpointId, t.orderingKey, t.orderingSeq)
      .where(sql`${t.status} = 'pending' and ${t.orderingKey} is not null`),
    index('deliveries_replay_idx').on(t.replayId).where(sql`${t.replayId} is not null`),
  ],
);

export type ReplayKind = 'recovery' | 'resend';
export type ReplayStatus = 'running' | 'completed' | 'canceled';

/**
 * Replays that run in the background, a chunk at a time (delivery/replayer.ts): an endpoint's
 * recovery (POST /v1/webhooks/{id}/recover) and bulk event resends (POST /v1/event_resends).
 * The cursor makes them restart-safe: each chunk and the cursor move commit together.
 */
export const replays = webhooks.table(
  'replays',
  {
    id: text('id').primaryKey(),
    kind: text('kind').$type<ReplayKind>().notNull(),
    accountId: text('account_id').notNull(),
    livemode: boolean('livemode').notNull(),
    /** The endpoint recovered, or the only endpoint a bulk resend goes to (null: every subscriber). */
    endpointId: text('endpoint_id'),
    since: ts('since').notNull(),
    /** Bulk resend: events before this time only (null: up to its creation). */
    until: ts('until'),
    /** Bulk resend: events of this type only (null: every type). */
    type: text('type'),
    status: text('status').$type<ReplayStatus>().notNull(),
    /** The last delivery (recovery) or event (resend) handled. */
    cursor: text('cursor'),
    /** Recovery: events of its backlog when it began; resend: events matched. */
    total: integer('total').notNull().default(0),
    /** Deliveries queued so far. */
    queued: integer('queued').notNull().default(0),
    /** When a runner may take its next chunk (also its lease while one runs it). */
    nextRunAt: ts('next_run_at'),
    createdAt: ts('created_at').notNull(),
    completedAt: ts('completed_at'),
  },
  (t) => [
    index('replays_due_idx').on(t.nextRunAt).where(sql`${t.status} = 'running'`),
    index('replays_account_idx').on(t.accountId, t.livemode, t.kind, t.id),
  ],
);

export const attempts = webhooks.table(
  'attempts',
  {
    deliveryId: text('delivery_id').notNull(),
    number: integer('number').notNull(),
    at: ts('at').notNull(),
    statusCode: integer('status_code'),
    error: text('error'),
    latencyMs: integer('latency_ms').notNull(),
    responseExcerpt: text('response_excerpt'),
  },
  (t) => [uniqueIndex('attempts_delivery_idx').on(t.deliveryId, t.number)],
);

/**
 * Mail outbox: one row per transition that mails the account (unhealthy, disabled by a 410,
 * failing for a while: domain/health.ts); the mailer sends each once.
 */
export const notifications = webhooks.table(
  'notifications',
  {
    id: text('id').primaryKey(),
    accountId: text('account_id').notNull(),
    endpointId: text('endpoint_id').notNull(),
    kind: text('kind').notNull(),
    detail: text('detail').notNull(),
    createdAt: ts('created_at').notNull(),
    /** When the mailer may next try it (moved forward after a failed send). */
    nextAttemptAt: ts('next_attempt_at').notNull().defaultNow(),
    attempts: integer('attempts').notNull().default(0),
    lastError: text('last_error'),
    sentAt: ts('sent_at'),
  },
  (t) => [index('notifications_due_idx').on(t.nextAttemptAt).where(sql`${t.sentAt} is null`)],
);

/**
 * Per-account settings of test mode (live mode always uses the service's): a retry schedule of
 * the account's own, in ms (domain/settings.ts). No row: the service's schedule.
 */
export const accountSettings = webhooks.table('account_settings', {
  accountId: text('account_id').primaryKey(),
  retryScheduleMs: integer('retry_schedule_ms').array().notNull(),
  updatedAt: ts('updated_at').notNull(),
});
