// The outbox relay (docs/design.md "Events and their guarantees"): publishes the events writes
// committed to the outbox (outbox.ts) to JetStream (alone with the event id as Nats-Msg-Id, so
// JetStream drops duplicates, or several in one EventBatch message), then deletes their rows.
//
// Two ways out of the outbox:
// - The fast path. A write run under `relay.publishAfter` collects the events its statements
//   wrote (appendEvent, insertWithEvent) in memory; once the write resolved, i.e. committed,
//   the relay publishes them straight from memory, without reading them back, and deletes their
//   rows in batches (one `delete … where event_id = any($1)` per short window). A publish that
//   fails leaves its row for the poll.
// - The poll. Rows older than `minAgeMs` (a few seconds: left by a crash, a failed publish, or a
//   replica that did not hand them over) are published by a fallback poll that takes them with
//   FOR UPDATE SKIP LOCKED, so several replicas share them. Fresh rows are left to the fast path
//   of the process that wrote them, so poll and fast path do not race for them; when they do
//   meet (a row older than minAgeMs still in flight), the same event is published twice and
//   JetStream drops the second.
// A crash between publish and delete only republishes; a delete that failed (PostgreSQL gone) is
// retried by the poll without a second publish.
import { create, toBinary } from '@bufbuild/protobuf';
import { events } from '@mcs/proto';
import { headers as natsHeaders } from 'nats';
import type pg from 'pg';
import type { Logger } from './log.ts';
import { scrapedGauge } from './metrics.ts';
import type { EventPublisher, StreamNames } from './nats.ts';
import {
  type CollectedEvents,
  collectEvents,
  OUTBOX_SEQ_HEADER,
  type OutboxRow,
  RESOURCE_VERSION_HEADER,
} from './outbox.ts';
import {
  type Context,
  context,
  endSpan,
  injectHeaders,
  type Span,
  SpanKind,
  trace,
  tracer,
  tracing,
} from './tracing.ts';

/** With tracing on: the context of the write that committed a row, for its publish span. */
const writtenIn = new WeakMap<OutboxRow, Context>();

export interface RelayOptions {
  pool: pg.Pool;
  /** Schema that holds the outbox table. */
  schema: string;
  /** JetStream publishing: kit/nats createEventPublisher (or a JetStreamClient). */
  js: EventPublisher;
  names: StreamNames;
  log: Logger;
  /** How often the fallback poll looks for rows nobody published. */
  pollMs?: number;
  /**
   * The poll takes only rows at least this old (default 3 s), leaving fresh ones to the fast
   * path of the process that wrote them: what a crash, a failed publish or a write that did not
   * hand its events over costs in latency.
   */
  minAgeMs?: number;
  /** Rows per poll round, and outbox rows deleted per statement. */
  batch?: number;
  /** How long published events wait to be deleted together (default 50 ms). */
  deleteWindowMs?: number;
  /** Fast-path publishes awaiting their JetStream ack at most; past it, rows wait for the poll. */
  maxInFlight?: number;
  /**
   * Under load (at least LINGER_ABOVE_PER_SEC events a second), how long the fast path holds
   * events after a publish to send the next ones together (default 10 ms; 0: never). Below that
   * rate every event goes out at once.
   */
  lingerMs?: number;
  /**
   * Under load, how long after a publish the next one may wait for LINGER_BATCH_EVENTS events
   * when fewer came within `lingerMs` (default 25 ms; at most `lingerMs` means no wait past it).
   */
  lingerMaxMs?: number;
}

/**
 * The event rate from which the relay lingers (RelayOptions.lingerMs): 250/s, where a 10 ms
 * linger gathers 2.5 events or more per publish, i.e. per JetStream message. (It was 500/s; at
 * 420 orders/s, between the two, 250 cut nats-server's CPU per order from 0.36–0.40 to
 * 0.19–0.21 ms and the webhooks service's from 0.82–0.84 to 0.60–0.67, docs/design.md "Targets".)
 */
export const LINGER_ABOVE_PER_SEC = 250;
/**
 * The events a lingering publish waits for, up to RelayOptions.lingerMaxMs: what a 10 ms linger
 * gathers at 1,100–1,200 orders/s, where a longer linger bought nothing more. Every message
 * costs the same downstream whatever it holds (nats-server stores, hands over and takes an ack
 * for it; the webhooks service records it in one statement, commits and acks it): at 600
 * orders/s a 10 ms linger sent 6 events a message, and waiting up to 20 ms for 12 cut the
 * machine's CPU per order by 8–12 % (3.15–3.29 → 2.88–2.91 ms: nats-server 0.16 → 0.09,
 * webhooks 0.35–0.36 → 0.28–0.29), docs/design.md "Targets".
 */
export const LINGER_BATCH_EVENTS = 12;
/** Events in one batch message at most (Relay publishNow), and its bytes: far below NATS's 1 MiB max_payload. */
const BATCH_MAX_EVENTS = 256;
const BATCH_MAX_BYTES = 256 * 1024;
/** Bytes a batch adds per event around its payload (tags, lengths, seq, version), rounded up. */
const BATCH_ITEM_OVERHEAD = 32;
/** The window over which the relay counts its events to tell the rate. */
const RATE_WINDOW_MS = 100;

export interface Relay {
  /**
   * Runs `write` and, once it resolved, publishes the events it committed (appendEvent,
   * insertWithEvent, eventWritten): from memory those written outside a transaction or in one
   * opened by `transaction()`; those of other transactions after reading them back (see
   * CollectedEvents). Returns the write's result without waiting for the publish. If `write` fails,
   * nothing is published: rows that committed anyway (an unknown commit outcome, a failure after
   * the commit) are left to the poll. Inside another publishAfter it simply runs `write`.
   */
  publishAfter<T>(write: () => Promise<T>): Promise<T>;
  /** Publishes events whose rows are known to be committed, e.g. collected by another means. */
  publish(rows: readonly OutboxRow[]): void;
  /**
   * Publishes every row now, however fresh: for writes that committed events without handing
   * them over. The fast path makes this unnecessary.
   */
  wake(): void;
  stop(): Promise<void>;
}

export function startRelay(opts: RelayOptions): Relay {
  const { pool, js, names, log } = opts;
  const batch = opts.batch ?? 256;
  const minAgeMs = opts.minAgeMs ?? 3_000;
  const deleteWindowMs = opts.deleteWindowMs ?? 50;
  const maxInFlight = opts.maxInFlight ?? 4_096;
  const table = `"${opts.schema}".outbox`;
  let stopped = false;

  // Backlog and the age of its oldest event, read when Prometheus scrapes (kit/metrics).
  let backlog: Promise<{ n: number; age: number }> | undefined;
  const readBacklog = () => {
    backlog ??= pool
      .query<{ n: number; age: number }>(
        `select count(*)::int as n,
                coalesce(extract(epoch from now() - min(created_at)), 0)::float8 as age from ${table}`,
      )
      .then((r) => r.rows[0]!)
      .finally(() => {
        backlog = undefined;
      });
    return backlog;
  };
  const unregister = [
    scrapedGauge({
      name: 'mcs_outbox_backlog_events',
      help: 'Events committed to the outbox and not yet published to JetStream, by schema.',
      labelNames: ['schema'],
      minIntervalMs: 5_000,
      read: async () => [{ labels: { schema: opts.schema }, value: (await readBacklog()).n }],
    }),
    scrapedGauge({
      name: 'mcs_outbox_oldest_event_age_seconds',
      help: 'Age of the oldest event still in the outbox (0 when empty), by schema.',
      labelNames: ['schema'],
      minIntervalMs: 5_000,
      read: async () => [{ labels: { schema: opts.schema }, value: (await readBacklog()).age }],
    }),
  ];

  // ---- the fast path: publish from memory, delete in batches --------------------------------
  const inFlight = new Set<Promise<void>>();
  let toDelete: string[] = [];
  let deleteTimer: NodeJS.Timeout | null = null;
  const deleting = new Set<Promise<void>>();
  const verifying = new Set<Promise<void>>();
  /** Failed fast publishes since the last success: logged once per run of failures. */
  let fastFailures = 0;
  /**
   * Events JetStream acked whose row this process could not delete (PostgreSQL gone between the
   * publish and the delete). This process's poll deletes their rows without publishing them
   * again: after an outage longer than the stream's duplicate window (15 s, nats.ts) a republish
   * would be stored a second time. Bounded: a republish is harmless (the webhooks consumer
   * records an event id once), only wasteful.
   */
  const ackedNotDeleted = new Set<string>();
  const MAX_ACKED_NOT_DELETED = 10_000;

  function flushDeletes(): void {
    if (deleteTimer) clearTimeout(deleteTimer);
    deleteTimer = null;
    if (toDelete.length === 0) return;
    const ids = toDelete;
    toDelete = [];
    const p = pool
      .query({
        name: `mcs_outbox_delete_${opts.schema}`,
        text: `delete from ${table} where event_id = any($1::text[])`,
        values: [ids],
      })
      .then(
        () => {},
        // Published but still in the outbox: this process's poll deletes them once they age,
        // without publishing them again (another replica's poll may republish them: JetStream,
        // within its duplicate window, or the consumer's idempotent record drops the repeat).
        (err: Error) => {
          log.warn({ err: err.message, rows: ids.length }, 'outbox relay: delete failed');
          for (const id of ids) {
            if (ackedNotDeleted.size >= MAX_ACKED_NOT_DELETED) break;
            ackedNotDeleted.add(id);
          }
        },
      )
      .finally(() => deleting.delete(p));
    deleting.add(p);
  }

  function published(eventId: string): void {
    toDelete.push(eventId);
    if (toDelete.length >= batch) flushDeletes();
    else if (!deleteTimer) deleteTimer = setTimeout(flushDeletes, deleteWindowMs);
  }

  /**
   * Rows to publish at the end of this turn of the event loop: every write that committed in
   * the same turn goes out in one socket write (nats.js flushes what was queued in one tick
   * together), instead of a write per event (15 % of commerce's CPU under load).
   *
   * Under load the relay lingers: from LINGER_ABOVE_PER_SEC events a second, a publish waits
   * until `lingerMs` after the previous one, so the events of those milliseconds go out
   * together, in one EventBatch message. Everything downstream then works in batches too:
   * JetStream stores and hands over one message, which the webhooks consumer records in one
   * statement and acks once. At 1,100 orders/s on 2 cores a 10 ms linger cut the webhooks process's CPU per
   * order by 40 %, its PostgreSQL statements' by 60 % and nats-server's by 65 %, for at most
   * 10 ms more between commit and delivery (docs/design.md "Targets"). Below that rate
   * nothing waits. Where fewer than LINGER_BATCH_EVENTS came in those milliseconds (from 250
   * to about 1,200 events a second), the publish waits on for them, up to `lingerMaxMs` after
   * the previous one (Kafka's producer does the same with batch.size and linger.ms).
   */
  let pendingPublish: OutboxRow[] = [];
  let publishScheduled = false;
  let publishTimer: NodeJS.Timeout | undefined;
  /** The scheduled publish waits past `lingerMs` for its batch to fill. */
  let waitingForBatch = false;
  const lingerMs = opts.lingerMs ?? 10;
  const lingerMaxMs = Math.max(lingerMs, opts.lingerMaxMs ?? 25);
  let lastPublishAt = Number.NEGATIVE_INFINITY;
  /** Events handed to publish() in the current and the previous RATE_WINDOW_MS. */
  let windowStart = 0;
  let windowCount = 0;
  let previousCount = 0;

  /** Counts `n` events and tells whether the rate calls for lingering. */
  function underLoad(now: number, n: number): boolean {
    if (now - windowStart >= RATE_WINDOW_MS) {
      previousCount = now - windowStart < 2 * RATE_WINDOW_MS ? windowCount : 0;
      windowStart = now;
      windowCount = 0;
    }
    windowCount += n;
    return Math.max(previousCount, windowCount) * (1000 / RATE_WINDOW_MS) >= LINGER_ABOVE_PER_SEC;
  }

  const flushPublish = () => {
    publishScheduled = false;
    waitingForBatch = false;
    publishTimer = undefined;
    lastPublishAt = performance.now();
    const rows = pendingPublish;
    pendingPublish = [];
    publishNow(rows);
  };

  function publish(rows: readonly OutboxRow[]): void {
    if (tracing.enabled) {
      const ctx = context.active();
      for (const row of rows) writtenIn.set(row, ctx);
    }
    for (const row of rows) pendingPublish.push(row);
    const now = performance.now();
    const loaded = lingerMs > 0 && underLoad(now, rows.length);
    const full = pendingPublish.length >= LINGER_BATCH_EVENTS;
    if (publishScheduled) {
      // Its batch is there: it goes once `lingerMs` passed since the previous publish.
      if (waitingForBatch && full) {
        waitingForBatch = false;
        schedulePublish(lastPublishAt + lingerMs - now);
      }
      return;
    }
    publishScheduled = true;
    waitingForBatch = loaded && !full && lingerMaxMs > lingerMs;
    schedulePublish(loaded ? lastPublishAt + (waitingForBatch ? lingerMaxMs : lingerMs) - now : 0);
  }

  function schedulePublish(wait: number): void {
    if (publishTimer) clearTimeout(publishTimer);
    publishTimer = undefined;
    if (wait > 0) publishTimer = setTimeout(flushPublish, wait);
    else setImmediate(flushPublish);
  }

  /**
   * Publishes rows that committed. Several go out as ONE message (events.proto EventBatch, on
   * `names.batch`): JetStream stores, delivers and acks one message for them, and the webhooks
   * consumer acks it once. A single row, and every row with tracing on (its span's context
   * travels in its own headers), goes alone on its type's subject with its event id as
   * Nats-Msg-Id. A batch has no Nats-Msg-Id: a batch is published once, and should its rows be
   * published again (the poll, after a publish that timed out) the consumer records an event id
   * once (kit/nats DUPLICATE_WINDOW_NS).
   */
  function publishNow(rows: readonly OutboxRow[]): void {
    if (rows.length === 1 || tracing.enabled) {
      for (const row of rows) publishOne(row);
      return;
    }
    let start = 0;
    let bytes = 0;
    for (let i = 0; i < rows.length; i++) {
      const size = rows[i]!.payload.length + BATCH_ITEM_OVERHEAD;
      if (i > start && (i - start >= BATCH_MAX_EVENTS || bytes + size > BATCH_MAX_BYTES)) {
        publishBatch(rows.slice(start, i));
        start = i;
        bytes = 0;
      }
      bytes += size;
    }
    publishBatch(start === 0 ? rows : rows.slice(start));
  }

  /** Tracks a fast-path publish of `rows`: on JetStream's ack they are deleted; on failure the poll takes them. */
  function track(publishing: Promise<unknown>, rows: readonly OutboxRow[], span?: Span): void {
    const p = publishing
      .then(
        () => {
          fastFailures = 0;
          if (span) endSpan(span);
          for (const row of rows) published(row.eventId);
        },
        (err: Error) => {
          if (span) endSpan(span, err);
          if (fastFailures++ === 0)
            log.warn({ err: err.message }, 'outbox relay: publish failed, the poll will retry');
        },
      )
      .finally(() => inFlight.delete(p));
    inFlight.add(p);
  }

  function publishBatch(rows: readonly OutboxRow[]): void {
    if (rows.length === 1) {
      publishOne(rows[0]!);
      return;
    }
    // Stopped, or too many awaiting acks (JetStream unreachable): the rows wait for the poll.
    if (stopped || inFlight.size >= maxInFlight) return;
    const batch = create(events.EventBatchSchema, {
      events: rows.map((row) => ({
        event: row.payload,
        outboxSeq: row.outboxSeq === undefined ? 0n : BigInt(row.outboxSeq),
        resourceVersion: row.resourceVersion ?? 0,
      })),
    });
    track(js.publish(names.batch, toBinary(events.EventBatchSchema, batch), { timeout: 5_000 }), rows);
  }

  function publishOne(row: OutboxRow): void {
    // Stopped, or too many awaiting acks (JetStream unreachable): the row waits for the poll.
    if (stopped || inFlight.size >= maxInFlight) return;
    const subject = names.subject(row.type);
    // Traced: a producer span, child of the write's, whose context travels in the message's
    // headers to the consumer (webhooks).
    const parent = tracing.enabled ? writtenIn.get(row) : undefined;
    const span = parent
      ? tracer().startSpan(
          `publish ${subject}`,
          {
            kind: SpanKind.PRODUCER,
            attributes: {
              'messaging.system': 'nats',
              'messaging.destination.name': subject,
              'mcs.event_id': row.eventId,
            },
          },
          parent,
        )
      : undefined;
    let h: ReturnType<typeof natsHeaders> | undefined;
    if (row.outboxSeq !== undefined) {
      h = natsHeaders();
      h.set(OUTBOX_SEQ_HEADER, row.outboxSeq);
    }
    if (row.resourceVersion !== undefined) {
      h ??= natsHeaders();
      h.set(RESOURCE_VERSION_HEADER, String(row.resourceVersion));
    }
    if (span && parent) {
      const carrier: Record<string, string> = {};
      injectHeaders(carrier, trace.setSpan(parent, span));
      h ??= natsHeaders();
      for (const [k, v] of Object.entries(carrier)) h.set(k, v);
    }
    track(
      js.publish(
        subject,
        row.payload,
        h ? { msgID: row.eventId, timeout: 5_000, headers: h } : { msgID: row.eventId, timeout: 5_000 },
      ),
      [row],
      span,
    );
  }

  /** What a write under publishAfter committed: published now, or read back first (verify). */
  function written(collected: CollectedEvents): void {
    if (collected.committed.length > 0) publish(collected.committed);
    if (collected.unverified.length > 0) verify(collected.unverified);
  }

  function publishAfter<T>(write: () => Promise<T>): Promise<T> {
    return collectEvents(write, written);
  }

  /** Publishes those of `ids` that exist, i.e. committed; a lost race with the poll skips them. */
  function verify(ids: string[]): void {
    if (stopped) return;
    const p: Promise<void> = drainOnce(0, ids)
      .then(
        () => {},
        (err: Error) => log.warn({ err: err.message }, 'outbox relay: publish failed, the poll will retry'),
      )
      .finally(() => verifying.delete(p));
    verifying.add(p);
  }

  // ---- the poll: rows nobody published --------------------------------------------------
  let running: Promise<void> | null = null;
  let again = false;
  /** The next drain takes fresh rows too (wake()). */
  let all = false;
  let failures = 0;

  /** One round of the poll: rows at least `minAge` old (or the rows of `ids`), oldest first. */
  async function drainOnce(minAge: number, ids?: string[]): Promise<number> {
    const client = await pool.connect();
    try {
      await client.query('begin');
      const { rows } = await client.query<{
        seq: number;
        event_id: string;
        type: string;
        payload: Buffer;
        resource_version: number | null;
      }>(
        ids
          ? `select seq, event_id, type, payload, resource_version from ${table} where event_id = any($2::text[])
              order by seq limit $1 for update skip locked`
          : `select seq, event_id, type, payload, resource_version from ${table}
              where created_at <= now() - make_interval(secs => $2)
              order by seq limit $1 for update skip locked`,
        [ids ? ids.length : batch, ids ?? minAge / 1000],
      );
      if (rows.length > 0) {
        await Promise.all(
          rows
            .filter((r) => !ackedNotDeleted.has(r.event_id))
            .map((r) => {
              const h = natsHeaders();
              h.set(OUTBOX_SEQ_HEADER, String(r.seq));
              if (r.resource_version !== null) h.set(RESOURCE_VERSION_HEADER, String(r.resource_version));
              return js.publish(names.subject(r.type), r.payload, {
                msgID: r.event_id,
                timeout: 5_000,
                headers: h,
              });
            }),
        );
        await client.query(`delete from ${table} where seq = any($1::bigint[])`, [rows.map((r) => r.seq)]);
      }
      await client.query('commit');
      for (const r of rows) ackedNotDeleted.delete(r.event_id);
      return rows.length;
    } catch (err) {
      await client.query('rollback').catch(() => {});
      throw err;
    } finally {
      client.release();
    }
  }

  /** One cheap statement when there is nothing to do, the common case. */
  async function anyAged(minAge: number): Promise<boolean> {
    const { rows } = await pool.query(
      `select 1 from ${table} where created_at <= now() - make_interval(secs => $1) limit 1`,
      [minAge / 1000],
    );
    return rows.length > 0;
  }

  async function drain(): Promise<void> {
    do {
      again = false;
      const minAge = all ? 0 : minAgeMs;
      all = false;
      try {
        if (await anyAged(minAge)) while (!stopped && (await drainOnce(minAge)) === batch) {}
        failures = 0;
      } catch (err) {
        failures++;
        log.warn({ err: (err as Error).message, failures }, 'outbox relay: publish failed, will retry');
        await new Promise((r) => setTimeout(r, Math.min(5_000, 100 * 2 ** failures)));
        again = true;
      }
    } while (again && !stopped);
  }

  function poll(): void {
    if (stopped) return;
    if (running) {
      again = true;
      return;
    }
    running = drain().finally(() => {
      running = null;
    });
  }

  function wake(): void {
    all = true;
    poll();
  }

  const timer = setInterval(poll, opts.pollMs ?? 1_000);
  timer.unref();
  poll();

  return {
    publishAfter,
    publish,
    wake,
    async stop() {
      for (const remove of unregister) remove();
      // What committed last still goes out now rather than waiting for the next start's poll.
      if (publishTimer) clearTimeout(publishTimer);
      const last = pendingPublish;
      pendingPublish = [];
      publishNow(last);
      stopped = true;
      clearInterval(timer);
      await running;
      await Promise.allSettled([...inFlight, ...verifying]);
      flushDeletes();
      await Promise.allSettled([...deleting]);
    },
  };
}
