// The delivery engine (DESIGN.md): state lives in Postgres, the HTTP call happens outside any
// transaction. Each queued delivery carries a lease (the next_attempt_at its queuer set); an
// attempt starts by moving that lease forward only if it is still the one it knew, so a
// delivery is never attempted by two workers at once, and one whose worker died is claimed by
// the poller (FOR UPDATE SKIP LOCKED) when its lease runs out. Short retry delays use a timer;
// long ones cost nothing but an indexed row until due.
//
// The lease length. An attempt claims its delivery for `leaseMs` = WEBHOOK_TIMEOUT + a margin
// (WEBHOOK_LEASE_MARGIN, default 5 s): the sender aborts every attempt at WEBHOOK_TIMEOUT, so
// the margin only has to cover recording the result (one short transaction) and event-loop
// stalls. It is also how long a delivery whose process died (kill -9, OOM, lost machine) waits
// before a poller takes it over: 15 s by default, about 2 s in the end-to-end tests with a 1 s
// time-out. A margin too short costs at worst a duplicate attempt (receivers dedupe on the event
// id), never a lost one; a long one only delays recovery after a crash. A fresh delivery
// that waits in memory behind a slow endpoint longer than its lease is claimed again by the
// poller: the first of the two to start wins the lease, the other does nothing.
import type { Db } from '@mcs/kit/db';
import { newId } from '@mcs/kit/ids';
import type { Logger } from '@mcs/kit/log';
import { sql } from 'drizzle-orm';
import type { QueuedDelivery } from '../domain/fanout.ts';
import { UNHEALTHY_KIND, type UnhealthyNotice } from '../domain/health.ts';
import type { SecretBox } from '../domain/secrets.ts';
import type { AttemptResult, Sender } from './sender.ts';
import { serviceSignature, standardSignature } from './sign.ts';

export interface EngineOptions {
  db: Db;
  box: SecretBox;
  sender: Sender;
  log: Logger;
  /** Delays of the retries after the first attempt (WEBHOOK_RETRY_SCHEDULE). */
  schedule: number[];
  timeoutMs: number;
  /** Added to timeoutMs to make the lease (see the top of this file); default 5 s. */
  leaseMarginMs?: number;
  concurrency: number;
  perEndpoint: number;
  pollMs?: number;
  /** Called after an endpoint turned unhealthy (wakes the mailer). */
  onUnhealthy?: (endpointId: string) => void;
  clock?: () => Date;
}

export interface Engine {
  /** The lease a fresh delivery gets: long enough to be sent from memory before the poller may claim it. */
  leaseMs: number;
  enqueue(items: QueuedDelivery[]): void;
  /** Claims due deliveries now (normally every pollMs). */
  poll(): Promise<number>;
  stop(): Promise<void>;
}

const EXCERPT_KEEP = 2048;
const MEMORY_QUEUE_CAP = 20_000;

export function createEngine(opts: EngineOptions): Engine {
  const { db, log } = opts;
  const clock = opts.clock ?? (() => new Date());
  const pollMs = opts.pollMs ?? 1_000;
  const leaseMs = opts.timeoutMs + (opts.leaseMarginMs ?? 5_000);
  const waiting = new Map<string, QueuedDelivery[]>();
  /**
   * The entries of `waiting` by delivery: a delivery waits in memory at most once. When the
   * poller claims one again because it waited past its lease (a slow endpoint's backlog), the
   * waiting entry takes the newer lease instead of queueing a copy, so such a backlog stays
   * bounded by its number of deliveries.
   */
  const waitingById = new Map<string, QueuedDelivery>();
  const active = new Map<string, number>();
  /**
   * Endpoints whose last attempt failed get one attempt in flight at a time until one succeeds:
   * a hanging or failing receiver then holds one slot, not perEndpoint slots, and cannot crowd
   * healthy endpoints out of the global cap (isolation). Bounded by the number of endpoints.
   */
  const failing = new Set<string>();
  const limitOf = (endpointId: string) => (failing.has(endpointId) ? 1 : opts.perEndpoint);
  const timers = new Set<NodeJS.Timeout>();
  const inflight = new Set<Promise<void>>();
  let queued = 0;
  let total = 0;
  let stopped = false;

  function enqueue(items: QueuedDelivery[]): void {
    for (const item of items) {
      const known = waitingById.get(item.deliveryId);
      if (known) {
        // A later claim of the row wrote a later lease: the latest is the one the row holds.
        if (item.lease > known.lease) known.lease = item.lease;
        continue;
      }
      // Over the cap the row still holds its lease; the poller picks it up when due.
      if (queued >= MEMORY_QUEUE_CAP) break;
      let q = waiting.get(item.endpointId);
      if (!q) {
        q = [];
        waiting.set(item.endpointId, q);
      }
      const entry = { ...item };
      q.push(entry);
      waitingById.set(entry.deliveryId, entry);
      queued++;
    }
    pump();
  }

  function pump(): void {
    if (stopped) return;
    for (const [endpointId, q] of waiting) {
      while (
        q.length > 0 &&
        total < opts.concurrency &&
        (active.get(endpointId) ?? 0) < limitOf(endpointId)
      ) {
        const item = q.shift()!;
        waitingById.delete(item.deliveryId);
        queued--;
        start(item);
      }
      if (q.length === 0) waiting.delete(endpointId);
      if (total >= opts.concurrency) break;
    }
  }

  function start(item: QueuedDelivery): void {
    total++;
    active.set(item.endpointId, (active.get(item.endpointId) ?? 0) + 1);
    const p = attempt(item)
      .catch((err) => log.error({ err, delivery: item.deliveryId }, 'delivery attempt failed to run'))
      .finally(() => {
        total--;
        const n = (active.get(item.endpointId) ?? 1) - 1;
        if (n === 0) active.delete(item.endpointId);
        else active.set(item.endpointId, n);
        inflight.delete(p);
        pump();
      });
    inflight.add(p);
  }

  async function attempt(item: QueuedDelivery): Promise<void> {
    const startedAt = clock();
    // Outer joins: a delivery whose endpoint was deleted (or whose event row is missing) is
    // still claimed, and then skipped rather than left pending for the poller forever.
    const claim = await db.execute<{
      attempts: number;
      schedule_start: number;
      event_id: string;
      url: string | null;
      secret_sealed: Buffer | null;
      endpoint_status: string | null;
      body: string | null;
    }>(sql`
      with c as (
        update webhooks.deliveries d
           set next_attempt_at = ${new Date(startedAt.getTime() + leaseMs)}
         where d.id = ${item.deliveryId} and d.status = 'pending' and d.next_attempt_at = ${item.lease}
        returning d.attempts, d.schedule_start, d.endpoint_id, d.event_id)
      select c.attempts, c.schedule_start, c.event_id, e.url, e.secret_sealed,
             e.status as endpoint_status, ev.body
        from c left join webhooks.endpoints e on e.id = c.endpoint_id
               left join webhooks.events ev on ev.id = c.event_id`);
    const row = claim.rows[0];
    if (!row) return; // someone else holds it now, or it is no longer pending
    if (row.endpoint_status !== 'enabled' || row.url === null || row.body === null || !row.secret_sealed) {
      await db.execute(
        sql`update webhooks.deliveries set status = 'skipped', next_attempt_at = null where id = ${item.deliveryId} and status = 'pending'`,
      );
      return;
    }
    const secret = opts.box.open(row.secret_sealed);
    const timestamp = Math.floor(startedAt.getTime() / 1000);
    const result = await opts.sender.send(row.url, row.body, {
      'x-service-signature': serviceSignature(secret, row.body),
      'webhook-id': row.event_id,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': standardSignature(secret, row.event_id, timestamp, row.body),
    });
    if (result.ok) failing.delete(item.endpointId);
    else failing.add(item.endpointId);
    await record(
      item,
      row.event_id,
      row.attempts + 1,
      row.attempts + 1 - row.schedule_start,
      startedAt,
      result,
    );
  }

  /**
   * Records attempt `number` of the delivery, the `run`-th of its current schedule run: the
   * run-th failure waits schedule[run - 1]; the failure of run schedule.length + 1 (the last
   * retry) fails the delivery and turns the endpoint unhealthy.
   */
  async function record(
    item: QueuedDelivery,
    eventId: string,
    number: number,
    run: number,
    at: Date,
    result: AttemptResult,
  ): Promise<void> {
    const now = clock();
    const retriesLeft = run <= opts.schedule.length;
    const delay = opts.schedule[run - 1] ?? 0;
    const next = new Date(now.getTime() + delay);
    const excerpt = result.excerpt === null ? null : result.excerpt.slice(0, EXCERPT_KEEP);
    if (result.ok) {
      // The common case in one statement: the delivery succeeds, its attempt is logged and the
      // endpoint's failure detail cleared, all or nothing. Anything unusual (the delivery was
      // skipped or recorded meanwhile) falls through to the transaction below.
      const done = await db.execute<{ n: number }>(sql`
        with d as (
          update webhooks.deliveries
             set status = 'succeeded', attempts = ${number}, last_attempt_at = ${now}, next_attempt_at = null
           where id = ${item.deliveryId} and attempts = ${number - 1} and status = 'pending'
          returning id
        ), a as (
          insert into webhooks.attempts (delivery_id, number, at, status_code, error, latency_ms, response_excerpt)
          select d.id, ${number}, ${at}, ${result.statusCode}, null, ${result.latencyMs}, ${excerpt} from d
        ), e as (
          update webhooks.endpoints set failing_since = null, last_error = null
           where id = ${item.endpointId} and failing_since is not null and exists (select 1 from d)
        )
        select count(*)::int as n from d`);
      if (done.rows[0]?.n === 1) return;
    }
    let turnedUnhealthy = false;
    await db.transaction(async (tx) => {
      const status = result.ok ? 'succeeded' : retriesLeft ? 'pending' : 'failed';
      const updated = await tx.execute(sql`
        update webhooks.deliveries
           set status = ${status}, attempts = ${number}, last_attempt_at = ${now},
               next_attempt_at = ${status === 'pending' ? next : null}
         where id = ${item.deliveryId} and attempts = ${number - 1} and status = 'pending'`);
      const logAttempt = () =>
        tx.execute(sql`
          insert into webhooks.attempts (delivery_id, number, at, status_code, error, latency_ms, response_excerpt)
          values (${item.deliveryId}, ${number}, ${at}, ${result.statusCode}, ${result.error}, ${result.latencyMs},
                  ${excerpt})`);
      if (updated.rowCount === 0) {
        // Skipped while this attempt was in flight (its endpoint turned unhealthy, was disabled
        // or deleted): the attempt still happened, so log it, and a success is a delivery. The
        // endpoint's health is not touched by a straggler. Otherwise another worker recorded
        // this attempt number first; keep the first record.
        const straggler = await tx.execute(sql`
          update webhooks.deliveries
             set status = ${result.ok ? 'succeeded' : 'skipped'}, attempts = ${number}, last_attempt_at = ${now}
           where id = ${item.deliveryId} and attempts = ${number - 1} and status = 'skipped'`);
        if (straggler.rowCount !== 0) await logAttempt();
        return;
      }
      await logAttempt();
      if (result.ok) {
        await tx.execute(sql`
          update webhooks.endpoints set failing_since = null, last_error = null
           where id = ${item.endpointId} and failing_since is not null`);
        return;
      }
      // Touch the endpoint row only when its health detail changes: a failing endpoint repeats
      // the same error, and rewriting its row on every attempt would serialize them on its lock.
      await tx.execute(sql`
        update webhooks.endpoints set failing_since = coalesce(failing_since, ${at}), last_error = ${result.error}
         where id = ${item.endpointId}
           and (failing_since is null or last_error is distinct from ${result.error})`);
      if (status !== 'failed') return;
      // The last retry failed: the endpoint turns unhealthy, its other deliveries stop, and one
      // notification is written for this transition (the mailer sends it).
      const flipped = await tx.execute<{
        account_id: string;
        url: string;
        description: string | null;
        livemode: boolean;
        failing_since: Date | null;
      }>(sql`
        update webhooks.endpoints set status = 'unhealthy', updated_at = ${now}
         where id = ${item.endpointId} and status = 'enabled'
        returning account_id, url, description, livemode, failing_since`);
      const ep = flipped.rows[0];
      if (!ep) return;
      turnedUnhealthy = true;
      await tx.execute(sql`
        update webhooks.deliveries set status = 'skipped', next_attempt_at = null
         where endpoint_id = ${item.endpointId} and status = 'pending'`);
      const notice: UnhealthyNotice = {
        url: ep.url,
        description: ep.description,
        livemode: ep.livemode,
        lastError: result.error,
        failingSince: ep.failing_since ? new Date(ep.failing_since).toISOString() : null,
        deliveryId: item.deliveryId,
        eventId,
        attempts: number,
      };
      await tx.execute(sql`
        insert into webhooks.notifications (id, account_id, endpoint_id, kind, detail, created_at)
        values (${newId('ntf')}, ${ep.account_id}, ${item.endpointId}, ${UNHEALTHY_KIND},
                ${JSON.stringify(notice)}, ${now})`);
    });
    if (turnedUnhealthy) {
      log.warn({ endpoint: item.endpointId }, 'endpoint turned unhealthy');
      opts.onUnhealthy?.(item.endpointId);
    } else if (!result.ok && retriesLeft && delay < pollMs && !stopped) {
      // Too soon for the poller to notice in time: wait in memory (bounded by throughput).
      const t = setTimeout(() => {
        timers.delete(t);
        enqueue([{ deliveryId: item.deliveryId, endpointId: item.endpointId, lease: next }]);
      }, delay);
      timers.add(t);
    }
  }

  async function poll(): Promise<number> {
    if (stopped || queued >= MEMORY_QUEUE_CAP / 2) return 0;
    const now = clock();
    const lease = new Date(now.getTime() + leaseMs);
    const claimed = await db.execute<{ id: string; endpoint_id: string }>(sql`
      update webhooks.deliveries set next_attempt_at = ${lease}
       where id in (select id from webhooks.deliveries
                     where status = 'pending' and next_attempt_at <= ${now}
                     order by next_attempt_at limit 500 for update skip locked)
      returning id, endpoint_id`);
    enqueue(claimed.rows.map((r) => ({ deliveryId: r.id, endpointId: r.endpoint_id, lease })));
    return claimed.rows.length;
  }

  let polling = false;
  const poller = setInterval(() => {
    if (polling) return;
    polling = true;
    poll()
      .catch((err) => log.warn({ err: (err as Error).message }, 'delivery poll failed'))
      .finally(() => {
        polling = false;
      });
  }, pollMs);

  return {
    leaseMs,
    enqueue,
    poll,
    async stop() {
      stopped = true;
      clearInterval(poller);
      for (const t of timers) clearTimeout(t);
      await Promise.allSettled([...inflight]);
    },
  };
}
