// The durable JetStream consumer: the messages ready at a moment are recorded together (their
// events and deliveries in one statement, domain/fanout.ts), then acked. A message holds one
// event, or several (an EventBatch from an outbox relay's fast path). A failure naks them so
// JetStream redelivers them later; nothing is acked before commit.
import { fromBinary } from '@bufbuild/protobuf';
import type { Db } from '@mcs/kit/db';
import type { Logger } from '@mcs/kit/log';
import { eventConsumerConfig, type StreamNames } from '@mcs/kit/nats';
import { OUTBOX_SEQ_HEADER, RESOURCE_VERSION_HEADER } from '@mcs/kit/outbox';
import {
  type Context,
  endSpan,
  extractContext,
  type Span,
  SpanKind,
  trace,
  tracer,
  tracing,
} from '@mcs/kit/tracing';
import { events } from '@mcs/proto';
import type { TextMapGetter } from '@opentelemetry/api';
import type { JsMsg, MsgHdrs, NatsConnection } from 'nats';
import { type IncomingEvent, type QueuedDelivery, recordEvents, resourceKey } from './domain/fanout.ts';

export interface ConsumerOptions {
  nc: NatsConnection;
  names: StreamNames;
  db: Db;
  log: Logger;
  leaseMs: number;
  onQueued: (items: QueuedDelivery[]) => void;
  /** Messages recorded by one statement at most. */
  batch?: number;
  /** Batch statements in flight at once. */
  parallel?: number;
}

const natsHeadersGetter: TextMapGetter<MsgHdrs> = {
  get: (h, key) => h.get(key) || undefined,
  keys: (h) => h.keys(),
};

/** A consumer span per traced message (its publisher's context in the headers), by event id. */
function startSpans(traced: Array<[JsMsg, IncomingEvent]>): Map<string, { span: Span; ctx: Context }> {
  const spans = new Map<string, { span: Span; ctx: Context }>();
  for (const [m, { event }] of traced) {
    if (!m.headers?.get('traceparent')) continue;
    const parent = extractContext(m.headers, natsHeadersGetter);
    const span = tracer().startSpan(
      `process ${m.subject}`,
      {
        kind: SpanKind.CONSUMER,
        attributes: {
          'messaging.system': 'nats',
          'messaging.destination.name': m.subject,
          'mcs.event_id': event.id,
        },
      },
      parent,
    );
    spans.set(event.id, { span, ctx: trace.setSpan(parent, span) });
  }
  return spans;
}

/** A valid outbox seq (per_resource ordering, domain/fanout.ts) as text, else null. */
const validSeq = (v: string | null | undefined): string | null =>
  v && /^[1-9][0-9]{0,17}$/.test(v) ? v : null;

/** A valid resource version (per_resource ordering, domain/fanout.ts), else null. */
const validVersion = (v: number): number | null => (Number.isInteger(v) && v > 0 && v < 1e9 ? v : null);

/** The message's outbox seq (per_resource ordering, domain/fanout.ts), if it carries a valid one. */
function seqOf(m: JsMsg): string | null {
  return validSeq(m.headers?.get(OUTBOX_SEQ_HEADER));
}

/** The message's resource version (per_resource ordering, domain/fanout.ts), if it carries a valid one. */
function versionOf(m: JsMsg): number | null {
  const v = m.headers?.get(RESOURCE_VERSION_HEADER);
  return v && /^[1-9][0-9]{0,8}$/.test(v) ? Number(v) : null;
}

/**
 * The events of one message: one event on its type's subject, or several in an EventBatch on
 * `names.batch` (kit/relay publishNow). Throws when the message cannot be read.
 */
function eventsOf(m: JsMsg, names: StreamNames): IncomingEvent[] {
  if (m.subject !== names.batch) {
    return [
      {
        event: fromBinary(events.EventSchema, m.data),
        payload: m.data,
        seq: seqOf(m),
        version: versionOf(m),
      },
    ];
  }
  const batch = fromBinary(events.EventBatchSchema, m.data);
  return batch.events.map((item) => ({
    event: fromBinary(events.EventSchema, item.event),
    payload: item.event,
    seq: item.outboxSeq > 0n ? validSeq(String(item.outboxSeq)) : null,
    version: validVersion(item.resourceVersion),
  }));
}

export async function startConsumer(opts: ConsumerOptions): Promise<{ stop(): Promise<void> }> {
  const { nc, names, log } = opts;
  const durable = eventConsumerConfig(names).durable_name;
  // main.ts ran ensureStream, which made the stream and this durable consumer.
  const consumer = await nc.jetstream().consumers.get(names.stream, durable);
  const batchMax = opts.batch ?? 256;
  const parallel = opts.parallel ?? 4;
  const inflight = new Set<Promise<void>>();
  /** Messages received and not yet in a batch. */
  let ready: JsMsg[] = [];
  let scheduled = false;
  let stopped = false;
  let stopLoop = () => {};

  /**
   * Per resource, batches commit in the order they were taken: a batch holding an event of a
   * resource that an earlier batch still in flight also holds waits for that batch (and fails
   * with it), so per_resource ordering (delivery/engine.ts) sees an earlier event recorded before
   * a later one. Batches of different resources stay parallel.
   */
  const recording = new Map<string, Promise<void>>();

  async function handle(batch: JsMsg[]): Promise<void> {
    const incoming: IncomingEvent[] = [];
    const messages: JsMsg[] = [];
    /** Messages of one event each, for their spans (a batch carries no trace context). */
    const lone: Array<[JsMsg, IncomingEvent]> = [];
    for (const m of batch) {
      let read: IncomingEvent[];
      try {
        read = eventsOf(m, names);
      } catch (err) {
        log.error({ err, seq: m.seq }, 'undecodable event, terminating it');
        m.term();
        continue;
      }
      for (const e of read) incoming.push(e);
      messages.push(m);
      if (tracing.enabled && m.subject !== names.batch) lone.push([m, read[0]!]);
    }
    if (messages.length === 0) return;
    const spans = tracing.enabled ? startSpans(lone) : undefined;
    const keys = new Set<string>();
    for (const { event } of incoming) {
      const key = resourceKey(event);
      if (key !== null) keys.add(key);
    }
    const before = new Set<Promise<void>>();
    for (const key of keys) {
      const p = recording.get(key);
      if (p) before.add(p);
    }
    const done = (async () => {
      if (before.size > 0) await Promise.all(before);
      const queued = await recordEvents(opts.db, incoming, opts.leaseMs);
      for (const m of messages) m.ack();
      if (spans) {
        for (const q of queued) {
          const traced = q.target ? spans.get(q.target.eventId) : undefined;
          if (traced) q.trace = traced.ctx;
        }
        for (const { span } of spans.values()) endSpan(span);
      }
      if (queued.length > 0) opts.onQueued(queued);
    })();
    for (const key of keys) recording.set(key, done);
    try {
      await done;
    } catch (err) {
      if (spans) for (const { span } of spans.values()) endSpan(span, err);
      log.warn(
        { err: (err as Error).message, events: messages.length },
        'could not record events, will retry',
      );
      for (const m of messages) m.nak(1_000);
    } finally {
      for (const key of keys) if (recording.get(key) === done) recording.delete(key);
    }
  }

  /** Starts batches of what is ready while fewer than `parallel` are in flight. */
  function pump(): void {
    scheduled = false;
    while (!stopped && ready.length > 0 && inflight.size < parallel) {
      const batch = ready.length <= batchMax ? ready : ready.slice(0, batchMax);
      ready = batch === ready ? [] : ready.slice(batchMax);
      const p = handle(batch).finally(() => {
        inflight.delete(p);
        pump();
      });
      inflight.add(p);
    }
  }

  const loop = (async () => {
    // consume() ends when the connection drops for good or we stop; re-arm until stopped.
    while (!stopped) {
      try {
        const messages = await consumer.consume({ max_messages: batchMax * 2 });
        stopLoop = () => messages.stop();
        for await (const m of messages) {
          ready.push(m);
          // The iterator hands over what it holds before the event loop turns: the batch is
          // whatever arrived together, without waiting for more.
          if (!scheduled) {
            scheduled = true;
            setImmediate(pump);
          }
          // Back-pressure: a full batch waits for a free slot before more are taken.
          while (ready.length >= batchMax && !stopped) {
            pump();
            if (ready.length >= batchMax) await Promise.race(inflight);
          }
          if (stopped) break;
        }
      } catch (err) {
        if (!stopped) log.warn({ err: (err as Error).message }, 'consumer stopped, re-arming');
      }
      if (!stopped) await new Promise((r) => setTimeout(r, 500));
    }
  })();

  return {
    async stop() {
      stopped = true;
      stopLoop();
      await loop;
      // Received but not recorded: handed back, so JetStream delivers it again (here or to a replica).
      for (const m of ready) m.nak();
      ready = [];
      await Promise.allSettled([...inflight]);
    },
  };
}
