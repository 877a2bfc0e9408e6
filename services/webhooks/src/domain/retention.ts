// Retention: the event log, the deliveries of its events and their attempts are kept for
// WEBHOOK_RETENTION (30 days) after the event, then removed together, a slice of events at a
// time. An event with a delivery still pending (a retry due, a resend queued) stays until it
// settles, and the newest event of each resource stays (per_resource ordering looks it up).
// Sent e-mails and finished recoveries and resends go after the same time.
//
// Every lookup rides an index: events by id (ids start with their time, kit/ids), deliveries by
// event through the two partial indexes fan-out and resends use, attempts by delivery.
import { deleteInSlices, type Tx } from '@mcs/kit/db';
import { encodeTime } from '@mcs/kit/ids';
import { transaction } from '@mcs/kit/outbox';
import { and, asc, eq, gt, inArray, isNotNull, lt, sql } from 'drizzle-orm';
import { attempts, deliveries, events, notifications, replays } from '../db/schema.ts';

export interface Purged {
  events: number;
  deliveries: number;
  attempts: number;
  notifications: number;
  replays: number;
}

/** Removes what is older than `cutoff` (see the file's head); answers how much went. */
export async function purgeBefore(db: Tx, cutoff: Date, slice = 1_000): Promise<Purged> {
  const purged: Purged = { events: 0, deliveries: 0, attempts: 0, notifications: 0, replays: 0 };
  // Every event id made before the cutoff sorts below this one.
  const bound = `evt_${encodeTime(cutoff.getTime())}`;
  let after = '';
  for (;;) {
    const last = await transaction(db, async (tx) => {
      const old = await tx
        .select({ id: events.id, resourceKey: events.resourceKey, resourceVersion: events.resourceVersion })
        .from(events)
        .where(and(lt(events.id, bound), gt(events.id, after)))
        .orderBy(asc(events.id))
        .limit(slice)
        // A resend of one of them (which share-locks its event) waits, then finds it gone.
        .for('update');
      if (old.length === 0) return undefined;
      const ids = old.map((r) => r.id);
      const ofOrigin = (origin: 'event' | 'resend') =>
        tx
          .select({ id: deliveries.id, eventId: deliveries.eventId, status: deliveries.status })
          .from(deliveries)
          .where(and(inArray(deliveries.eventId, ids), eq(deliveries.origin, origin)))
          // Locked, so a delivery a manual retry makes pending meanwhile is seen as pending.
          .for('update');
      const theirs = [...(await ofOrigin('event')), ...(await ofOrigin('resend'))];
      const held = new Set(theirs.filter((d) => d.status === 'pending').map((d) => d.eventId));
      for (const id of await newestOfTheirResource(tx, old)) held.add(id);
      const goneEvents = ids.filter((id) => !held.has(id));
      const goneDeliveries = theirs.filter((d) => !held.has(d.eventId)).map((d) => d.id);
      if (goneDeliveries.length > 0) {
        const a = await tx.delete(attempts).where(inArray(attempts.deliveryId, goneDeliveries));
        purged.attempts += a.rowCount ?? 0;
        const d = await tx.delete(deliveries).where(inArray(deliveries.id, goneDeliveries));
        purged.deliveries += d.rowCount ?? 0;
      }
      if (goneEvents.length > 0) {
        const e = await tx.delete(events).where(inArray(events.id, goneEvents));
        purged.events += e.rowCount ?? 0;
      }
      return ids.at(-1);
    });
    if (last === undefined) break;
    // Events held by a pending delivery are passed over; the next run looks at them again.
    after = last;
  }
  purged.notifications = await deleteInSlices(
    db,
    notifications,
    and(isNotNull(notifications.sentAt), lt(notifications.sentAt, cutoff))!,
  );
  purged.replays = await deleteInSlices(
    db,
    replays,
    and(isNotNull(replays.completedAt), lt(replays.completedAt, cutoff))!,
  );
  return purged;
}

/**
 * Of `candidates`, the events that are the newest version of their resource. Each stays: the
 * resource's next change (version v + 1) is held for per_resource endpoints until version v is
 * in the log (delivery/claims.ts), so removing it would hold a change to a resource untouched
 * for a month WEBHOOK_ORDERING_WAIT and send it with a false warning. One event per resource.
 */
async function newestOfTheirResource(
  tx: Tx,
  candidates: Array<{ id: string; resourceKey: string | null; resourceVersion: number | null }>,
): Promise<string[]> {
  const versioned = candidates.filter((e) => e.resourceKey !== null && e.resourceVersion !== null);
  if (versioned.length === 0) return [];
  const { rows } = await tx.execute<{ id: string }>(sql`
    select e.id
      from unnest(${sql.param(versioned.map((e) => e.id))}::text[],
                  ${sql.param(versioned.map((e) => e.resourceKey))}::text[],
                  ${sql.param(versioned.map((e) => e.resourceVersion))}::int[]) as e(id, key, version)
     where not exists (select 1 from ${events} n
                        where n.resource_key = e.key and n.resource_version > e.version)`);
  return rows.map((r) => r.id);
}

/** Runs purgeBefore(now − retention) every `everyMs` and once at start, logging what went. */
export function startRetention(
  db: Tx,
  log: { info(o: object, m: string): void; warn(o: object, m: string): void },
  retentionMs: number,
  everyMs = 3_600_000,
): { stop(): void } {
  let running = false;
  const run = async () => {
    if (running) return;
    running = true;
    try {
      const purged = await purgeBefore(db, new Date(Date.now() - retentionMs));
      if (Object.values(purged).some((n) => n > 0))
        log.info(purged, 'webhook history past its retention removed');
    } catch (err) {
      log.warn({ err: (err as Error).message }, 'webhook retention failed; trying again at the next run');
    } finally {
      running = false;
    }
  };
  void run();
  const timer = setInterval(() => void run(), everyMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
