// The replayer: works through the running replays (domain/replays.ts) a chunk at a time, and
// probes unhealthy endpoints that asked for it (prober.ts). Each chunk is one transaction that
// takes the replay row (FOR UPDATE SKIP LOCKED, so replicas share the work without doubling
// it), queues up to WEBHOOK_REPLAY_RATE deliveries, moves the cursor and sets when the next
// chunk may run (a second's worth of the rate later): a crash rolls the chunk back whole, and a
// restart goes on from the cursor. The queued deliveries hold a lease and go to the engine after
// commit (the poller takes them if this process dies first).

import { fromBinary } from '@bufbuild/protobuf';
import type { Db, Tx } from '@mcs/kit/db';
import { encodeTime } from '@mcs/kit/ids';
import type { Logger } from '@mcs/kit/log';
import { events as eventsProto } from '@mcs/proto';
import { eq, sql } from 'drizzle-orm';
import { endpoints } from '../db/schema.ts';
import { fanoutDeliveryId, type QueuedDelivery, resourceKey } from '../domain/fanout.ts';
import type { BacklogRow, Replay } from '../domain/replays.ts';
import {
  aboutSql,
  backlogSql,
  type InsertedRow,
  newDeliveryIdSql,
  queuedOf,
  subscribedSql,
} from '../domain/replays.ts';

export interface ReplayerOptions {
  db: Db;
  log: Logger;
  /** Deliveries a replay queues per second at most (WEBHOOK_REPLAY_RATE). */
  rate: number;
  leaseMs: number;
  enqueue: (items: QueuedDelivery[]) => void;
  pollMs?: number;
  /** Extra work on each turn (the prober). */
  onTick?: () => Promise<void>;
  clock?: () => Date;
}

export interface Replayer {
  /** Runs due chunks now (a replay was just created). */
  wake(): void;
  /** Runs every due chunk once; resolves with how many ran (tests). */
  runDue(): Promise<number>;
  stop(): Promise<void>;
}

type Row = {
  id: string;
  kind: Replay['kind'];
  account_id: string;
  livemode: boolean;
  endpoint_id: string | null;
  since: Date;
  until: Date | null;
  type: string | null;
  cursor: string | null;
};

export function createReplayer(opts: ReplayerOptions): Replayer {
  const { db, log } = opts;
  const clock = opts.clock ?? (() => new Date());
  const pollMs = opts.pollMs ?? 1_000;
  const chunk = Math.max(1, Math.floor(opts.rate));
  let stopped = false;
  let running: Promise<number> | null = null;
  let again = false;
  let timer: NodeJS.Timeout | null = null;

  /** Runs one due chunk; null when none is due. Returns when its replay may run again. */
  async function runOne(): Promise<{ next: Date | null } | null> {
    const now = clock();
    let queued: QueuedDelivery[] = [];
    const result = await db.transaction(async (tx) => {
      const { rows } = await tx.execute<Row>(sql`
        select id, kind, account_id, livemode, endpoint_id, since, until, type, cursor
          from webhooks.replays
         where status = 'running' and next_run_at <= ${now}
         order by next_run_at limit 1 for update skip locked`);
      const job = rows[0];
      if (!job) return null;
      const lease = new Date(now.getTime() + opts.leaseMs);
      const step =
        job.kind === 'recovery'
          ? await recoverChunk(tx, job, lease, now)
          : await resendChunk(tx, job, lease, now);
      if (step === 'canceled') {
        await tx.execute(sql`
          update webhooks.replays set status = 'canceled', next_run_at = null, completed_at = ${now}
           where id = ${job.id}`);
        return { next: null };
      }
      queued = step.queued;
      const done = step.scanned < chunk;
      // A second's worth of the rate per chunk: the next one waits for what this one queued.
      const next = done ? null : new Date(now.getTime() + Math.ceil((step.queued.length / opts.rate) * 1000));
      await tx.execute(sql`
        update webhooks.replays
           set cursor = ${step.cursor}, queued = queued + ${step.queued.length},
               status = ${done ? 'completed' : 'running'}, next_run_at = ${next},
               completed_at = ${done ? now : null}
         where id = ${job.id}`);
      return { next };
    });
    if (queued.length > 0) opts.enqueue(queued);
    return result;
  }

  type Step = { scanned: number; cursor: string | null; queued: QueuedDelivery[] } | 'canceled';

  /**
   * The next events of an endpoint's backlog (domain/replays.ts backlogSql), in event id order:
   * a failed or skipped delivery is re-queued in place, a missing one is added as fan-out would
   * have made it (same id: it can exist once only).
   */
  async function recoverChunk(tx: Tx, job: Row, lease: Date, now: Date): Promise<Step> {
    const [ep] = await tx
      .select()
      .from(endpoints)
      .where(eq(endpoints.id, job.endpoint_id ?? ''));
    if (ep?.status !== 'enabled') return 'canceled';
    const scan = await tx.execute<BacklogRow>(
      backlogSql(
        ep,
        { since: new Date(job.since), until: new Date(job.until ?? now), after: job.cursor },
        chunk,
      ),
    );
    const found = scan.rows;
    if (found.length === 0) return { scanned: 0, cursor: job.cursor, queued: [] };
    const requeue = found.flatMap((r) => (r.requeue !== null ? [r.requeue] : []));
    const add = found.filter((r) => r.requeue === null);
    const ids: string[] = [];
    if (requeue.length > 0) {
      // A manual retry's rule: the schedule starts over; attempt numbers go on in the log.
      const { rows } = await tx.execute<{ id: string }>(sql`
        update webhooks.deliveries d
           set status = 'pending', schedule_start = d.attempts, next_attempt_at = ${lease},
               replay_id = ${job.id}
         where d.id = any(${sql.param(requeue)}::text[]) and d.status in ('failed', 'skipped')
        returning d.id`);
      ids.push(...rows.map((r) => r.id));
    }
    if (add.length > 0) {
      // per_resource: keyed as fan-out keys it (domain/fanout.ts): the resource and the event's
      // outbox seq; an event without a seq goes unordered.
      const key = (r: BacklogRow) =>
        r.payload && r.outbox_seq !== null
          ? resourceKey(fromBinary(eventsProto.EventSchema, new Uint8Array(r.payload)))
          : null;
      const keys = add.map(key);
      const { rows } = await tx.execute<{ id: string }>(sql`
        insert into webhooks.deliveries
          (id, event_id, endpoint_id, account_id, livemode, status, next_attempt_at, ordering_key, ordering_seq,
           replay_id, created_at)
        select t.id, t.event_id, ${ep.id}, ${ep.accountId}, ${ep.livemode}, 'pending', ${lease}, t.ordering_key,
               t.ordering_seq, ${job.id}, ${now}
          from unnest(${sql.param(add.map((r) => fanoutDeliveryId(r.id, new Date(r.created_at), ep.id)))}::text[],
                      ${sql.param(add.map((r) => r.id))}::text[],
                      ${sql.param(keys)}::text[],
                      ${sql.param(add.map((r, i) => (keys[i] === null ? null : r.outbox_seq)))}::bigint[])
                 as t(id, event_id, ordering_key, ordering_seq)
        on conflict do nothing
        returning id`);
      ids.push(...rows.map((r) => r.id));
    }
    return {
      scanned: found.length,
      cursor: found.at(-1)!.id,
      // Claimed by the engine first (engine.ts): the claim applies the endpoint's pause and
      // max_rate, and an ordered delivery's check that its resource's earlier events are done.
      queued: ids.sort().map((id) => ({ deliveryId: id, endpointId: ep.id, lease })),
    };
  }

  /** The next events of a bulk resend, each delivered again to its enabled subscribers. */
  async function resendChunk(tx: Tx, job: Row, lease: Date, now: Date): Promise<Step> {
    if (job.endpoint_id !== null) {
      const ep = await tx.execute<{ status: string }>(sql`
        select status from webhooks.endpoints where id = ${job.endpoint_id}`);
      if (ep.rows[0]?.status !== 'enabled') return 'canceled';
    }
    const from = job.cursor ?? `evt_${encodeTime(new Date(job.since).getTime())}`;
    const scan = await tx.execute<{ id: string }>(sql`
      select id from webhooks.events
       where account_id = ${job.account_id} and livemode = ${job.livemode} and not test
         and id > ${from} and created_at >= ${job.since} and created_at < ${job.until ?? now}
         ${job.type !== null ? sql`and type = ${job.type}` : sql``}
       order by id limit ${chunk}
       -- Share-locked, as a single resend's event is: the retention purge (domain/retention.ts)
       -- either waits and then sees the deliveries queued here (and keeps their events), or has
       -- removed the events and this chunk passes them over. Unlocked, it could queue deliveries
       -- of events the purge was removing.
       for share`);
    const ids = scan.rows.map((r) => r.id);
    if (ids.length === 0) return { scanned: 0, cursor: job.cursor, queued: [] };
    const { rows } = await tx.execute<InsertedRow>(sql`
      with ins as (
        insert into webhooks.deliveries
          (id, event_id, endpoint_id, account_id, livemode, status, next_attempt_at, origin, replay_id, created_at)
        select ${newDeliveryIdSql(now)}, ev.id, e.id, e.account_id, e.livemode, 'pending', ${lease}, 'resend',
               ${job.id}, ${now}
          from webhooks.events ev
          join webhooks.endpoints e
            on e.account_id = ev.account_id and e.livemode = ev.livemode
           and e.status = 'enabled' and ${subscribedSql(sql`ev.type`)}
           and e.id is distinct from ${aboutSql}
         where ev.id = any(${sql.param(ids)}::text[])
           ${job.endpoint_id !== null ? sql`and e.id = ${job.endpoint_id}` : sql``}
        returning id, event_id, endpoint_id)
      select ins.id, ins.event_id, ins.endpoint_id, '' as type from ins order by ins.event_id`);
    return { scanned: ids.length, cursor: ids.at(-1)!, queued: queuedOf(rows, lease) };
  }

  async function runDueOnce(): Promise<number> {
    let n = 0;
    let soonest: number | null = null;
    while (!stopped) {
      const r = await runOne();
      if (!r) break;
      n++;
      if (r.next && (soonest === null || r.next.getTime() < soonest)) soonest = r.next.getTime();
    }
    if (opts.onTick) await opts.onTick();
    // A replay due again sooner than the next poll gets a timer of its own.
    if (soonest !== null && !stopped) arm(Math.max(0, soonest - clock().getTime()));
    return n;
  }

  function arm(ms: number): void {
    if (timer) clearTimeout(timer);
    timer = setTimeout(
      () => {
        timer = null;
        trigger();
      },
      Math.min(ms, pollMs),
    );
  }

  /** Runs due work; a call during a run makes it go once more after. */
  function trigger(): Promise<number> {
    if (running) {
      again = true;
      return running;
    }
    running = runDueOnce()
      .catch((err) => {
        log.warn({ err: (err as Error).message }, 'replay chunk failed, will retry');
        return 0;
      })
      .finally(() => {
        running = null;
        if (again && !stopped) {
          again = false;
          void trigger();
        } else if (!timer && !stopped) arm(pollMs);
      });
    return running;
  }

  arm(pollMs);

  return {
    wake() {
      void trigger();
    },
    runDue: () => trigger(),
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await running;
    },
  };
}
