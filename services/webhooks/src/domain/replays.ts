// Sending again what an account already had: one event resent now (POST /v1/events/{id}/resend),
// and the two background replays — an endpoint's recovery (POST /v1/webhooks/{id}/recover) and a
// bulk resend of a time range (POST /v1/event_resends). A replay is a row of webhooks.replays
// that the replayer (delivery/replayer.ts) works through a chunk at a time, each chunk and its
// cursor committed together, so a restart neither loses nor repeats one.
//
// A recovery goes through the account's event log (webhooks.events, what GET /v1/events lists)
// from `since` to when it began, and sends the endpoint every event it did not receive: an
// existing delivery that failed or was skipped is re-queued in place (it starts the retry
// schedule over, as a manual retry does), and an event that has no delivery to it — it arrived
// while the endpoint was disabled — gets its fan-out delivery now (origin 'event', the id fan-out
// would have given it, so it can exist once only). An event with a delivery pending or succeeded
// (a resend's counts) is left alone. A resend adds a new delivery (origin 'resend') per event and
// endpoint: the first one stays as it was.
import { apiError } from '@mcs/errors';
import type { Caller } from '@mcs/kit/caller';
import type { Tx } from '@mcs/kit/db';
import { encodeTime, newId } from '@mcs/kit/ids';
import { RESOURCE_EVENT_TYPES } from '@mcs/kit/outbox';
import { and, eq, type SQL, sql } from 'drizzle-orm';
import { type DeliveryStatus, events, type ReplayKind, replays } from '../db/schema.ts';
import type { Delivery } from './deliveries.ts';
import {
  type Endpoint,
  type EventSink,
  enableEndpoint,
  getEndpoint,
  referencedEndpoint,
} from './endpoints.ts';
import type { QueuedDelivery } from './fanout.ts';

export type Replay = typeof replays.$inferSelect;

/** Where the deliveries a replay queued stand now. */
export type ReplayCounts = Record<DeliveryStatus, number>;

/** Whether endpoint subscription `list` takes events of `type` ("*": the nine resource types). */
export function subscribes(list: readonly string[], type: string): boolean {
  return list.includes(type) || (list.includes('*') && RESOURCE_EVENT_TYPES.includes(type));
}

/**
 * The same rule in SQL, for a type expression and a subscription (default: the endpoints row
 * `e`'s): "*" takes the resource types only, an operational type must be named.
 */
export const subscribedSql = (type: unknown, list: SQL = sql`e.events`) =>
  sql`${list} && case when ${type}::text = any(${sql.param([...RESOURCE_EVENT_TYPES])}::text[])
                      then array[${type}::text, '*'] else array[${type}::text] end`;

/** A fresh delivery id made in SQL: `dlv_` + the time part of now + 16 random hex digits. */
export const newDeliveryIdSql = (now: Date) =>
  sql`'dlv_' || ${encodeTime(now.getTime())} || substr(md5(gen_random_uuid()::text), 1, 16)`;

export type InsertedRow = { id: string; event_id: string; endpoint_id: string; type: string };

/**
 * Queued without a target: the engine claims them first, and its claim applies what the
 * endpoint says now (a Retry-After pause, max_rate, its status).
 */
export function queuedOf(rows: InsertedRow[], lease: Date): QueuedDelivery[] {
  return rows.map((r) => ({ deliveryId: r.id, endpointId: r.endpoint_id, lease }));
}

/** The event `id` of the caller, with what a resend needs (test events are not resent). */
async function resendable(tx: Tx, caller: Caller, id: string) {
  const [row] = await tx
    .select({ id: events.id, type: events.type })
    .from(events)
    .where(
      and(
        eq(events.id, id),
        eq(events.accountId, caller.accountId),
        eq(events.livemode, caller.livemode),
        eq(events.test, false),
      ),
    )
    // Held until the resend's delivery is in: the retention purge (domain/retention.ts) cannot
    // remove the event under it and leave the delivery without its event.
    .for('share');
  if (!row) throw apiError('resource_missing', { param: 'id', message: `No such event: ${id}.` });
  return row;
}

/**
 * For an events row `ev`: the endpoint an operational event is about (its data's id), which
 * never receives that event; null for the resource events.
 */
export const aboutSql = sql`case when ev.type like 'webhook_endpoint.%' then (ev.body::jsonb -> 'data' ->> 'id') end`;

/** A resend or recovery goes only to an enabled endpoint: `param` names where it came from. */
function requireEnabled(endpoint: Endpoint, param: string): void {
  if (endpoint.status === 'enabled') return;
  throw apiError('invalid_state_transition', {
    param,
    message: `Webhook endpoint ${endpoint.id} is ${endpoint.status}: enable it (POST /v1/webhooks/${endpoint.id}/enable) or recover it (POST /v1/webhooks/${endpoint.id}/recover) first.`,
  });
}

/**
 * Delivers event `id` again: a new delivery to `endpointId`, or to every enabled endpoint
 * subscribed to its type. The deliveries are pending with a lease; the caller queues them after
 * commit.
 */
export async function resendEvent(
  tx: Tx,
  caller: Caller,
  id: string,
  endpointId: string | undefined,
  leaseMs: number,
  now = new Date(),
): Promise<{ deliveries: Delivery[]; queued: QueuedDelivery[] }> {
  const event = await resendable(tx, caller, id);
  if (endpointId !== undefined) {
    const endpoint = await referencedEndpoint(tx, caller, endpointId, 'endpoint');
    requireEnabled(endpoint, 'endpoint');
    if (!subscribes(endpoint.events, event.type)) {
      throw apiError('invalid_value', {
        param: 'endpoint',
        message: `Webhook endpoint ${endpoint.id} does not subscribe to ${event.type} events.`,
      });
    }
  }
  const lease = new Date(now.getTime() + leaseMs);
  const { rows } = await tx.execute<InsertedRow>(sql`
    with ins as (
      insert into webhooks.deliveries
        (id, event_id, endpoint_id, account_id, livemode, status, next_attempt_at, origin, created_at)
      select ${newDeliveryIdSql(now)}, ev.id, e.id, e.account_id, e.livemode, 'pending', ${lease}, 'resend', ${now}
        from webhooks.events ev
        join webhooks.endpoints e
          on e.account_id = ev.account_id and e.livemode = ev.livemode
         and e.status = 'enabled' and ${subscribedSql(sql`ev.type`)}
         and e.id is distinct from ${aboutSql}
       where ev.id = ${event.id}
         ${endpointId !== undefined ? sql`and e.id = ${endpointId}` : sql``}
      returning id, event_id, endpoint_id)
    select ins.id, ins.event_id, ins.endpoint_id, ${event.type} as type from ins order by ins.endpoint_id`);
  if (endpointId !== undefined && rows.length === 0) {
    throw apiError('invalid_value', {
      param: 'endpoint',
      message: `Webhook endpoint ${endpointId} does not receive this event (an operational event is never sent to the endpoint it is about).`,
    });
  }
  return {
    deliveries: rows.map((r) => ({
      id: r.id,
      endpointId: r.endpoint_id,
      eventId: r.event_id,
      eventType: r.type,
      status: 'pending',
      attempts: 0,
      nextAttemptAt: now,
      livemode: caller.livemode,
      createdAt: now,
      attemptLog: [],
    })),
    queued: queuedOf(rows, lease),
  };
}

const ID_PREFIX: Record<ReplayKind, string> = { recovery: 'rcv', resend: 'ers' };

/** One event of an endpoint's backlog (backlogSql): the delivery to re-queue, or none to add. */
export type BacklogRow = {
  id: string;
  created_at: Date | string;
  /** Its failed or skipped fan-out delivery to the endpoint; null: it has none (add it). */
  requeue: string | null;
  /** The event as published (per_resource endpoints only: its resource key). */
  payload: Buffer | null;
  /** Its outbox seq (per_resource endpoints only: its place among its resource's changes). */
  outbox_seq: string | null;
};

/**
 * The events of the account's log in [since, until) that endpoint `ep` did not receive, after
 * event id `after` (a recovery's cursor), in id order, `limit` at most (none: all of them). One
 * is in the backlog when no delivery of it to `ep` is pending or succeeded, and either
 *  - its fan-out delivery to `ep` failed or was skipped (re-queued in place), or
 *  - it has none (it arrived while `ep` was disabled) and `ep` subscribes to it now — "*" the
 *    resource types, an operational type when named, never the event about `ep` itself, nor an
 *    event from before `ep` existed — or a resend of it to `ep` failed.
 * Test events (POST /v1/webhooks/{id}/test) are not part of the log and never replayed.
 * With `limit` (a recovery's chunk), the events found are share-locked, as a resend's are: the
 * retention purge (retention.ts), which locks the events it removes, either waits for the chunk's
 * deliveries and keeps those events, or removes them first and the chunk passes them over.
 */
export function backlogSql(
  ep: Pick<Endpoint, 'id' | 'accountId' | 'livemode' | 'events' | 'ordering' | 'createdAt'>,
  range: { since: Date; until: Date; after: string | null },
  limit?: number,
): SQL {
  const from = range.after ?? `evt_${encodeTime(range.since.getTime())}`;
  const resent = (statuses: string[]) => sql`exists (
      select 1 from webhooks.deliveries r
       where r.event_id = ev.id and r.endpoint_id = ${ep.id} and r.origin = 'resend'
         and r.status = any(${sql.param(statuses)}::text[]))`;
  return sql`
    select ev.id, ev.created_at, d.id as requeue,
           ${ep.ordering === 'per_resource' ? sql`ev.payload` : sql`null::bytea`} as payload,
           ${ep.ordering === 'per_resource' ? sql`ev.outbox_seq::text` : sql`null::text`} as outbox_seq
      from webhooks.events ev
      left join webhooks.deliveries d
        on d.event_id = ev.id and d.endpoint_id = ${ep.id} and d.origin = 'event'
     where ev.account_id = ${ep.accountId} and ev.livemode = ${ep.livemode} and not ev.test
       and ev.id > ${from} and ev.created_at >= ${range.since} and ev.created_at < ${range.until}
       and not ${resent(['pending', 'succeeded'])}
       and case when d.id is not null then d.status in ('failed', 'skipped')
                else (ev.created_at >= ${ep.createdAt}
                      and ${subscribedSql(sql`ev.type`, sql`${sql.param(ep.events)}::text[]`)}
                      and ${aboutSql} is distinct from ${ep.id})
                     or ${resent(['failed', 'skipped'])} end
     ${limit !== undefined ? sql`order by ev.id limit ${limit} for share of ev` : sql``}`;
}

/** How many events endpoint `ep`'s backlog in [since, until) holds now (a recovery's total). */
async function backlogSize(
  tx: Tx,
  ep: Parameters<typeof backlogSql>[0],
  since: Date,
  until: Date,
): Promise<number> {
  const { rows } = await tx.execute<{ n: number }>(
    sql`select count(*)::int as n from (${backlogSql(ep, { since, until, after: null })}) b`,
  );
  return rows[0]?.n ?? 0;
}

/**
 * Starts the recovery of endpoint `endpointId`: re-enables it if it is not enabled, and records
 * a replay of its backlog (backlogSql) from `since` to now: what failed or was skipped, and what
 * arrived while it was disabled. The replayer queues them (wake it after commit).
 */
export async function startRecovery(
  tx: Tx,
  caller: Caller,
  endpointId: string,
  since: Date | undefined,
  now = new Date(),
  /** Receives the webhook_endpoint.enabled deliveries when it re-enables the endpoint. */
  sink?: EventSink,
): Promise<{ replay: Replay; endpoint: Endpoint; enabled: boolean }> {
  // Another account's endpoint is not found, whatever the body says.
  const before = await getEndpoint(tx, caller, endpointId, { lock: true });
  if (!since) {
    throw apiError('missing_required_field', {
      param: 'since',
      message: 'Missing required parameter: since (an ISO 8601 time).',
    });
  }
  if (since.getTime() > now.getTime()) {
    throw apiError('invalid_value', { param: 'since', message: 'since must not be in the future.' });
  }
  const endpoint =
    before.status === 'enabled' ? before : await enableEndpoint(tx, caller, endpointId, now, sink);
  const replay = await recordRecovery(tx, endpoint, since, now);
  return { replay, endpoint, enabled: before.status !== 'enabled' };
}

/**
 * Records a recovery of `endpoint` (enabled) from `since` to now: by POST .../recover, or by
 * auto_recover once its probe succeeded.
 */
export async function recordRecovery(
  tx: Tx,
  endpoint: Endpoint,
  since: Date,
  now = new Date(),
): Promise<Replay> {
  return insertReplay(tx, {
    kind: 'recovery',
    caller: { accountId: endpoint.accountId, livemode: endpoint.livemode },
    endpointId: endpoint.id,
    since,
    // Events after it began reach the endpoint (enabled now) by fan-out.
    until: now,
    type: null,
    total: await backlogSize(tx, endpoint, since, now),
    now,
  });
}

export interface BulkResendInput {
  since: Date | undefined;
  until: Date | undefined;
  type: string | undefined;
  endpoint: string | undefined;
}

/**
 * Starts a bulk resend: every event of the caller's in [since, until) (of `type`), delivered
 * again to each enabled endpoint subscribed to it (or to `endpoint` only). Rate-limited: one
 * runs at a time per account and mode, and it queues WEBHOOK_REPLAY_RATE deliveries a second.
 */
export async function startBulkResend(
  tx: Tx,
  caller: Caller,
  input: BulkResendInput,
  replayRate: number,
  now = new Date(),
): Promise<Replay> {
  const { since } = input;
  if (!since) {
    throw apiError('missing_required_field', {
      param: 'since',
      message: 'Missing required parameter: since (an ISO 8601 time).',
    });
  }
  // Without until (now), a since not before now is at fault: name the parameter the caller sent.
  if (input.until === undefined && since.getTime() >= now.getTime()) {
    throw apiError('invalid_value', { param: 'since', message: 'since must be in the past.' });
  }
  const until = input.until ?? now;
  if (until.getTime() <= since.getTime()) {
    throw apiError('invalid_value', { param: 'until', message: 'until must be later than since.' });
  }
  if (input.endpoint !== undefined) {
    const endpoint = await referencedEndpoint(tx, caller, input.endpoint, 'endpoint');
    requireEnabled(endpoint, 'endpoint');
    if (input.type !== undefined && !subscribes(endpoint.events, input.type)) {
      throw apiError('invalid_value', {
        param: 'endpoint',
        message: `Webhook endpoint ${endpoint.id} does not subscribe to ${input.type} events.`,
      });
    }
  }
  // One bulk resend at a time per account and mode: serialize the check on the account.
  await tx.execute(
    sql`select pg_advisory_xact_lock(hashtext(${`replay:${caller.accountId}:${caller.livemode}`}))`,
  );
  const running = await tx.execute<{ id: string; total: number; queued: number }>(sql`
    select id, total, queued from webhooks.replays
     where account_id = ${caller.accountId} and livemode = ${caller.livemode}
       and kind = 'resend' and status = 'running'
     limit 1`);
  const busy = running.rows[0];
  if (busy) {
    const seconds = Math.max(1, Math.ceil(Math.max(0, busy.total - busy.queued) / Math.max(1, replayRate)));
    throw rateLimited(
      `Bulk resend ${busy.id} is still running; one runs at a time. Follow it with GET /v1/event_resends/${busy.id}, then retry.`,
      seconds,
    );
  }
  const total = await tx.execute<{ n: number }>(sql`
    select count(*)::int as n from webhooks.events
     where account_id = ${caller.accountId} and livemode = ${caller.livemode} and not test
       and id >= ${`evt_${encodeTime(since.getTime())}`}
       and created_at >= ${since} and created_at < ${until}
       ${input.type !== undefined ? sql`and type = ${input.type}` : sql``}`);
  return insertReplay(tx, {
    kind: 'resend',
    caller,
    endpointId: input.endpoint ?? null,
    since,
    until,
    type: input.type ?? null,
    total: total.rows[0]?.n ?? 0,
    now,
  });
}

/** A 429 rate_limit_error whose Retry-After the gateway passes on. */
function rateLimited(message: string, retryAfter: number) {
  const err = apiError('rate_limited', { message });
  err.metadata.set('retry-after', String(retryAfter));
  return err;
}

async function insertReplay(
  tx: Tx,
  r: {
    kind: ReplayKind;
    caller: Pick<Caller, 'accountId' | 'livemode'>;
    endpointId: string | null;
    since: Date;
    until: Date | null;
    type: string | null;
    total: number;
    now: Date;
  },
): Promise<Replay> {
  const [row] = await tx
    .insert(replays)
    .values({
      id: newId(ID_PREFIX[r.kind], r.now.getTime()),
      kind: r.kind,
      accountId: r.caller.accountId,
      livemode: r.caller.livemode,
      endpointId: r.endpointId,
      since: r.since,
      until: r.until,
      type: r.type,
      status: 'running',
      total: r.total,
      nextRunAt: r.now,
      createdAt: r.now,
    })
    .returning();
  if (!row) throw new Error('replay insert returned no row');
  return row;
}

/** Replay `id` of the caller, of `kind` (and of endpoint `endpointId` for a recovery). */
export async function getReplay(
  tx: Tx,
  caller: Caller,
  kind: ReplayKind,
  id: string,
  endpointId?: string,
): Promise<Replay> {
  const [row] = await tx
    .select()
    .from(replays)
    .where(
      and(
        eq(replays.id, id),
        eq(replays.kind, kind),
        eq(replays.accountId, caller.accountId),
        eq(replays.livemode, caller.livemode),
        endpointId !== undefined ? eq(replays.endpointId, endpointId) : undefined,
      ),
    );
  if (!row) {
    throw apiError('resource_missing', {
      param: kind === 'recovery' ? 'recovery' : 'id',
      message: `No such ${kind === 'recovery' ? 'recovery' : 'event resend'}: ${id}.`,
    });
  }
  return row;
}

/** The deliveries replay `id` queued, by their status now. */
export async function replayCounts(tx: Tx, id: string): Promise<ReplayCounts> {
  const { rows } = await tx.execute<{ status: DeliveryStatus; n: number }>(sql`
    select status, count(*)::int as n from webhooks.deliveries where replay_id = ${id} group by status`);
  const counts: ReplayCounts = { pending: 0, succeeded: 0, failed: 0, skipped: 0 };
  for (const r of rows) counts[r.status] = r.n;
  return counts;
}
