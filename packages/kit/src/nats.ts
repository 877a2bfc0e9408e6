// JetStream names and set-up shared by the producers (outbox relays) and the consumer (webhooks).

import {
  AckPolicy,
  type ConsumerConfig,
  connect,
  createInbox,
  DeliverPolicy,
  type JetStreamManager,
  type MsgHdrs,
  type NatsConnection,
  headers as natsHeaders,
  RetentionPolicy,
  StorageType,
  type StreamInfo,
} from 'nats';
import { PartStartError, parseDuration } from './config.ts';
import type { Logger } from './log.ts';
import { natsConnectOptions, redact } from './nats-url.ts';

export interface StreamNames {
  stream: string;
  /** Subject of one event type, e.g. `mcs.events.order.created`. */
  subject(type: string): string;
  /** Subject of a batch of events in one message (events.proto EventBatch): `mcs.events.batch`. */
  batch: string;
  /** Wildcard over every event subject. */
  all: string;
  /** Durable consumer name of a service. */
  durable(service: string): string;
}

export function streamNames(prefix: string): StreamNames {
  return {
    stream: `${prefix}_events`.toUpperCase(),
    subject: (type) => `${prefix}.events.${type}`,
    batch: `${prefix}.events.batch`,
    all: `${prefix}.events.>`,
    durable: (service) => `${prefix}_${service}`,
  };
}

/**
 * How often the client PINGs the server; after NATS_MAX_PINGS_OUT unanswered it drops the
 * connection and reconnects. So a server that vanished without a word (a host that died, a
 * dropped NAT entry) is noticed within 20–30 s, where nats.js's defaults (2 min, 2) take up to
 * 6 minutes, all that time without events published or delivered (test/e2e/dead-peer.test.ts).
 */
export const NATS_PING_INTERVAL_MS = 10_000;
export const NATS_MAX_PINGS_OUT = 2;

/**
 * Connects, waiting for a server that is not up yet (a part may start first); while it waits,
 * says so every 5 s (with `log`), so a wrong NATS_URL is not a silent hang.
 */
export async function connectNats(
  url: string,
  name: string,
  log?: Logger,
  opts: { pingIntervalMs?: number } = {},
): Promise<NatsConnection> {
  const started = Date.now();
  const waiting = log
    ? setInterval(
        () =>
          log.warn(
            { nats: redact(url), waitedS: Math.round((Date.now() - started) / 1000) },
            'waiting for NATS (NATS_URL) to answer',
          ),
        5_000,
      )
    : undefined;
  waiting?.unref();
  try {
    return await connect({
      ...natsConnectOptions(url),
      name,
      maxReconnectAttempts: -1,
      reconnectTimeWait: 500,
      waitOnFirstConnect: true,
      pingInterval: opts.pingIntervalMs ?? NATS_PING_INTERVAL_MS,
      maxPingOut: NATS_MAX_PINGS_OUT,
    });
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === 'AUTHORIZATION_VIOLATION' || code === 'AUTHENTICATION_EXPIRED') {
      throw new PartStartError(
        `NATS refused the credentials of NATS_URL (${redact(url)}): ${(err as Error).message}`,
      );
    }
    throw err;
  } finally {
    clearInterval(waiting);
  }
}

/**
 * The durable consumer through which the webhooks service reads every event. It is declared here,
 * beside the stream, because the stream keeps a message only while a consumer has yet to ack it
 * (interest retention): the consumer must exist before the first publish, so every part that
 * publishes creates it with the stream.
 */
export function eventConsumerConfig(names: StreamNames): Partial<ConsumerConfig> & { durable_name: string } {
  return {
    durable_name: names.durable('webhooks'),
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    // WEBHOOK_ACK_WAIT (default 30 s): how long JetStream waits for a webhooks replica to record
    // an event before it hands it to another (one that died or froze with it). In ns.
    ack_wait: parseDuration(process.env.WEBHOOK_ACK_WAIT || '30s') * 1_000_000,
    max_ack_pending: 10_000,
    filter_subject: names.all,
  };
}

/**
 * How long JetStream remembers a message id to drop a second publish of it (ns): 15 s.
 *
 * nats-server keeps every id seen within the window in memory, so the window sets how much memory
 * a steady load holds, and how long that memory keeps growing after a start: at 300 events/s a
 * nats-server with the earlier 60 s window went 17 → 24.6 MiB over two minutes and was still
 * climbing; with 15 s it stays at 19 ± 0.5 MiB from 40 s on (issue 9, target 7).
 *
 * The window is one of three guards against an event stored twice, and the only one that needs
 * time:
 * - The outbox relay republishes an event only when its row outlived a publish: the fast path's
 *   publish failed or timed out (5 s), or the process died between publish and delete; the poll
 *   then takes the row once it is a few seconds old (`minAgeMs`, 3 s): seconds after the first
 *   publish, inside 15 s.
 * - A delete that failed after an acked publish (PostgreSQL gone) is retried by the same
 *   process's poll without publishing again, however long the outage (outbox.ts).
 * - A republish later than the window (a replica's poll after a long PostgreSQL outage, a
 *   restart that took longer than 15 s, an ack lost with a NATS outage), and the poll's republish
 *   of an event that went out in a batch (EventBatch messages carry no id), is stored a second time,
 *   and the webhooks consumer drops that copy: it records events by id in PostgreSQL
 *   (`insert … on conflict do nothing` into webhooks.events) and makes deliveries only for the
 *   events it inserted, so no delivery repeats.
 */
export const DUPLICATE_WINDOW_NS = 15 * 1e9;

/**
 * Creates the event stream and the webhooks service's durable consumer if they are missing; every
 * part calls this at start-up. The stream uses interest retention: an event stays until the
 * consumer acked it (or a week passed, to recover a stopped consumer), then JetStream deletes it,
 * so the server's store and memory stay flat under a steady load instead of growing with every
 * event for a week (measured: +20 % nats-server RSS over a 5-minute soak with limits retention).
 * A stream made by an earlier version with limits retention is kept as it is (JetStream cannot
 * change the retention of a stream); one made with another duplicate window (5 minutes, then
 * 60 s, before) is updated to DUPLICATE_WINDOW_NS, which JetStream allows on a live stream.
 */
export async function ensureStream(jsm: JetStreamManager, names: StreamNames): Promise<void> {
  let existing: StreamInfo | undefined;
  try {
    existing = await jsm.streams.info(names.stream);
  } catch {
    // missing: create it below
  }
  if (existing) {
    if (existing.config.duplicate_window !== DUPLICATE_WINDOW_NS) {
      // Every part runs this at start-up, so several may update at once: each writes the same value.
      await jsm.streams.update(names.stream, { duplicate_window: DUPLICATE_WINDOW_NS });
    }
  } else {
    try {
      await jsm.streams.add({
        name: names.stream,
        subjects: [names.all],
        storage: StorageType.File,
        retention: RetentionPolicy.Interest,
        max_age: 7 * 24 * 3600 * 1e9, // nanoseconds: a week to recover a stopped consumer
        duplicate_window: DUPLICATE_WINDOW_NS,
        // 3 on a JetStream cluster (deploy/nats), so a node may die without losing events.
        num_replicas: Number(process.env.NATS_STREAM_REPLICAS ?? 1),
      });
    } catch (err) {
      // Another process created it between our two calls.
      await jsm.streams.info(names.stream).catch(() => {
        throw err;
      });
    }
  }
  const consumer = eventConsumerConfig(names);
  try {
    await jsm.consumers.info(names.stream, consumer.durable_name);
  } catch {
    try {
      await jsm.consumers.add(names.stream, consumer);
    } catch (err) {
      // Another process created it between our two calls.
      await jsm.consumers.info(names.stream, consumer.durable_name).catch(() => {
        throw err;
      });
    }
  }
}

/** Core NATS subject on which the accounts service announces revoked key ids to every gateway. */
export function keyRevocationSubject(prefix: string): string {
  return `${prefix}.keys.revoked`;
}

/** Core NATS subject on which the accounts service announces an owner's new password (the account id). */
export function ownerPasswordSubject(prefix: string): string {
  return `${prefix}.owners.password_set`;
}

/** What the outbox relay needs of JetStream: a publish acked by the stream (JetStreamClient has it). */
export interface EventPublisher {
  publish(
    subject: string,
    payload: Uint8Array,
    /** msgID: the Nats-Msg-Id JetStream drops a repeat of (within DUPLICATE_WINDOW_NS). */
    opts: { msgID?: string; timeout?: number; headers?: MsgHdrs },
  ): Promise<unknown>;
}

/** A publish the stream refused or did not ack in time. */
export class PublishError extends Error {}

/**
 * JetStream publishing on core NATS: each event is a plain PUB whose reply subject is one of this
 * process's inbox (`<inbox>.<n>`), and one subscription on `<inbox>.*` receives every stream ack.
 * The JetStream client's publish is a request per event (a subscription entry, a timer and a
 * NatsError built up front for its stack); under `pnpm bench ingest` that was about 4 % of the
 * commerce service's CPU. The stream answers the same acks either way: `{stream, seq, duplicate}`
 * or `{error}`, and the server says "no responders" (503) when no stream takes the subject.
 * Acks not back within `timeout` (default 5 s) fail, swept twice a second.
 */
export function createEventPublisher(nc: NatsConnection): EventPublisher & { close(): void } {
  const inbox = createInbox();
  const prefix = `${inbox}.`;
  interface Waiting {
    resolve: (ack: unknown) => void;
    reject: (err: Error) => void;
    deadline: number;
  }
  /** By reply token, in the order published; equal time-outs keep it sorted by deadline too. */
  const waiting = new Map<string, Waiting>();
  let next = 0;
  const decoder = new TextDecoder();

  nc.subscribe(`${inbox}.*`, {
    callback: (err, msg) => {
      if (err) return;
      const w = waiting.get(msg.subject.slice(prefix.length));
      if (!w) return; // timed out already
      waiting.delete(msg.subject.slice(prefix.length));
      if (msg.headers?.hasError) {
        w.reject(new PublishError(`JetStream publish: ${msg.headers.code} ${msg.headers.description}`));
        return;
      }
      let ack: { error?: { description?: string } };
      try {
        ack = JSON.parse(decoder.decode(msg.data));
      } catch {
        w.reject(new PublishError('JetStream publish: unreadable ack'));
        return;
      }
      if (ack.error) w.reject(new PublishError(`JetStream publish: ${ack.error.description ?? 'refused'}`));
      else w.resolve(ack);
    },
  });

  const sweep = setInterval(() => {
    const now = Date.now();
    for (const [token, w] of waiting) {
      if (w.deadline > now) break;
      waiting.delete(token);
      w.reject(new PublishError('JetStream publish: no ack in time'));
    }
  }, 500);
  sweep.unref();

  return {
    publish(subject, payload, opts) {
      return new Promise((resolve, reject) => {
        const token = (next++).toString(36);
        let h = opts.headers;
        if (opts.msgID !== undefined) {
          h ??= natsHeaders();
          h.set('Nats-Msg-Id', opts.msgID);
        }
        try {
          nc.publish(subject, payload, h ? { reply: prefix + token, headers: h } : { reply: prefix + token });
        } catch (err) {
          reject(err as Error);
          return;
        }
        waiting.set(token, { resolve, reject, deadline: Date.now() + (opts.timeout ?? 5_000) });
      });
    },
    close() {
      clearInterval(sweep);
      for (const w of waiting.values()) w.reject(new PublishError('JetStream publish: publisher closed'));
      waiting.clear();
    },
  };
}
