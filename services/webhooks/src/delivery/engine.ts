// The delivery engine (docs/design.md): state lives in Postgres, the HTTP call happens outside any
// transaction. Each queued delivery carries a lease (the next_attempt_at its queuer set), and
// only the holder of a delivery's lease attempts it; one whose worker died is claimed by the
// poller (FOR UPDATE SKIP LOCKED) when its lease runs out. Short retry delays use a timer; long
// ones cost nothing but an indexed row until due.
//
// Starting an attempt. A delivery arrives with its lease and, when fan-out (or a claim) read
// them in the statement that wrote the lease, with what its attempt needs (url, sealed secret,
// body, attempt count: QueuedDelivery.target). While that lease still has at least
// WEBHOOK_TIMEOUT + half the margin left, the attempt starts at once, with no statement: nobody
// else may take the delivery before the lease runs out, and the attempt (at most
// WEBHOOK_TIMEOUT) and its record fit in what is left. Otherwise — a delivery from the poller
// or a manual retry, one that waited in memory behind a slow endpoint, any delivery of an
// endpoint whose last attempt failed (its state may be changing) — it is claimed first: the
// lease is moved forward only if it is still the one the queue knew, and the claim reads the
// target. Claims are made for up to CLAIM_AHEAD waiting deliveries of an endpoint at once, so
// a standing backlog costs one claim statement per batch, not per delivery.
//
// The lease length. An attempt holds its delivery for `leaseMs` = WEBHOOK_TIMEOUT + a margin
// (WEBHOOK_LEASE_MARGIN, default 5 s): the sender aborts every attempt at WEBHOOK_TIMEOUT, so
// the margin only has to cover recording the result (a short statement, successes grouped
// within a 20 ms window) and event-loop stalls. It is also how long a delivery whose process
// died (kill -9, OOM, lost machine) waits before a poller takes it over: 15 s by default, about
// 2 s in the end-to-end tests with a 1 s time-out. A margin too short costs at worst a duplicate
// attempt (receivers dedupe on the event id), never a lost one; a long one only delays recovery
// after a crash. Results stay single either way: every record is guarded by
// `attempts = n - 1 and status = 'pending'` (record.ts).
//
// per_resource ordering (docs/api.md "Ordered delivery"): a delivery with an ordering key is
// never started from what fan-out read; claimOrdered (claims.ts) decides, in PostgreSQL and under a lock per
// endpoint and resource, whether it goes now or is held behind an earlier change (lower outbox
// seq) still pending or another attempt of its resource in flight; release() lets the next one
// go once an attempt is recorded. A change that has not arrived at all cannot be seen that way:
// so each event also carries its resource's version (1, 2, 3, … without a gap), and a delivery of
// version v also waits until version v − 1 is in the event log, for at most `orderingWaitMs`.
// Unordered deliveries never run any of it.
//
// Isolation: slow endpoints never hold the slots healthy ones need (lanes.ts: a fast lane, a
// slow lane for failing and slow endpoints, a share per endpoint). An endpoint that started an
// attempt goes to the back of the line, so each endpoint waiting gets its turn.
//
// A delivery attempted without a claim was checked against its endpoint's status by the fan-out
// statement a moment before; an endpoint disabled or deleted in that moment still gets that
// attempt, as it would an attempt already in flight, and its record follows the straggler rule.
import type { Db } from '@mcs/kit/db';
import type { Logger } from '@mcs/kit/log';
import { endSpan, SpanKind, tracer, tracing } from '@mcs/kit/tracing';
import type { AttemptTarget, QueuedDelivery } from '../domain/fanout.ts';
import type { SecretBox } from '../domain/secrets.ts';
import { countOutcome, observeAttempt } from '../metrics.ts';
import {
  type ClaimedRow,
  claimDue,
  claimOrdered,
  claimUnordered,
  releaseOrdered,
  reserveStarts,
  skipDeliveries,
} from './claims.ts';
import { createLanes, type Lane } from './lanes.ts';
import { createRateSlots } from './rate-slots.ts';
import { type Attempted, createSuccessLog, recordAttempt } from './record.ts';
import type { Sender } from './sender.ts';
import { serviceSignature, standardSignature } from './sign.ts';

export interface EngineOptions {
  db: Db;
  box: SecretBox;
  sender: Sender;
  log: Logger;
  /** Delays of the retries after the first attempt (WEBHOOK_RETRY_SCHEDULE). */
  schedule: number[];
  /** The early warning after this long failing (WEBHOOK_WARN_AFTER); default 1 h. */
  warnAfterMs?: number;
  timeoutMs: number;
  /** Added to timeoutMs to make the lease (see the top of this file); default 5 s. */
  leaseMarginMs?: number;
  concurrency: number;
  perEndpoint: number;
  /** Attempts of failing or slow endpoints in flight at most (the slow lane); default concurrency / 2. */
  slowConcurrency?: number;
  /** An attempt in flight this long moves to the slow lane; default min(1 s, timeoutMs / 2). */
  slowAfterMs?: number;
  pollMs?: number;
  /** How long successes wait to be recorded together (record.ts); default 60 ms, 0: each at once. */
  groupCommitMs?: number;
  /**
   * Called once a Retry-After pause of an endpoint committed, with its end: main.ts tells the
   * other replicas (their copies read before it committed are held as this engine's are).
   */
  onPause?: (endpointId: string, until: Date) => void;
  /** Called after an attempt wrote a notification: unhealthy, gone or warned (wakes the mailer). */
  onNotify?: (endpointId: string, transition: 'unhealthy' | 'gone' | 'warned') => void;
  /** auto_recover: the first probe's delay after an endpoint turned unhealthy (prober.ts). */
  probeMs?: number;
  /**
   * per_resource: how long a delivery waits for the event of its resource's previous version
   * to arrive, from when it was recorded (WEBHOOK_ORDERING_WAIT); default 30 s (claimOrdered).
   */
  orderingWaitMs?: number;
  clock?: () => Date;
}

export interface Engine {
  /** The lease a fresh delivery gets: long enough to be sent from memory before the poller may claim it. */
  leaseMs: number;
  enqueue(items: QueuedDelivery[]): void;
  /** Claims due deliveries now (normally every pollMs). */
  poll(): Promise<number>;
  /**
   * Another replica committed a Retry-After pause of the endpoint until `until`: what this
   * engine read or claimed before now is claimed again before it starts (see `pauses`).
   */
  paused(endpointId: string, until: Date): void;
  stop(): Promise<void>;
}

const MEMORY_QUEUE_CAP = 20_000;
/** Waiting deliveries of one endpoint claimed by one statement at most. */
const CLAIM_AHEAD = 32;

/**
 * A delivery waiting in memory; `claimed`: its lease and target come from this engine's claim,
 * whose statement began at pause epoch `epoch` (see `pauses`).
 */
type Waiting = QueuedDelivery & { claimed?: boolean; epoch?: number };

export function createEngine(opts: EngineOptions): Engine {
  const { db, log } = opts;
  const clock = opts.clock ?? (() => new Date());
  const pollMs = opts.pollMs ?? 1_000;
  const margin = opts.leaseMarginMs ?? 5_000;
  const leaseMs = opts.timeoutMs + margin;
  /**
   * per_resource: how far ahead a delivery held back behind an earlier event of its resource is
   * put. Always past any lease, so release() can tell a held delivery from one being attempted.
   */
  const holdMs = leaseMs * 10;
  /** per_resource: how long a delivery waits for its resource's previous version (claimOrdered). */
  const orderingWaitMs = opts.orderingWaitMs ?? 30_000;
  /** Lease left that lets an attempt start without a claim: the attempt, then its record. */
  const startableMs = opts.timeoutMs + margin / 2;
  const waiting = new Map<string, Waiting[]>();
  /**
   * The entries of `waiting` by delivery: a delivery waits in memory at most once. When the
   * poller claims one again because it waited past its lease (a slow endpoint's backlog), the
   * waiting entry takes the newer lease instead of queueing a copy, so such a backlog stays
   * bounded by its number of deliveries.
   */
  const waitingById = new Map<string, Waiting>();
  /** Endpoints with a claim statement under way (their queue's head is being claimed). */
  const claiming = new Set<string>();
  const lanes = createLanes(opts);
  /**
   * Retry-After pauses this engine recorded (endpoint -> until, ms), each with the epoch at which
   * it was noted. The pause's statement moved the endpoint's pending rows to its end, but a copy
   * read before it committed — from fan-out, or a claim under way meanwhile — still holds a
   * target: while the pause lasts, only a delivery claimed by a statement begun after the pause
   * was noted (which saw it) may start; any other is claimed again first, and that claim moves
   * it to the pause's end (or starts it, if the pause was lifted meanwhile: a re-enable).
   */
  const pauses = new Map<string, { until: number; epoch: number }>();
  let epoch = 0;
  const timers = new Set<NodeJS.Timeout>();
  const inflight = new Set<Promise<void>>();
  let queued = 0;
  let stopped = false;

  const policy = {
    schedule: opts.schedule,
    warnAfterMs: opts.warnAfterMs ?? 3_600_000,
    leaseMs,
    ...(opts.probeMs !== undefined ? { probeMs: opts.probeMs } : {}),
  };
  /** max_rate: start slots reserved in the database, shared by every replica (rate-slots.ts). */
  const rateSlots = createRateSlots({
    reserveStarts: (endpointId, from, ms) => reserveStarts(db, endpointId, from, ms),
    log,
    wake: () => pump(),
    track(p) {
      inflight.add(p);
      const done = () => inflight.delete(p);
      p.then(done, done);
    },
  });

  /** An endpoint that gets no more attempts: the lanes and max_rate slots drop what they keep of it. */
  const forget = (endpointId: string) => {
    lanes.forget(endpointId);
    rateSlots.note(endpointId, null);
  };

  const successes = createSuccessLog({
    db,
    log,
    clock,
    ...(opts.groupCommitMs === undefined ? {} : { windowMs: opts.groupCommitMs }),
    single: async (a) => {
      await recordAttempt(db, policy, a, clock()).catch((err) =>
        log.error(
          { err, deliveryId: a.deliveryId, eventId: a.eventId },
          'could not record a successful attempt',
        ),
      );
    },
  });

  /** Drops an endpoint's deliveries waiting in memory: their rows were moved (a Retry-After). */
  function dropWaiting(endpointId: string): void {
    const q = waiting.get(endpointId);
    if (!q) return;
    for (const item of q) waitingById.delete(item.deliveryId);
    queued -= q.length;
    waiting.delete(endpointId);
  }

  function enqueue(items: QueuedDelivery[]): void {
    for (const item of items) {
      const known = waitingById.get(item.deliveryId);
      if (known) {
        if (item.ordered) known.ordered = true;
        // A later claim of the row wrote a later lease: the latest is the one the row holds.
        // What was read with the older one is claimed again before the attempt.
        if (item.lease > known.lease) {
          known.lease = item.lease;
          delete known.target;
        }
        continue;
      }
      // Over the cap the row still holds its lease; the poller picks it up when due.
      if (queued >= MEMORY_QUEUE_CAP) break;
      let q = waiting.get(item.endpointId);
      if (!q) {
        q = [];
        waiting.set(item.endpointId, q);
      }
      const entry: Waiting = { ...item };
      q.push(entry);
      waitingById.set(entry.deliveryId, entry);
      queued++;
    }
    pump();
  }

  /** Notes a committed pause (this engine's or another replica's) and lets go of the endpoint's queue. */
  function notePause(endpointId: string, untilMs: number): void {
    const until = Math.max(untilMs, pauses.get(endpointId)?.until ?? 0);
    pauses.set(endpointId, { until, epoch: ++epoch });
    dropWaiting(endpointId);
  }

  /** Whether a Retry-After pause noted after `item`'s claim began holds it back (see `pauses`). */
  function heldByPause(item: Waiting, now: number): boolean {
    const p = pauses.get(item.endpointId);
    if (!p) return false;
    if (p.until <= now) {
      pauses.delete(item.endpointId);
      return false;
    }
    return !(item.claimed === true && item.epoch !== undefined && item.epoch >= p.epoch);
  }

  /** Whether `item` may start without a claim (see the top of this file). */
  function startable(item: Waiting, now: number): item is Waiting & { target: AttemptTarget } {
    return (
      item.target !== undefined &&
      item.lease.getTime() - now >= startableMs &&
      (item.claimed === true || !lanes.isFailing(item.endpointId)) &&
      !heldByPause(item, now)
    );
  }

  /**
   * A failing endpoint has one attempt in flight at a time, and each may take WEBHOOK_TIMEOUT: in
   * arrival order, a retry that came due would wait behind every first attempt queued before it,
   * its schedule stretching with the backlog, and the endpoint would turn unhealthy (ending the
   * backlog, with its e-mail) hours late or, under steady traffic, never. So its slot goes to the
   * delivery furthest along its schedule, the earliest queued of those; one already claimed keeps
   * the head (its lease is taken).
   */
  function furthestFirst(q: Waiting[]): void {
    if (q.length < 2 || q[0]!.claimed === true) return;
    const attemptsOf = (w: Waiting) => w.target?.attempts ?? w.attempts ?? 0;
    let best = 0;
    for (let i = 1; i < q.length; i++) if (attemptsOf(q[i]!) > attemptsOf(q[best]!)) best = i;
    if (best > 0) q.unshift(q.splice(best, 1)[0]!);
  }

  function pump(): void {
    if (stopped) return;
    const now = clock().getTime();
    for (const [endpointId, q] of waiting) {
      const lane = lanes.laneOf(endpointId);
      let started = 0;
      while (q.length > 0 && lanes.hasRoom(endpointId, lane)) {
        if (lanes.isFailing(endpointId)) furthestFirst(q);
        const item = q[0]!;
        if (!startable(item, now)) {
          if (!claiming.has(endpointId)) claim(endpointId, q);
          break;
        }
        const rate = item.target.maxRate;
        if (rate !== null && !rateSlots.take(endpointId, rate, q.length, now)) break;
        q.shift();
        waitingById.delete(item.deliveryId);
        queued--;
        const target = item.target;
        // The attempt holds the target (payload, secret, address); the entry no longer does. A
        // table waitingById discarded as it grew and shrank may still point at the entry, and
        // stays reachable for the young-generation collector until the next full collection:
        // holding the target, every delivery's payload survived its scavenges.
        (item as Waiting).target = undefined;
        start(item, target, lane);
        started++;
      }
      if (q.length === 0) waiting.delete(endpointId);
      else if (started > 0) {
        // To the back of the line: the endpoints waiting behind it go first next time.
        waiting.delete(endpointId);
        waiting.set(endpointId, q);
      }
      if (lanes.full()) break;
    }
  }

  /**
   * Claims the head of an endpoint's queue (up to CLAIM_AHEAD; one for a failing endpoint):
   * moves each lease forward if it is still the one known, and reads each target. Claimed
   * deliveries go back to the head of the queue, startable; the others are someone else's now,
   * or no longer pending, and leave the queue.
   */
  function claim(endpointId: string, q: Waiting[]): void {
    // A rate-limited endpoint claims what it can start before the claimed leases get too short.
    const rate = rateSlots.rateOf(endpointId);
    const ahead =
      rate === undefined ? CLAIM_AHEAD : Math.min(CLAIM_AHEAD, Math.floor((rate * margin) / 2000));
    const items = q.splice(0, lanes.isFailing(endpointId) ? 1 : Math.max(1, ahead));
    for (const item of items) waitingById.delete(item.deliveryId);
    queued -= items.length;
    claiming.add(endpointId);
    const p = claimRows(items)
      .then((claimed) => {
        if (claimed.length === 0) return;
        let head = waiting.get(endpointId);
        if (!head) {
          head = [];
          waiting.set(endpointId, head);
        }
        // A delivery enqueued again while being claimed (the poller took its expired lease)
        // waits once: the claim that won the row decides which entry still holds it.
        const fresh = claimed.filter((c) => !waitingById.has(c.deliveryId));
        head.unshift(...fresh);
        for (const c of fresh) waitingById.set(c.deliveryId, c);
        queued += fresh.length;
      })
      .catch((err) => {
        // Their leases stand in the database: the poller claims them when they run out.
        log.warn({ err: (err as Error).message, endpoint: endpointId }, 'delivery claim failed');
      })
      .finally(() => {
        claiming.delete(endpointId);
        inflight.delete(p);
        pump();
      });
    inflight.add(p);
  }

  /**
   * Claims `items`: moves each lease forward if it is still the one known, and reads each
   * target. Unordered deliveries take one statement; those with an ordering key (known from
   * fan-out, release or the poller, or found by that statement) are claimed by claimOrdered.
   */
  async function claimRows(items: Waiting[]): Promise<Waiting[]> {
    const now = clock();
    const seen = epoch; // pauses noted so far: this statement sees them

    const lease = new Date(now.getTime() + leaseMs);
    const ordered = items.filter((i) => i.ordered);
    const rest = ordered.length === 0 ? items : items.filter((i) => !i.ordered);
    let rows: ClaimedRow[] = [];
    if (rest.length > 0) {
      const { rows: unordered, keyed } = await claimUnordered(db, rest, now, lease);
      rows = unordered;
      if (keyed.size > 0) for (const i of rest) if (keyed.has(i.deliveryId)) ordered.push(i);
    }
    if (ordered.length > 0) {
      const claim = { now, lease, holdMs, recheckMs: pollMs, orderingWaitMs };
      rows = rows.concat(await claimOrdered(db, ordered, claim));
    }
    const byId = new Map(rows.map((r) => [r.id, r]));
    const claimed: Waiting[] = [];
    const skip: string[] = [];
    for (const item of items) {
      const row = byId.get(item.deliveryId);
      if (!row) continue; // someone else holds it now, or it is no longer pending
      if (row.missing_version != null) {
        log.warn(
          {
            deliveryId: item.deliveryId,
            endpoint: item.endpointId,
            resource: row.ordering_key,
            missingVersion: row.missing_version,
            waitedMs: orderingWaitMs,
          },
          'per_resource: the previous version of the resource never arrived, delivering without it',
        );
      }
      if (row.paused) continue; // held back, or due when the pause ends: released or polled then
      if (row.endpoint_status !== 'enabled' || row.url === null || row.body === null || !row.secret_sealed) {
        skip.push(item.deliveryId);
        if (row.endpoint_status !== 'enabled') forget(item.endpointId);
        continue;
      }
      claimed.push({
        deliveryId: item.deliveryId,
        endpointId: item.endpointId,
        lease,
        claimed: true,
        epoch: seen,
        ...(item.trace ? { trace: item.trace } : {}),
        target: {
          eventId: row.event_id,
          url: row.url,
          secretSealed: row.secret_sealed,
          body: row.body,
          attempts: row.attempts,
          scheduleStart: row.schedule_start,
          maxRate: row.max_rate,
          orderingKey: row.ordering_key,
        },
      });
    }
    if (skip.length > 0) await skipDeliveries(db, skip);
    return claimed;
  }

  function start(item: Waiting, target: AttemptTarget, lane: Lane): void {
    rateSlots.note(item.endpointId, target.maxRate);
    const slot = lanes.take(item.endpointId, lane, pump);
    const p = attempt(item, target, slot.answered)
      .catch((err) => log.error({ err, deliveryId: item.deliveryId }, 'delivery attempt failed to run'))
      .finally(() => {
        slot.release();
        inflight.delete(p);
        pump();
      });
    inflight.add(p);
  }

  /** `answered` is called when the receiver's answer (or the failure) is in, before it is recorded. */
  async function attempt(item: Waiting, target: AttemptTarget, answered: () => void): Promise<void> {
    const startedAt = clock();
    const secret = opts.box.open(target.secretSealed);
    const timestamp = Math.floor(startedAt.getTime() / 1000);
    // Traced (the delivery came from a traced event): a client span for the attempt, child of
    // the consumer's, so the trace runs from the REST request to the receiver's answer.
    const span =
      tracing.enabled && item.trace
        ? tracer().startSpan(
            'webhook attempt',
            {
              kind: SpanKind.CLIENT,
              attributes: {
                'http.request.method': 'POST',
                'mcs.delivery_id': item.deliveryId,
                'mcs.event_id': target.eventId,
                'mcs.endpoint_id': item.endpointId,
                'mcs.attempt': target.attempts + 1,
              },
            },
            item.trace,
          )
        : undefined;
    const result = await opts.sender.send(
      target.url,
      target.body,
      {
        'x-service-signature': serviceSignature(secret, target.body),
        'webhook-id': target.eventId,
        'webhook-timestamp': String(timestamp),
        'webhook-signature': standardSignature(secret, target.eventId, timestamp, target.body),
      },
      { endpointId: item.endpointId, deliveryId: item.deliveryId, attempt: target.attempts + 1 },
    );
    answered();
    lanes.answeredIn(item.endpointId, result.latencyMs);
    const attempted: Attempted = {
      deliveryId: item.deliveryId,
      endpointId: item.endpointId,
      eventId: target.eventId,
      number: target.attempts + 1,
      run: target.attempts + 1 - target.scheduleStart,
      at: startedAt,
      result,
    };
    observeAttempt(result.ok, result.latencyMs);
    if (span) {
      if (result.statusCode !== null) span.setAttribute('http.response.status_code', result.statusCode);
      endSpan(span, result.ok ? undefined : new Error(result.error ?? 'failed'));
    }
    if (!result.ok && log.isLevelEnabled('debug')) {
      // Every attempt is in webhooks.attempts (API, dashboard); the log has it at debug.
      log.debug(
        {
          deliveryId: item.deliveryId,
          eventId: target.eventId,
          endpoint: item.endpointId,
          attempt: target.attempts + 1,
          error: result.error,
        },
        'delivery attempt failed',
      );
    }
    if (result.ok) {
      countOutcome('succeeded');
      lanes.succeeded(item.endpointId);
      // Recorded with the next group; the slot is free at once. Ordered: the next change of its
      // resource goes once this success is recorded — until then the claims of its resource see
      // this delivery pending under its ordering_lease (in flight) and hold the others back.
      const key = target.orderingKey;
      successes.add(attempted, key ? () => release(item.endpointId, key) : undefined);
      return;
    }
    lanes.failed(item.endpointId);
    const {
      transition,
      next,
      pausedUntil,
      queued: events,
    } = await recordAttempt(db, policy, attempted, clock());
    countOutcome(next ? 'retrying' : 'failed');
    if (events.length > 0) enqueue(events);
    // Ordered: an earlier change of its resource that arrived while this one was in flight
    // goes now, before this one's retry.
    if (target.orderingKey && next) await release(item.endpointId, target.orderingKey);
    if (transition) {
      if (transition !== 'warned') forget(item.endpointId);
      log.warn({ endpoint: item.endpointId, transition }, 'endpoint health changed');
      opts.onNotify?.(item.endpointId, transition);
      if (transition !== 'warned') return;
    }
    if (pausedUntil) {
      notePause(item.endpointId, pausedUntil.getTime());
      opts.onPause?.(item.endpointId, pausedUntil);
    }
    const delay = next ? next.getTime() - clock().getTime() : Number.POSITIVE_INFINITY;
    if (next && delay < pollMs && !stopped) {
      // Too soon for the poller to notice in time: wait in memory (bounded by throughput).
      const t = setTimeout(
        () => {
          timers.delete(t);
          const attempts = target.attempts + 1;
          enqueue([
            target.orderingKey
              ? {
                  deliveryId: item.deliveryId,
                  endpointId: item.endpointId,
                  lease: next,
                  ordered: true,
                  attempts,
                }
              : { deliveryId: item.deliveryId, endpointId: item.endpointId, lease: next, attempts },
          ]);
        },
        Math.max(0, delay),
      );
      timers.add(t);
    }
  }

  /**
   * per_resource: after an attempt of a delivery of resource `key` to `endpointId` was recorded,
   * the first pending delivery of that resource (lowest seq), if held back, gets a lease and is
   * queued; its claim checks the rule again. Lost (a crash here), the held delivery is rechecked
   * by the poller once its hold runs out.
   */
  async function release(endpointId: string, key: string): Promise<void> {
    const lease = new Date(clock().getTime() + leaseMs);
    const ids = await releaseOrdered(db, endpointId, key, lease);
    if (ids.length > 0) enqueue(ids.map((id) => ({ deliveryId: id, endpointId, lease, ordered: true })));
  }

  async function poll(): Promise<number> {
    if (stopped || queued >= MEMORY_QUEUE_CAP / 2) return 0;
    const now = clock();
    const lease = new Date(now.getTime() + leaseMs);
    // Deliveries waiting in this process's memory (a slow endpoint's backlog) are left alone.
    const claimed = await claimDue(db, now, lease, [...waitingById.keys()]);
    enqueue(
      claimed.map((r) =>
        r.ordered
          ? { deliveryId: r.id, endpointId: r.endpoint_id, lease, ordered: true, attempts: r.attempts }
          : { deliveryId: r.id, endpointId: r.endpoint_id, lease, attempts: r.attempts },
      ),
    );
    return claimed.length;
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
    paused(endpointId, until) {
      if (!stopped && until.getTime() > clock().getTime()) notePause(endpointId, until.getTime());
    },
    async stop() {
      stopped = true;
      clearInterval(poller);
      for (const t of timers) clearTimeout(t);
      rateSlots.stop();
      await Promise.allSettled([...inflight]);
      await successes.flush();
    },
  };
}
