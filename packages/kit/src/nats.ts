// JetStream names and set-up shared by the producers (outbox relays) and the consumer (webhooks).
import { connect, type JetStreamManager, type NatsConnection, RetentionPolicy, StorageType } from 'nats';

export interface StreamNames {
  stream: string;
  /** Subject of one event type, e.g. `mcs.events.order.created`. */
  subject(type: string): string;
  /** Wildcard over every event subject. */
  all: string;
  /** Durable consumer name of a service. */
  durable(service: string): string;
}

export function streamNames(prefix: string): StreamNames {
  return {
    stream: `${prefix}_events`.toUpperCase(),
    subject: (type) => `${prefix}.events.${type}`,
    all: `${prefix}.events.>`,
    durable: (service) => `${prefix}_${service}`,
  };
}

export async function connectNats(url: string, name: string): Promise<NatsConnection> {
  return connect({
    servers: url,
    name,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 500,
    waitOnFirstConnect: true,
  });
}

/** Creates the event stream if it is missing; every part calls this at start-up. */
export async function ensureStream(jsm: JetStreamManager, names: StreamNames): Promise<void> {
  try {
    await jsm.streams.info(names.stream);
    return;
  } catch {
    // missing: create it below
  }
  try {
    await jsm.streams.add({
      name: names.stream,
      subjects: [names.all],
      storage: StorageType.File,
      retention: RetentionPolicy.Limits,
      max_age: 7 * 24 * 3600 * 1e9, // nanoseconds: a week to recover a stopped consumer
      duplicate_window: 5 * 60 * 1e9,
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

/** Core NATS subject on which the accounts service announces revoked key ids to every gateway. */
export function keyRevocationSubject(prefix: string): string {
  return `${prefix}.keys.revoked`;
}
