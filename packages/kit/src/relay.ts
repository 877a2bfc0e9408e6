// The outbox relay (docs/design.md "Events and their guarantees"): publishes the events writes
// committed to the outbox (outbox.ts) to JetStream (alone with the event id as Nats-Msg-Id, so
// JetStream drops duplicates, or several in one EventBatch message), then deletes their rows.
//
// Two ways out of the outbox:
// - The fast path. A write run under `relay.publishAfter` collects the events its statements
//   wrote (appendEvent, insertWithEvent) in memory; once the write resolved, i.e. committed,
//   the relay publishes them straight from memory, without reading them back (at the end of the
//   turn, or under load after a short linger: linger.ts), and deletes their rows in batches (one
//   `delete … where event_id = any($1)` per short window). A publish that fails leaves its row
//   for the poll.
// - The poll (outbox-poll.ts). Rows older than `minAgeMs`, which no fast path published, are
//   published and deleted by a poll that several replicas share.
// A crash between publish and delete only republishes; a delete that failed (PostgreSQL gone) is
// retried by the poll without a second publish.
import { create, toBinary } from '@bufbuild/protobuf';
import { events } from '@mcs/proto';
import { headers as natsHeaders } from 'nats';
import type pg from 'pg';
import { createLinger } from './linger.ts';
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
import { startOutboxPoll } from './outbox-poll.ts';
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
   * Under load (at least linger.ts LINGER_ABOVE_PER_SEC events a second), how long the fast path holds
   * events after a publish to send the next ones together (default 10 ms; 0: never). Below that
   * rate every event goes out at once.
   */
  lingerMs?: number;
  /**
   * Under load, how long after a publish the next one may wait for linger.ts LINGER_BATCH_EVENTS events
   * when fewer came within `lingerMs` (default 25 ms; at most `lingerMs` means no wait past it).
   */
  lingerMaxMs?: number;
}

/** Events in one batch message at most (Relay publishNow), and its bytes: far below NATS's 1 MiB max_payload. */
const BATCH_MAX_EVENTS = 256;
const BATCH_MAX_BYTES = 256 * 1024;
/** Bytes a batch adds per event around its payload (tags, lengths, seq, version), rounded up. */
const BATCH_ITEM_OVERHEAD = 32;

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

  const poll = startOutboxPoll({
    pool,
    table,
    js,
    names,
    log,
    pollMs: opts.pollMs ?? 1_000,
    minAgeMs: opts.minAgeMs ?? 3_000,
    batch,
  });

  // ---- the fast path: publish from memory, delete in batches --------------------------------
  const inFlight = new Set<Promise<void>>();
  let toDelete: string[] = [];
  let deleteTimer: NodeJS.Timeout | null = null;
  const deleting = new Set<Promise<void>>();
  /** Failed fast publishes since the last success: logged once per run of failures. */
  let fastFailures = 0;

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
          poll.ackedNotDeleted(ids);
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

  /** Rows to publish at the end of this turn or, under load, after a linger (linger.ts). */
  const linger = createLinger<OutboxRow>({
    lingerMs: opts.lingerMs ?? 10,
    lingerMaxMs: opts.lingerMaxMs ?? 25,
    flush: publishNow,
  });

  function publish(rows: readonly OutboxRow[]): void {
    if (tracing.enabled) {
      const ctx = context.active();
      for (const row of rows) writtenIn.set(row, ctx);
    }
    linger.add(rows);
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
    if (collected.unverified.length > 0) poll.verify(collected.unverified);
  }

  function publishAfter<T>(write: () => Promise<T>): Promise<T> {
    return collectEvents(write, written);
  }

  return {
    publishAfter,
    publish,
    wake: poll.wake,
    async stop() {
      for (const remove of unregister) remove();
      // What committed last still goes out now rather than waiting for the next start's poll.
      publishNow(linger.take());
      stopped = true;
      await poll.stop();
      await Promise.allSettled([...inFlight]);
      flushDeletes();
      await Promise.allSettled([...deleting]);
    },
  };
}
