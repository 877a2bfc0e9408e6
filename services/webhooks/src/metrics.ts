// The webhooks service's own Prometheus metrics (kit/metrics serves them at /metrics): what the
// engine counts as it goes, and gauges read from PostgreSQL and JetStream when Prometheus scrapes.
import type { Db } from '@mcs/kit/db';
import { client, registry, scrapedGauge } from '@mcs/kit/metrics';
import type { StreamNames } from '@mcs/kit/nats';
import { sql } from 'drizzle-orm';
import type { NatsConnection } from 'nats';

/** Outcome of an attempt for its delivery: delivered, failed with a retry due, or failed for good. */
export type AttemptOutcome = 'succeeded' | 'retrying' | 'failed';

const attempts = new client.Counter({
  name: 'mcs_webhook_delivery_attempts_total',
  help: 'Delivery attempts, by what they left the delivery as: succeeded, retrying (a retry is scheduled) or failed (no retry left, or the endpoint turned unhealthy).',
  labelNames: ['outcome'] as const,
  registers: [registry],
});
const latency = new client.Histogram({
  name: 'mcs_webhook_attempt_duration_seconds',
  help: 'Time of one delivery attempt (connect, TLS, request, answer), by result (success or failure).',
  labelNames: ['result'] as const,
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  registers: [registry],
});
const byOutcome = {
  succeeded: attempts.labels({ outcome: 'succeeded' }),
  retrying: attempts.labels({ outcome: 'retrying' }),
  failed: attempts.labels({ outcome: 'failed' }),
};
const byResult = {
  success: latency.labels({ result: 'success' }),
  failure: latency.labels({ result: 'failure' }),
};

export function observeAttempt(ok: boolean, latencyMs: number): void {
  (ok ? byResult.success : byResult.failure).observe(latencyMs / 1000);
}

export function countOutcome(outcome: AttemptOutcome): void {
  byOutcome[outcome].inc();
}

/** Gauges read at scrape time; returns a function that stops reporting them. */
export function registerScrapedMetrics(opts: { db: Db; nc: NatsConnection; names: StreamNames }): () => void {
  const { db, nc, names } = opts;
  const durable = names.durable('webhooks');
  let consumer: Promise<{ pending: number; ackPending: number }> | undefined;
  const readConsumer = () => {
    consumer ??= nc
      .jetstreamManager()
      .then((jsm) => jsm.consumers.info(names.stream, durable))
      .then((info) => ({ pending: info.num_pending, ackPending: info.num_ack_pending }))
      .finally(() => {
        consumer = undefined;
      });
    return consumer;
  };
  const removers = [
    scrapedGauge({
      name: 'mcs_webhook_pending_retries',
      help: 'Deliveries waiting for a retry (pending after at least one failed attempt).',
      // A count over what may be a large backlog: at most every 15 s, whoever scrapes.
      minIntervalMs: 15_000,
      read: async () => {
        const { rows } = await db.execute<{ n: number }>(
          sql`select count(*)::int as n from webhooks.deliveries where status = 'pending' and attempts > 0`,
        );
        return [{ value: rows[0]?.n ?? 0 }];
      },
    }),
    scrapedGauge({
      name: 'mcs_webhook_delivery_lag_seconds',
      help: 'How long the most overdue pending delivery has been due (0 when none is overdue).',
      read: async () => {
        const { rows } = await db.execute<{ lag: number }>(sql`
          select coalesce(extract(epoch from now() - min(next_attempt_at)), 0)::float8 as lag
            from webhooks.deliveries where status = 'pending' and next_attempt_at <= now()`);
        return [{ value: Math.max(0, rows[0]?.lag ?? 0) }];
      },
    }),
    scrapedGauge({
      name: 'mcs_webhook_endpoints',
      help: 'Webhook endpoints, by status (enabled, unhealthy, disabled).',
      labelNames: ['status'],
      minIntervalMs: 5_000,
      read: async () => {
        const { rows } = await db.execute<{ status: string; n: number }>(
          sql`select status, count(*)::int as n from webhooks.endpoints group by status`,
        );
        const counts = new Map<string, number>([
          ['enabled', 0],
          ['unhealthy', 0],
          ['disabled', 0],
        ]);
        for (const r of rows) counts.set(r.status, r.n);
        return [...counts].map(([status, value]) => ({ labels: { status }, value }));
      },
    }),
    scrapedGauge({
      name: 'mcs_jetstream_consumer_pending_messages',
      help: 'Events in the stream not yet delivered to the webhooks consumer.',
      labelNames: ['consumer'],
      read: async () => [{ labels: { consumer: durable }, value: (await readConsumer()).pending }],
    }),
    scrapedGauge({
      name: 'mcs_jetstream_consumer_ack_pending_messages',
      help: 'Events delivered to the webhooks consumer and not yet acknowledged (being recorded).',
      labelNames: ['consumer'],
      read: async () => [{ labels: { consumer: durable }, value: (await readConsumer()).ackPending }],
    }),
  ];
  return () => {
    for (const remove of removers) remove();
  };
}
