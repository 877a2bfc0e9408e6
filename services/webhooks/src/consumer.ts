// The durable JetStream consumer: each event is recorded with its deliveries, then acked. A
// failure naks the message so JetStream redelivers it later; nothing is acked before commit.
import { fromBinary } from '@bufbuild/protobuf';
import type { Db } from '@mcs/kit/db';
import type { Logger } from '@mcs/kit/log';
import type { StreamNames } from '@mcs/kit/nats';
import { events } from '@mcs/proto';
import { AckPolicy, DeliverPolicy, type JsMsg, type NatsConnection } from 'nats';
import { type QueuedDelivery, recordEvent } from './domain/fanout.ts';

export interface ConsumerOptions {
  nc: NatsConnection;
  names: StreamNames;
  db: Db;
  log: Logger;
  leaseMs: number;
  onQueued: (items: QueuedDelivery[]) => void;
  /** Messages handled at once. */
  parallel?: number;
}

export async function startConsumer(opts: ConsumerOptions): Promise<{ stop(): Promise<void> }> {
  const { nc, names, log } = opts;
  const durable = names.durable('webhooks');
  const jsm = await nc.jetstreamManager();
  try {
    await jsm.consumers.info(names.stream, durable);
  } catch {
    await jsm.consumers.add(names.stream, {
      durable_name: durable,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      ack_wait: 30_000_000_000, // 30 s in ns
      max_ack_pending: 10_000,
      filter_subject: names.all,
    });
  }
  const consumer = await nc.jetstream().consumers.get(names.stream, durable);
  const parallel = opts.parallel ?? 32;
  const inflight = new Set<Promise<void>>();
  let stopped = false;
  let stopLoop = () => {};

  async function handle(m: JsMsg): Promise<void> {
    let event: events.Event;
    try {
      event = fromBinary(events.EventSchema, m.data);
    } catch (err) {
      log.error({ err, seq: m.seq }, 'undecodable event, terminating it');
      m.term();
      return;
    }
    try {
      const queued = await recordEvent(opts.db, event, m.data, opts.leaseMs);
      m.ack();
      if (queued.length > 0) opts.onQueued(queued);
    } catch (err) {
      log.warn({ err: (err as Error).message, event: event.id }, 'could not record event, will retry');
      m.nak(1_000);
    }
  }

  const loop = (async () => {
    // consume() ends when the connection drops for good or we stop; re-arm until stopped.
    while (!stopped) {
      try {
        const messages = await consumer.consume({ max_messages: parallel * 4 });
        stopLoop = () => messages.stop();
        for await (const m of messages) {
          const p = handle(m).finally(() => inflight.delete(p));
          inflight.add(p);
          if (inflight.size >= parallel) await Promise.race(inflight);
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
      await Promise.allSettled([...inflight]);
    },
  };
}
