// The delivery engine (DESIGN.md): state lives in Postgres, the HTTP call happens outside any
// transaction. Each queued delivery carries a lease (the next_attempt_at its queuer set); an
// attempt starts by moving that lease forward only if it is still the one it knew, so a
// delivery is never attempted by two workers at once, and one whose worker died is claimed by
// the poller (FOR UPDATE SKIP LOCKED) when its lease runs out. Short retry delays use a timer;
// long ones cost nothing but an indexed row until due.
import type { Db } from '@mcs/kit/db';
import { newId } from '@mcs/kit/ids';
import type { Logger } from '@mcs/kit/log';
import { sql } from 'drizzle-orm';
import type { QueuedDelivery } from '../domain/fanout.ts';
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
  const leaseMs = opts.timeoutMs + 30_000;
  const waiting = new Map<string, QueuedDelivery[]>();
  const active = new Map<string, number>();
  const timers = new Set<NodeJS.Timeout>();
  const inflight = new Set<Promise<void>>();
  let queued = 0;
  let total = 0;
  let stopped = false;

  function enqueue(items: QueuedDelivery[]): void {
    for (const item of items) {
      // Over the cap the row still holds its lease; the poller picks it up when due.
      if (queued >= MEMORY_QUEUE_CAP) break;
      let q = waiting.get(item.endpointId);
      if (!q) {
        q = [];
        waiting.set(item.endpointId, q);
      }
      q.push(item);
      queued++;
    }
    pump();
  }

  function pump(): void {
    if (stopped) return;
    for (const [endpointId, q] of waiting) {
      while (q.length > 0 && total < opts.concurrency && (active.get(endpointId) ?? 0) < opts.perEndpoint) {
        const item = q.shift()!;
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
    const claim = await db.execute<{
      attempts: number;
      url: string;
      secret_sealed: Buffer;
      endpoint_status: string;
      event_id: string;
      body: string;
    }>(sql`
      update webhooks.deliveries d
         set next_attempt_at = ${new Date(startedAt.getTime() + leaseMs)}
        from webhooks.endpoints e, webhooks.events ev
       where d.id = ${item.deliveryId} and d.status = 'pending' and d.next_attempt_at = ${item.lease}
         and e.id = d.endpoint_id and ev.id = d.event_id
      returning d.attempts, e.url, e.secret_sealed, e.status as endpoint_status, ev.id as event_id, ev.body`);
    const row = claim.rows[0];
    if (!row) return; // someone else holds it now, or it is no longer pending
    if (row.endpoint_status !== 'enabled') {
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
    await record(item, row.attempts + 1, startedAt, result);
  }

  async function record(
    item: QueuedDelivery,
    number: number,
    at: Date,
    result: AttemptResult,
  ): Promise<void> {
    const now = clock();
    const retriesLeft = number <= opts.schedule.length;
    const delay = opts.schedule[number - 1] ?? 0;
    const next = new Date(now.getTime() + delay);
    let turnedUnhealthy = false;
    await db.transaction(async (tx) => {
      const status = result.ok ? 'succeeded' : retriesLeft ? 'pending' : 'failed';
      const updated = await tx.execute(sql`
        update webhooks.deliveries
           set status = ${status}, attempts = ${number}, last_attempt_at = ${now},
               next_attempt_at = ${status === 'pending' ? next : null}
         where id = ${item.deliveryId} and attempts = ${number - 1} and status = 'pending'`);
      if (updated.rowCount === 0) return; // recorded by another worker; keep the first record
      await tx.execute(sql`
        insert into webhooks.attempts (delivery_id, number, at, status_code, error, latency_ms, response_excerpt)
        values (${item.deliveryId}, ${number}, ${at}, ${result.statusCode}, ${result.error}, ${result.latencyMs},
                ${result.excerpt === null ? null : result.excerpt.slice(0, EXCERPT_KEEP)})`);
      if (result.ok) {
        await tx.execute(sql`
          update webhooks.endpoints set failing_since = null, last_error = null
           where id = ${item.endpointId} and failing_since is not null`);
        return;
      }
      await tx.execute(sql`
        update webhooks.endpoints set failing_since = coalesce(failing_since, ${at}), last_error = ${result.error}
         where id = ${item.endpointId}`);
      if (status !== 'failed') return;
      // The last retry failed: the endpoint turns unhealthy, its other deliveries stop, and one
      // notification is written for this transition (the mailer sends it).
      const flipped = await tx.execute<{ account_id: string; url: string }>(sql`
        update webhooks.endpoints set status = 'unhealthy', updated_at = ${now}
         where id = ${item.endpointId} and status = 'enabled'
        returning account_id, url`);
      const ep = flipped.rows[0];
      if (!ep) return;
      turnedUnhealthy = true;
      await tx.execute(sql`
        update webhooks.deliveries set status = 'skipped', next_attempt_at = null
         where endpoint_id = ${item.endpointId} and status = 'pending'`);
      await tx.execute(sql`
        insert into webhooks.notifications (id, account_id, endpoint_id, kind, detail, created_at)
        values (${newId('ntf')}, ${ep.account_id}, ${item.endpointId}, 'endpoint_unhealthy',
                ${JSON.stringify({ url: ep.url, error: result.error, attempts: number })}, ${now})`);
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
