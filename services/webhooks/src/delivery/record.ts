// Recording attempts. A success, the common case, is group-committed: every success completed
// within a short window (or until the batch fills) is recorded by ONE statement — the delivery
// succeeds, its attempt is logged and its endpoint's failure detail cleared, all or nothing per
// batch. Everything else, and any success that statement did not take (its delivery was skipped
// or recorded meanwhile), goes through recordAttempt's transaction.
//
// Every write is guarded by `attempts = number - 1 and status = 'pending'`: however many workers
// attempt a delivery (a lease that ran out, a replica's poller), one record per attempt number
// wins and the others change nothing.
import type { Db } from '@mcs/kit/db';
import { newId } from '@mcs/kit/ids';
import type { Logger } from '@mcs/kit/log';
import { sql } from 'drizzle-orm';
import { UNHEALTHY_KIND, type UnhealthyNotice } from '../domain/health.ts';
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

const excerptOf = (result: AttemptResult) =>
  result.excerpt === null ? null : result.excerpt.slice(0, EXCERPT_KEEP);

export interface Recorded {
  /** This attempt turned its endpoint unhealthy (the mailer has a notification to send). */
  turnedUnhealthy: boolean;
  /** When the delivery is due again, if it is still pending after this attempt. */
  next: Date | null;
}

/**
 * Records attempt `a` in one transaction: the run-th failure waits schedule[run - 1]; the
 * failure of run schedule.length + 1 (the last retry) fails the delivery and turns the endpoint
 * unhealthy, skipping its other pending deliveries and writing one notification.
 */
export async function recordAttempt(db: Db, schedule: number[], a: Attempted, now: Date): Promise<Recorded> {
  const { result } = a;
  const retriesLeft = a.run <= schedule.length;
  const next = new Date(now.getTime() + (schedule[a.run - 1] ?? 0));
  const excerpt = excerptOf(result);
  const status = result.ok ? 'succeeded' : retriesLeft ? 'pending' : 'failed';
  let turnedUnhealthy = false;
  let pending = false;
  await db.transaction(async (tx) => {
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
        update webhooks.endpoints set failing_since = null, last_error = null
         where id = ${a.endpointId} and failing_since is not null`);
      return;
    }
    // Touch the endpoint row only when its health detail changes: a failing endpoint repeats
    // the same error, and rewriting its row on every attempt would serialize them on its lock.
    await tx.execute(sql`
      update webhooks.endpoints set failing_since = coalesce(failing_since, ${a.at}), last_error = ${result.error}
       where id = ${a.endpointId}
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
       where id = ${a.endpointId} and status = 'enabled'
      returning account_id, url, description, livemode, failing_since`);
    const ep = flipped.rows[0];
    if (!ep) return;
    turnedUnhealthy = true;
    await tx.execute(sql`
      update webhooks.deliveries set status = 'skipped', next_attempt_at = null
       where endpoint_id = ${a.endpointId} and status = 'pending'`);
    const notice: UnhealthyNotice = {
      url: ep.url,
      description: ep.description,
      livemode: ep.livemode,
      lastError: result.error,
      failingSince: ep.failing_since ? new Date(ep.failing_since).toISOString() : null,
      deliveryId: a.deliveryId,
      eventId: a.eventId,
      attempts: a.number,
    };
    await tx.execute(sql`
      insert into webhooks.notifications (id, account_id, endpoint_id, kind, detail, created_at)
      values (${newId('ntf')}, ${ep.account_id}, ${a.endpointId}, ${UNHEALTHY_KIND},
              ${JSON.stringify(notice)}, ${now})`);
  });
  return { turnedUnhealthy, next: pending ? next : null };
}

/**
 * Records successful attempts `list` in ONE statement; returns the delivery ids it recorded.
 * Those it did not (skipped or recorded meanwhile) need recordAttempt.
 */
export async function recordSuccesses(db: Db, list: readonly Attempted[], now: Date): Promise<Set<string>> {
  const { rows } = await db.execute<{ id: string }>(sql`
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
       where d.id = i.id and d.attempts = i.number - 1 and d.status = 'pending'
      returning d.id, d.endpoint_id
    ), a as (
      insert into webhooks.attempts (delivery_id, number, at, status_code, error, latency_ms, response_excerpt)
      select i.id, i.number, i.at, i.status_code, null, i.latency_ms, i.excerpt from input i join d on d.id = i.id
    ), e as (
      update webhooks.endpoints set failing_since = null, last_error = null
       where id in (select endpoint_id from d) and failing_since is not null
    )
    select id from d`);
  return new Set(rows.map((r) => r.id));
}

export interface SuccessLog {
  add(a: Attempted): void;
  /** Records what is waiting now, and waits for every record under way. */
  flush(): Promise<void>;
}

/**
 * Group commit of successes: the first success opens a window of `windowMs`; at its end (or
 * when `max` are waiting) one statement records them all. A window of 0 records each at once. A success that statement did not
 * take, or all of them if it failed, goes to `single` (recordAttempt). Until recorded, a
 * delivery keeps the lease it was attempted under, so no one else attempts it meanwhile.
 */
export function createSuccessLog(opts: {
  db: Db;
  log: Logger;
  clock: () => Date;
  single: (a: Attempted) => Promise<void>;
  windowMs?: number;
  max?: number;
}): SuccessLog {
  const windowMs = opts.windowMs ?? 20;
  const max = opts.max ?? 256;
  let waiting: Attempted[] = [];
  let timer: NodeJS.Timeout | null = null;
  const writing = new Set<Promise<void>>();

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
    try {
      const done = await recordSuccesses(opts.db, batch, opts.clock());
      for (const a of batch) if (!done.has(a.deliveryId)) rest.push(a);
    } catch (err) {
      opts.log.warn(
        { err: (err as Error).message, n: batch.length },
        'group record failed, recording one by one',
      );
      rest.push(...batch);
    }
    await Promise.allSettled(rest.map((a) => opts.single(a)));
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

  return {
    add(a) {
      waiting.push(a);
      if (waiting.length >= max || windowMs <= 0) flushNow();
      else if (!timer) timer = setTimeout(flushNow, windowMs);
    },
    async flush() {
      flushNow();
      await Promise.allSettled([...writing]);
    },
  };
}
