// What the dashboard shows beyond the REST API: the deliveries of one event (to every endpoint),
// and an endpoint's success and latency over the last 24 hours.
import type { Caller } from '@mcs/kit/caller';
import type { Tx } from '@mcs/kit/db';
import { and, asc, eq, gte, sql } from 'drizzle-orm';
import { attempts, deliveries, events } from '../db/schema.ts';
import { type Delivery, deliveryColumns, withAttempts } from './deliveries.ts';
import { getEndpoint } from './endpoints.ts';
import { getEvent } from './events.ts';

/** Every delivery of the caller's event `eventId`, one per endpoint, oldest first. */
export async function eventDeliveries(tx: Tx, caller: Caller, eventId: string): Promise<Delivery[]> {
  const event = await getEvent(tx, caller, eventId);
  const rows = await tx
    .select(deliveryColumns)
    .from(deliveries)
    .innerJoin(events, eq(events.id, deliveries.eventId))
    .where(
      and(
        eq(deliveries.eventId, event.id),
        eq(deliveries.accountId, caller.accountId),
        eq(deliveries.livemode, caller.livemode),
      ),
    )
    .orderBy(asc(deliveries.id));
  return withAttempts(tx, rows);
}

export interface StatsBucket {
  start: Date;
  succeeded: number;
  failed: number;
}

export interface EndpointStats {
  buckets: StatsBucket[];
  p50: number;
  p90: number;
  p99: number;
  attempts: number;
}

const HOUR = 3_600_000;

/**
 * The attempts to an endpoint in the 24 hours up to `now`, per hour, with latency percentiles
 * of those that got an answer. One aggregate query over the endpoint's deliveries (indexed by
 * endpoint) and their attempts (indexed by delivery).
 */
export async function endpointStats(
  tx: Tx,
  caller: Caller,
  endpointId: string,
  now = new Date(),
): Promise<EndpointStats> {
  const endpoint = await getEndpoint(tx, caller, endpointId);
  const firstHour = Math.floor(now.getTime() / HOUR) * HOUR - 23 * HOUR;
  const since = new Date(firstHour);
  const hour = sql<string>`floor(extract(epoch from ${attempts.at}) / 3600)`;
  // A delivery with an attempt since then was last attempted since then: only those are joined
  // to their attempts, not the endpoint's whole history (30 days, WEBHOOK_RETENTION).
  const recent = gte(deliveries.lastAttemptAt, since);
  const perHour = await tx
    .select({
      hour: hour.mapWith(Number),
      succeeded: sql<number>`count(*) filter (where ${attempts.error} is null)`.mapWith(Number),
      failed: sql<number>`count(*) filter (where ${attempts.error} is not null)`.mapWith(Number),
    })
    .from(attempts)
    .innerJoin(deliveries, eq(deliveries.id, attempts.deliveryId))
    .where(and(eq(deliveries.endpointId, endpoint.id), recent, gte(attempts.at, since)))
    .groupBy(hour);
  const [latency] = await tx
    .select({
      p50: sql<number>`coalesce(percentile_disc(0.5) within group (order by ${attempts.latencyMs}), 0)`.mapWith(
        Number,
      ),
      p90: sql<number>`coalesce(percentile_disc(0.9) within group (order by ${attempts.latencyMs}), 0)`.mapWith(
        Number,
      ),
      p99: sql<number>`coalesce(percentile_disc(0.99) within group (order by ${attempts.latencyMs}), 0)`.mapWith(
        Number,
      ),
    })
    .from(attempts)
    .innerJoin(deliveries, eq(deliveries.id, attempts.deliveryId))
    .where(
      and(
        eq(deliveries.endpointId, endpoint.id),
        recent,
        gte(attempts.at, since),
        sql`${attempts.statusCode} is not null`,
      ),
    );
  const byHour = new Map(perHour.map((r) => [r.hour, r]));
  const buckets: StatsBucket[] = [];
  for (let i = 0; i < 24; i++) {
    const start = firstHour + i * HOUR;
    const r = byHour.get(start / HOUR);
    buckets.push({ start: new Date(start), succeeded: r?.succeeded ?? 0, failed: r?.failed ?? 0 });
  }
  return {
    buckets,
    p50: latency?.p50 ?? 0,
    p90: latency?.p90 ?? 0,
    p99: latency?.p99 ?? 0,
    attempts: buckets.reduce((n, b) => n + b.succeeded + b.failed, 0),
  };
}
