// Recording attempts. A success, the common case, is group-committed: every success completed
// within a short window (or until the batch fills) is recorded by ONE statement — the delivery
// succeeds, its attempt is logged and its endpoint's failure detail cleared, all or nothing per
// batch. Everything else, and any success that statement did not take (its delivery was skipped
// or recorded meanwhile), goes through recordAttempt's transaction.
//
// Every write is guarded by `attempts = number - 1 and status = 'pending'`: however many workers
// attempt a delivery (a lease that ran out, a replica's poller), one record per attempt number
// wins and the others change nothing.
import { type Db, executeNamed, isRetryableConflict, type Tx } from '@mcs/kit/db';
import { newId } from '@mcs/kit/ids';
import type { Logger } from '@mcs/kit/log';
import { and, eq, isNull, lte, type SQL, sql } from 'drizzle-orm';
import { endpoints } from '../db/schema.ts';
import type { QueuedDelivery } from '../domain/fanout.ts';
import {
  FAILING_KIND,
  GONE_KIND,
  halfRetriesSpent,
  type NoticeKind,
  remainingSpanMs,
  UNHEALTHY_KIND,
  type UnhealthyNotice,
} from '../domain/health.ts';
import { recordEndpointEvent } from '../domain/operational.ts';
import { ownScheduleOf } from '../domain/settings.ts';
import type { AttemptResult } from './sender.ts';

const EXCERPT_KEEP = 2048;

/** One attempt, made: what recording it needs. */
export interface Attempted {
  deliveryId: string;
  endpointId: string;
  eventId: string;
  /** Attempt number in the delivery's log. */
  number: number;
  /** The run-th attempt of the current schedule run (see deliveries.schedule_start). */
  run: number;
  at: Date;
  result: AttemptResult;
}

/**
 * What a receiver answered (or a listener acked) as PostgreSQL can store it: `text` holds no NUL,
 * and a statement carrying one fails, which would leave the attempt unrecorded and its delivery
 * sent again and again. A NUL is kept visible as U+FFFD.
 */
const storable = (text: string | null): string | null =>
  text === null ? null : text.replaceAll('\0', '\uFFFD');

const excerptOf = (result: AttemptResult) =>
  result.excerpt === null ? null : storable(result.excerpt.slice(0, EXCERPT_KEEP));

export interface RecordPolicy {
  /** Delays of the retries after the first attempt (WEBHOOK_RETRY_SCHEDULE). */
  schedule: readonly number[];
  /** The early warning goes out once an endpoint has been failing this long (WEBHOOK_WARN_AFTER). */
  warnAfterMs: number;
  /** The lease given to the deliveries of operational events recorded here. */
  leaseMs: number;
  /** auto_recover: when an endpoint turning unhealthy gets its first probe (WEBHOOK_PROBE_INTERVAL). */
  probeMs?: number;
}

export interface Recorded {
  /** The transition this attempt made: a notification row waits for the mailer. */
  transition: 'unhealthy' | 'gone' | 'warned' | null;
  /** When the delivery is due again, if it is still pending after this attempt. */
  next: Date | null;
  /** A Retry-After paused the endpoint until then. */
  pausedUntil: Date | null;
  /** Deliveries of the operational event this attempt recorded, to queue. */
  queued: QueuedDelivery[];
}

type EndpointRow = typeof endpoints.$inferSelect;

function noticeOf(ep: EndpointRow, a: Attempted, error: string | null): UnhealthyNotice {
  return {
    url: ep.url,
    description: ep.description,
    livemode: ep.livemode,
    lastError: error,
    failingSince: ep.failingSince ? ep.failingSince.toISOString() : null,
    deliveryId: a.deliveryId,
    eventId: a.eventId,
    attempts: a.number,
  };
}

async function notify(tx: Tx, kind: NoticeKind, ep: EndpointRow, notice: UnhealthyNotice, now: Date) {
  await tx.execute(sql`
    insert into webhooks.notifications (id, account_id, endpoint_id, kind, detail, created_at)
    values (${newId('ntf')}, ${ep.accountId}, ${ep.id}, ${kind}, ${JSON.stringify(notice)}, ${now})`);
}

/**
 * Records attempt `a` in one transaction. A failure of run r waits schedule[r - 1], or longer
 * when the answer was a 429/503 with Retry-After (which also pauses the whole endpoint, capped
 * by the schedule's remaining span). The failure of run schedule.length + 1 (the last retry)
 * fails the delivery and turns the endpoint unhealthy; a 410 answer disables the endpoint at once
 * (when its disable_on_gone is set). Either skips its other pending deliveries, writes one
 * notification and records the operational event. A failure that has spent half the retries,
 * or comes WEBHOOK_WARN_AFTER into a failing stretch, writes the stretch's one early warning.
 */
export async function recordAttempt(
  db: Db,
  policy: RecordPolicy,
  a: Attempted,
  now: Date,
): Promise<Recorded> {
  const result = { ...a.result, error: storable(a.result.error) };
  // A test-mode account may have a shorter schedule of its own (domain/settings.ts); a failure
  // reads it, a success needs none.
  const schedule = result.ok ? policy.schedule : ((await ownScheduleOf(db, a.deliveryId)) ?? policy.schedule);
  const retriesLeft = a.run <= schedule.length;
  // A Retry-After holds the endpoint at least that long, never past what the schedule has left.
  const hold =
    !result.ok && retriesLeft && result.retryAfterMs !== null
      ? Math.min(result.retryAfterMs, remainingSpanMs(a.run, schedule))
      : 0;
  const pausedUntil = hold > 0 ? new Date(now.getTime() + hold) : null;
  // Never sooner than the schedule: a short Retry-After does not spend retries faster.
  const next = new Date(now.getTime() + Math.max(schedule[a.run - 1] ?? 0, hold));
  const excerpt = excerptOf(result);
  const status = result.ok ? 'succeeded' : retriesLeft ? 'pending' : 'failed';
  let out: Recorded = { transition: null, next: null, pausedUntil: null, queued: [] };
  let pending = false;
  const record = () =>
    db.transaction(async (tx) => {
      const updated = await tx.execute(sql`
      update webhooks.deliveries
         set status = ${status}, attempts = ${a.number}, last_attempt_at = ${now},
             next_attempt_at = ${status === 'pending' ? next : null}
       where id = ${a.deliveryId} and attempts = ${a.number - 1} and status = 'pending'`);
      const logAttempt = () =>
        tx.execute(sql`
        insert into webhooks.attempts (delivery_id, number, at, status_code, error, latency_ms, response_excerpt)
        values (${a.deliveryId}, ${a.number}, ${a.at}, ${result.statusCode}, ${result.error}, ${result.latencyMs},
                ${excerpt})`);
      if (updated.rowCount === 0) {
        // Skipped while this attempt was in flight (its endpoint turned unhealthy, was disabled
        // or deleted): the attempt still happened, so log it, and a success is a delivery. The
        // endpoint's health is not touched by a straggler. Otherwise another worker recorded
        // this attempt number first; keep the first record.
        const straggler = await tx.execute(sql`
        update webhooks.deliveries
           set status = ${result.ok ? 'succeeded' : 'skipped'}, attempts = ${a.number}, last_attempt_at = ${now}
         where id = ${a.deliveryId} and attempts = ${a.number - 1} and status = 'skipped'`);
        if (straggler.rowCount !== 0) await logAttempt();
        return;
      }
      pending = status === 'pending';
      await logAttempt();
      if (result.ok) {
        await tx.execute(sql`
        update webhooks.endpoints set failing_since = null, last_error = null, warned_at = null
         where id = ${a.endpointId} and failing_since is not null`);
        return;
      }
      if (result.statusCode === 410) {
        // Gone: disabled at once (unless the endpoint opted out), no more retries.
        const [gone] = await tx
          .update(endpoints)
          .set({
            status: 'disabled',
            disabledReason: 'gone',
            failingSince: sql`coalesce(${endpoints.failingSince}, ${a.at})`,
            lastError: result.error,
            updatedAt: now,
          })
          .where(
            and(
              eq(endpoints.id, a.endpointId),
              eq(endpoints.status, 'enabled'),
              eq(endpoints.disableOnGone, true),
            ),
          )
          .returning();
        if (gone) {
          pending = false;
          out.transition = 'gone';
          await tx.execute(sql`
          update webhooks.deliveries
             set status = case when id = ${a.deliveryId} then 'failed' else 'skipped' end, next_attempt_at = null
           where endpoint_id = ${a.endpointId} and status = 'pending'`);
          await notify(tx, GONE_KIND, gone, noticeOf(gone, a, result.error), now);
          out.queued = await recordEndpointEvent(tx, 'disabled', gone, policy.leaseMs, now);
          return;
        }
      }
      // Touch the endpoint row only when its health detail changes: a failing endpoint repeats
      // the same error, and rewriting its row on every attempt would serialize them on its lock.
      await tx.execute(sql`
      update webhooks.endpoints set failing_since = coalesce(failing_since, ${a.at}), last_error = ${result.error}
       where id = ${a.endpointId}
         and (failing_since is null or last_error is distinct from ${result.error})`);
      if (pausedUntil) {
        // Retry-After: the endpoint's other pending deliveries wait too (their in-memory copies,
        // anywhere, lose their lease), and fan-out schedules new ones there.
        await tx.execute(sql`
        with p as (
          update webhooks.endpoints set paused_until = greatest(paused_until, ${pausedUntil}::timestamptz)
           where id = ${a.endpointId} returning id)
        update webhooks.deliveries set next_attempt_at = ${pausedUntil}::timestamptz
         where endpoint_id = (select id from p) and status = 'pending' and id <> ${a.deliveryId}
           and next_attempt_at < ${pausedUntil}::timestamptz`);
        out.pausedUntil = pausedUntil;
      }
      if (status === 'pending') {
        // The early warning: once per failing stretch, while retries are left.
        const cutoff = new Date(now.getTime() - policy.warnAfterMs);
        const half = halfRetriesSpent(a.run, schedule.length);
        const [warned] = await tx
          .update(endpoints)
          .set({ warnedAt: now })
          .where(
            and(
              eq(endpoints.id, a.endpointId),
              eq(endpoints.status, 'enabled'),
              isNull(endpoints.warnedAt),
              half ? undefined : lte(endpoints.failingSince, cutoff),
            ),
          )
          .returning();
        if (warned) {
          out.transition = 'warned';
          await notify(tx, FAILING_KIND, warned, noticeOf(warned, a, result.error), now);
        }
        return;
      }
      // The last retry failed: the endpoint turns unhealthy, its other deliveries stop, and one
      // notification is written for this transition (the mailer sends it).
      const [ep] = await tx
        .update(endpoints)
        .set({
          status: 'unhealthy',
          updatedAt: now,
          // auto_recover: the first probe (delivery/prober.ts).
          probes: 0,
          probeAt: sql`case when ${endpoints.autoRecover} then ${new Date(now.getTime() + (policy.probeMs ?? 300_000))}::timestamptz end`,
        })
        .where(and(eq(endpoints.id, a.endpointId), eq(endpoints.status, 'enabled')))
        .returning();
      if (!ep) return;
      out.transition = 'unhealthy';
      await tx.execute(sql`
      update webhooks.deliveries set status = 'skipped', next_attempt_at = null
       where endpoint_id = ${a.endpointId} and status = 'pending'`);
      await notify(tx, UNHEALTHY_KIND, ep, noticeOf(ep, a, result.error), now);
      out.queued = await recordEndpointEvent(tx, 'unhealthy', ep, policy.leaseMs, now);
    });
  // A deadlock victim (the API disabling or updating the endpoint, which locks the endpoint and
  // then its deliveries, while this locks the delivery and then the endpoint) rolled back whole:
  // run it again rather than leave the attempt unrecorded and its delivery to be sent again.
  for (let attempt = 1; ; attempt++) {
    try {
      await record();
      break;
    } catch (err) {
      if (attempt >= 3 || !isRetryableConflict(err)) throw err;
      out = { transition: null, next: null, pausedUntil: null, queued: [] };
      pending = false;
    }
  }
  out.next = pending ? next : null;
  return out;
}

/**
 * The record of successful attempts `list`, found by id whatever the statistics (claims.ts,
 * "Finding rows by id"); answers the ids it recorded.
 */
export function successesStatement(list: readonly Attempted[], now: Date): SQL {
  return sql`
    with input as (
      select * from unnest(
        ${sql.param(list.map((a) => a.deliveryId))}::text[],
        ${sql.param(list.map((a) => a.number))}::int[],
        ${sql.param(list.map((a) => a.at))}::timestamptz[],
        ${sql.param(list.map((a) => a.result.statusCode))}::int[],
        ${sql.param(list.map((a) => a.result.latencyMs))}::int[],
        ${sql.param(list.map((a) => excerptOf(a.result)))}::text[]
      ) as t(id, number, at, status_code, latency_ms, excerpt)
    ), d as (
      update webhooks.deliveries d
         set status = 'succeeded', attempts = i.number, last_attempt_at = ${now}, next_attempt_at = null
        from input i
       where d.id = i.id and d.attempts = i.number - 1 and d.status is not distinct from 'pending'
      returning d.id, d.endpoint_id
    ), a as (
      insert into webhooks.attempts (delivery_id, number, at, status_code, error, latency_ms, response_excerpt)
      select i.id, i.number, i.at, i.status_code, null, i.latency_ms, i.excerpt from input i join d on d.id = i.id
    ), e as (
      update webhooks.endpoints set failing_since = null, last_error = null, warned_at = null
       where id in (select endpoint_id from d) and failing_since is not null
    )
    select id from d`;
}

/**
 * Records successful attempts `list` in ONE statement; returns the delivery ids it recorded.
 * Those it did not (skipped or recorded meanwhile) need recordAttempt.
 */
export async function recordSuccesses(db: Db, list: readonly Attempted[], now: Date): Promise<Set<string>> {
  const rows = await executeNamed<{ id: string }>(db, 'mcs_record_successes', successesStatement(list, now), {
    rows: list.length,
  });
  return new Set(rows.map((r) => r.id));
}

export interface SuccessLog {
  /** Queues success `a`; `then` runs once it is recorded (by the group, or one by one). */
  add(a: Attempted, then?: () => Promise<void>): void;
  /** Records what is waiting now, and waits for every record under way. */
  flush(): Promise<void>;
}

/**
 * Group commit of successes: the first success opens a window of `windowMs`; at its end (or
 * when `max` are waiting) one statement records them all. A success that something waits on
 * (`then`: an ordered delivery's release of the next change of its resource) shortens the
 * window to `urgentMs`. A window of 0 records each at once. A success that statement did not
 * take, or all of them if it failed, goes to `single` (recordAttempt). Until recorded, a
 * delivery keeps the lease it was attempted under, so no one else attempts it meanwhile.
 *
 * Why the plain window is long: a record statement costs PostgreSQL far more than the rows it
 * writes (parse, plan, a commit and its WAL flush). At 300 deliveries/s a 20 ms window gathered
 * about 6 successes per statement and PostgreSQL spent 0.51–0.66 ms of CPU per delivery on
 * them; a 60 ms window, 0.29–0.34 (docs/performance.md). Nothing waits for a plain
 * success's record: the receiver has its request, and the lease (WEBHOOK_TIMEOUT + margin)
 * outlasts any window. A crash inside the window costs a repeat of those deliveries after
 * their lease, as any crash after an attempt does.
 */
export function createSuccessLog(opts: {
  db: Db;
  log: Logger;
  clock: () => Date;
  single: (a: Attempted) => Promise<void>;
  windowMs?: number;
  urgentMs?: number;
  max?: number;
}): SuccessLog {
  const windowMs = opts.windowMs ?? 60;
  const urgentMs = Math.min(opts.urgentMs ?? 20, windowMs);
  const max = opts.max ?? 256;
  let waiting: Attempted[] = [];
  let timer: NodeJS.Timeout | null = null;
  /** When the pending timer fires (ms since the epoch). */
  let due = 0;
  const writing = new Set<Promise<void>>();
  const after = new Map<Attempted, () => Promise<void>>();

  /** Runs what waits for `a`'s record (an ordered success's release). */
  async function recorded(a: Attempted): Promise<void> {
    const then = after.get(a);
    if (!then) return;
    after.delete(a);
    await then().catch((err) =>
      opts.log.warn({ err: (err as Error).message, deliveryId: a.deliveryId }, 'after-record step failed'),
    );
  }

  async function write(list: Attempted[]): Promise<void> {
    // One row per delivery and statement: a second attempt of the same number (a lease that ran
    // out) goes the single way, where the guard keeps the first.
    const seen = new Set<string>();
    const batch: Attempted[] = [];
    const rest: Attempted[] = [];
    for (const a of list) {
      if (seen.has(a.deliveryId)) rest.push(a);
      else {
        seen.add(a.deliveryId);
        batch.push(a);
      }
    }
    const next: Promise<void>[] = [];
    try {
      const done = await recordSuccesses(opts.db, batch, opts.clock());
      for (const a of batch) {
        if (done.has(a.deliveryId)) next.push(recorded(a));
        else rest.push(a);
      }
    } catch (err) {
      opts.log.warn(
        { err: (err as Error).message, n: batch.length },
        'group record failed, recording one by one',
      );
      rest.push(...batch);
    }
    for (const a of rest) next.push(opts.single(a).then(() => recorded(a)));
    await Promise.allSettled(next);
  }

  function flushNow(): void {
    if (timer) clearTimeout(timer);
    timer = null;
    if (waiting.length === 0) return;
    const list = waiting;
    waiting = [];
    const p = write(list).finally(() => writing.delete(p));
    writing.add(p);
  }

  /** Flushes within `ms` at the latest (an earlier flush already set stays). */
  function flushWithin(ms: number): void {
    const at = Date.now() + ms;
    if (timer && due <= at) return;
    if (timer) clearTimeout(timer);
    due = at;
    timer = setTimeout(flushNow, ms);
  }

  return {
    add(a, then) {
      if (then) after.set(a, then);
      waiting.push(a);
      if (waiting.length >= max || (then ? urgentMs : windowMs) <= 0) flushNow();
      else flushWithin(then ? urgentMs : windowMs);
    },
    async flush() {
      flushNow();
      await Promise.allSettled([...writing]);
    },
  };
}
