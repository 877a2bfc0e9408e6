// The statements the delivery engine (engine.ts) runs on webhooks.deliveries, apart from recording
// attempts (record.ts): the claim of deliveries it holds in memory, the ordered claim and release
// of per_resource deliveries, the poller's claim of due ones, skipping the undeliverable, and
// max_rate's start slots. The engine decides when each runs and what to do with the answer; each
// here is one statement, or one transaction where the ordering lock needs it.
//
// Finding rows by id. Claims (and record.ts's success records) name their deliveries by id, with
// the status and lease each must still have. Written with `=`, those two would let the planner
// reach the rows through the partial index of pending deliveries (deliveries_due_idx) instead of
// the primary key, and it does when its statistics say few are pending: a new table, one not
// analyzed since a backlog built up (autovacuum off, or under its threshold on a large table), or
// simply because fan-out gives thousands of deliveries the same next_attempt_at. Each claim of 32
// then walked every pending row, once per claimed row: 240 ms per claim with 10,000 pending, and a
// drain of 16,000 deliveries bound by PostgreSQL (`pnpm bench delivery-throughput`). So these
// statements say `is not distinct from` (the same test on these non-null values, but no index
// matches it), and the primary key is the only index left to find their rows: the cost of a claim
// no longer grows with the backlog, whatever the statistics (test: claim-plan.test.ts).
import { type Db, executeNamed } from '@mcs/kit/db';
import { type SQL, sql } from 'drizzle-orm';
import type { QueuedDelivery } from '../domain/fanout.ts';

/** The columns a claim reads back, and the target they make. */
export type ClaimedRow = {
  id: string;
  attempts: number;
  schedule_start: number;
  event_id: string;
  ordering_key: string | null;
  paused: boolean;
  url: string | null;
  secret_sealed: Buffer | null;
  endpoint_status: string | null;
  max_rate: number | null;
  body: string | null;
  /** claimOrdered: the version it waited for in vain and goes without (its first claim only). */
  missing_version?: number | null;
};

/**
 * The claim of deliveries `items`, each by id and the lease it must still hold: moves the lease
 * of each unordered one to `lease` (or to its endpoint's pause, when paused at `now`) and reads
 * its target; names those with an ordering key (`keyed`), for claimOrdered. Rows are found by
 * id whatever the statistics (header, "Finding rows by id").
 *
 * Outer joins: a delivery whose endpoint was deleted (or whose event row is missing) is still
 * claimed, and then skipped rather than left pending for the poller forever. One of an endpoint
 * paused by a Retry-After is moved to the pause's end instead (not claimed). One with an
 * ordering key is left as it is and named: claimOrdered takes it.
 */
export function claimStatement(
  items: ReadonlyArray<Pick<QueuedDelivery, 'deliveryId' | 'lease'>>,
  now: Date,
  lease: Date,
): SQL {
  return sql`
    with input as (
      select * from unnest(${sql.param(items.map((i) => i.deliveryId))}::text[],
                           ${sql.param(items.map((i) => i.lease))}::timestamptz[]) as t(id, lease)
    ), c as (
      update webhooks.deliveries d
         set next_attempt_at = coalesce(
               (select p.paused_until from webhooks.endpoints p
                 where p.id = d.endpoint_id and p.paused_until > ${now}::timestamptz), ${lease}::timestamptz)
        from input i
       where d.id = i.id and d.status is not distinct from 'pending'
         and d.next_attempt_at is not distinct from i.lease and d.ordering_key is null
      returning d.id, d.attempts, d.schedule_start, d.endpoint_id, d.event_id,
                d.next_attempt_at <> ${lease}::timestamptz as paused)
    select c.id, c.attempts, c.schedule_start, c.event_id, null as ordering_key, c.paused, e.url,
           e.secret_sealed, e.status as endpoint_status, e.max_rate, ev.body, false as keyed
      from c left join webhooks.endpoints e on e.id = c.endpoint_id
             left join webhooks.events ev on ev.id = c.event_id
    union all
    select d.id, 0, 0, d.event_id, d.ordering_key, false, null, null, null, null, null, true
      from webhooks.deliveries d join input i on i.id = d.id
     where d.ordering_key is not null and d.status is not distinct from 'pending'
       and d.next_attempt_at is not distinct from i.lease`;
}

/**
 * Claims the unordered deliveries of `items` (claimStatement); `keyed` names those found to have
 * an ordering key, which claimOrdered takes.
 */
export async function claimUnordered(
  db: Db,
  items: ReadonlyArray<Pick<QueuedDelivery, 'deliveryId' | 'lease'>>,
  now: Date,
  lease: Date,
): Promise<{ rows: ClaimedRow[]; keyed: Set<string> }> {
  const result = await db.execute<ClaimedRow & { keyed: boolean }>(claimStatement(items, now, lease));
  return {
    rows: result.rows.filter((r) => !r.keyed),
    keyed: new Set(result.rows.filter((r) => r.keyed).map((r) => r.id)),
  };
}

/** What an ordered claim needs besides its deliveries (the engine's settings, at `now`). */
export interface OrderedClaim {
  now: Date;
  /** The lease a delivery claimed for an attempt gets. */
  lease: Date;
  /** How far ahead a held delivery is put: past any lease, so releaseOrdered tells it from one in flight. */
  holdMs: number;
  /** When a delivery waiting for its predecessor's event is due again (the poll interval). */
  recheckMs: number;
  /** How long a delivery waits for its predecessor's event, from when it was recorded. */
  orderingWaitMs: number;
}

/**
 * per_resource: claims deliveries that have an ordering key, by the ordering rule, across
 * processes. A delivery is held back (ordering_held, its next_attempt_at a HOLD ahead) while
 * another delivery of its endpoint and resource is pending with a lower seq (an earlier
 * change not yet succeeded nor given up), or is in flight (its ordering_lease is its
 * next_attempt_at, still ahead: claimed for an attempt not yet recorded). Otherwise it is
 * claimed, and its lease is written to ordering_lease too, which holds the others back.
 *
 * Those rules order what has arrived. A change that has not (its publish failed and the
 * outbox poll sends it seconds later; two writers' publishes crossed) is caught by its
 * version: a delivery of version v (ordering_version, set by fan-out when v > 1) is also held
 * while the event of version v − 1 of its resource is not in webhooks.events — fan-out
 * records every event there, whichever endpoints want it. Such a delivery is due again after
 * one poll interval (recorded meanwhile, its predecessor is then ordered by seq as above;
 * if this endpoint gets it, its success releases this one at once), and stops waiting
 * `orderingWaitMs` after it was recorded, so a lost event cannot block its resource: it goes,
 * and a warning names the missing version. Resends and recoveries carry no version: they
 * never wait for a predecessor.
 *
 * So that two claims of one resource (two replicas, or a claim racing a fresh earlier event)
 * cannot both pass, the claims of a resource are serialized: a transaction takes an advisory
 * lock per (endpoint, resource) first, in a fixed order (no deadlock between claims), and the
 * claim statement runs after, on a snapshot that sees every claim made before it. Unordered
 * deliveries never come here.
 */
export async function claimOrdered(
  db: Db,
  items: ReadonlyArray<Pick<QueuedDelivery, 'deliveryId' | 'lease'>>,
  { now, lease, holdMs, recheckMs, orderingWaitMs }: OrderedClaim,
): Promise<ClaimedRow[]> {
  const hold = new Date(now.getTime() + holdMs);
  const recheck = new Date(now.getTime() + recheckMs);
  const waitedSince = new Date(now.getTime() - orderingWaitMs);
  const ids = sql.param(items.map((i) => i.deliveryId));
  return db.transaction(async (tx) => {
    await tx.execute(sql`
      select pg_advisory_xact_lock(k.h)
        from (select distinct hashtextextended(endpoint_id || ' ' || ordering_key, 0) as h
                from webhooks.deliveries
               where id = any(${ids}::text[]) and ordering_key is not null
               order by 1) k`);
    // Named (planned once per connection): every ordered delivery's claim runs it.
    return executeNamed<ClaimedRow>(
      tx,
      'mcs_claim_ordered',
      sql`
      with input as (
        select * from unnest(${ids}::text[], ${sql.param(items.map((i) => i.lease))}::timestamptz[]) as t(id, lease)
      ), s as (
        select d.id,
               exists (
                 select 1 from webhooks.deliveries o
                  where o.endpoint_id = d.endpoint_id and o.ordering_key = d.ordering_key
                    and o.status = 'pending' and o.id <> d.id
                    and (o.ordering_seq < d.ordering_seq
                         or (o.ordering_lease = o.next_attempt_at and o.ordering_lease > ${now}::timestamptz))
               ) as held,
               d.ordering_version is not null and not exists (
                 select 1 from webhooks.events v
                  where v.resource_key = d.ordering_key and v.resource_version = d.ordering_version - 1
               ) as missing,
               d.created_at,
               (select p.paused_until from webhooks.endpoints p
                 where p.id = d.endpoint_id and p.paused_until > ${now}::timestamptz) as paused_until
          from webhooks.deliveries d join input i on i.id = d.id
         where d.status is not distinct from 'pending' and d.next_attempt_at is not distinct from i.lease
           and d.ordering_key is not null
      ), w as (
        select s.*, s.missing and s.created_at > ${waitedSince}::timestamptz as waiting from s
      ), c as (
        update webhooks.deliveries d
           set next_attempt_at = case when w.held then ${hold}::timestamptz
                                      when w.waiting then least(w.created_at + make_interval(secs => ${orderingWaitMs / 1000}::float8),
                                                                ${recheck}::timestamptz)
                                      else coalesce(w.paused_until, ${lease}::timestamptz) end,
               ordering_held = w.held or w.waiting,
               ordering_lease = case when w.held or w.waiting or w.paused_until is not null then null
                                     else ${lease}::timestamptz end
          from w, input i
         where d.id = w.id and i.id = d.id and d.status is not distinct from 'pending'
           and d.next_attempt_at is not distinct from i.lease
        returning d.id, d.attempts, d.schedule_start, d.endpoint_id, d.event_id, d.ordering_key,
                  w.held or w.waiting or w.paused_until is not null as paused,
                  case when w.missing and not (w.held or w.waiting or w.paused_until is not null)
                            and d.attempts = 0 then d.ordering_version - 1 end as missing_version)
      select c.id, c.attempts, c.schedule_start, c.event_id, c.ordering_key, c.paused, e.url,
             e.secret_sealed, e.status as endpoint_status, e.max_rate, ev.body, c.missing_version
        from c left join webhooks.endpoints e on e.id = c.endpoint_id
               left join webhooks.events ev on ev.id = c.event_id`,
      { rows: items.length },
    );
  });
}

/**
 * per_resource: after an attempt of `endpointId`'s resource `key` was recorded, lets the next
 * held delivery of that resource (lowest seq) go with `lease`; answers its id, if any.
 *
 * Under the resource's claim lock (claimOrdered): a claim that is deciding to hold the next
 * delivery back on a snapshot from before this attempt was recorded has committed that hold
 * when this looks, so the hold is never missed (it would wait a whole HOLD).
 */
export async function releaseOrdered(
  db: Db,
  endpointId: string,
  key: string,
  lease: Date,
): Promise<string[]> {
  const rows = await db.transaction(async (tx) => {
    await tx.execute(sql`select pg_advisory_xact_lock(hashtextextended(${`${endpointId} ${key}`}, 0))`);
    return executeNamed<{ id: string }>(
      tx,
      'mcs_release_ordered',
      sql`
      update webhooks.deliveries set next_attempt_at = ${lease}, ordering_held = false
       where id = (select id from webhooks.deliveries
                    where endpoint_id = ${endpointId} and ordering_key = ${key} and status = 'pending'
                    order by ordering_seq limit 1)
         and status = 'pending' and ordering_held
      returning id`,
    );
  });
  return rows.map((r) => r.id);
}

/**
 * The poller's claim: up to 500 pending deliveries due at `now`, oldest due first, leased until
 * `lease`, leaving alone those whose ids are in `mine` (waiting in this process's memory: they are
 * claimed before their attempt anyway, and taking them again every poll rewrote up to 500 rows a
 * second for nothing, slowing every other statement, fan-out's included; another replica still
 * takes them once their lease has run out). `not in
 * (select …)` is a hashed subplan: one look-up per row however long the list. Rows another
 * transaction holds are skipped, not waited for. (`pnpm bench retry-backlog` reads this statement
 * from this file and shows its plan.)
 */
export async function claimDue(
  db: Db,
  now: Date,
  lease: Date,
  mine: string[],
): Promise<Array<{ id: string; endpoint_id: string; ordered: boolean; attempts: number }>> {
  const claimed = await db.execute<{
    id: string;
    endpoint_id: string;
    ordered: boolean;
    attempts: number;
  }>(sql`
    update webhooks.deliveries set next_attempt_at = ${lease}
     where id in (select id from webhooks.deliveries
                   where status = 'pending' and next_attempt_at <= ${now}
                     and id not in (select unnest(${sql.param(mine)}::text[]))
                   order by next_attempt_at limit 500 for update skip locked)
    returning id, endpoint_id, ordering_key is not null as ordered, attempts`);
  return claimed.rows;
}

/** Deliveries `ids` that cannot be delivered (their endpoint is gone or not enabled) stop as skipped. */
export async function skipDeliveries(db: Db, ids: string[]): Promise<void> {
  await db.execute(sql`
    update webhooks.deliveries set status = 'skipped', next_attempt_at = null
     where id = any(${sql.param(ids)}::text[]) and status is not distinct from 'pending'`);
}

/**
 * Reserves `ms` more of a rate-limited endpoint's start time for this process, from `from` at the
 * earliest: GCRA on `endpoints.rate_tat` (the theoretical arrival time), shared by every replica
 * (rate-slots.ts). Answers the end of the reserved span (ms since the epoch), or undefined
 * when the endpoint is gone.
 */
export async function reserveStarts(
  db: Db,
  endpointId: string,
  from: Date,
  ms: number,
): Promise<number | undefined> {
  const { rows } = await db.execute<{ end_ms: number }>(sql`
    update webhooks.endpoints
       set rate_tat = greatest(rate_tat, ${from}::timestamptz) + ${ms} * interval '1 millisecond'
     where id = ${endpointId}
    returning (extract(epoch from rate_tat) * 1000)::float8 as end_ms`);
  return rows[0] ? Number(rows[0].end_ms) : undefined;
}
