// ensureStream against the machine's real NATS JetStream, each test on a stream of its own prefix
// (deleted afterwards): the duplicate window of a new stream, and of one an earlier version made
// with its window (5 minutes, then 60 s).
import { randomBytes } from 'node:crypto';
import { connect, type JetStreamManager, type NatsConnection, RetentionPolicy, StorageType } from 'nats';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_NATS_URL } from './config.ts';
import {
  createEventPublisher,
  DUPLICATE_WINDOW_NS,
  ensureStream,
  type StreamNames,
  streamNames,
} from './nats.ts';

let nc: NatsConnection;
let jsm: JetStreamManager;
const made: StreamNames[] = [];

beforeAll(async () => {
  nc = await connect({ servers: process.env.NATS_URL ?? DEFAULT_NATS_URL });
  jsm = await nc.jetstreamManager();
});
afterEach(async () => {
  for (const names of made.splice(0)) await jsm.streams.delete(names.stream).catch(() => {});
});
afterAll(async () => {
  await nc?.close();
});

function fresh(): StreamNames {
  const names = streamNames(`t${randomBytes(6).toString('hex')}`);
  made.push(names);
  return names;
}

describe('ensureStream', () => {
  it('creates the stream with a 15 s duplicate window, and its webhooks consumer', async () => {
    expect(DUPLICATE_WINDOW_NS).toBe(15 * 1e9);
    const names = fresh();
    await ensureStream(jsm, names);
    const info = await jsm.streams.info(names.stream);
    expect(info.config.duplicate_window).toBe(DUPLICATE_WINDOW_NS);
    expect(info.config.retention).toBe(RetentionPolicy.Interest);
    await expect(jsm.consumers.info(names.stream, names.durable('webhooks'))).resolves.toBeDefined();
  });

  it.each([
    ['5-minute', 5 * 60 * 1e9],
    ['60 s', 60 * 1e9],
  ])(
    'shortens the %s window of a stream an earlier version made, keeping its messages',
    async (_, window) => {
      const names = fresh();
      // As the previous ensureStream made it.
      await jsm.streams.add({
        name: names.stream,
        subjects: [names.all],
        storage: StorageType.File,
        retention: RetentionPolicy.Interest,
        max_age: 7 * 24 * 3600 * 1e9,
        duplicate_window: window,
        num_replicas: 1,
      });
      await jsm.consumers.add(names.stream, {
        durable_name: names.durable('webhooks'),
        filter_subject: names.all,
      });
      const js = nc.jetstream();
      await js.publish(names.subject('order.created'), new Uint8Array([1]), { msgID: 'evt_before' });

      await ensureStream(jsm, names);
      const info = await jsm.streams.info(names.stream);
      expect(info.config.duplicate_window).toBe(DUPLICATE_WINDOW_NS);
      expect(info.config.subjects).toEqual([names.all]);
      expect(info.config.retention).toBe(RetentionPolicy.Interest);
      expect(info.state.messages).toBe(1);
      // Still a duplicate window: the same id again is dropped.
      const again = await js.publish(names.subject('order.created'), new Uint8Array([1]), {
        msgID: 'evt_before',
      });
      expect(again.duplicate).toBe(true);

      // A second start finds it current and leaves it as it is.
      await ensureStream(jsm, names);
      expect((await jsm.streams.info(names.stream)).config.duplicate_window).toBe(DUPLICATE_WINDOW_NS);
    },
  );
});

describe('createEventPublisher', () => {
  it('publishes to the stream, acked; a repeated message id is stored once', async () => {
    const names = fresh();
    await ensureStream(jsm, names);
    const publisher = createEventPublisher(nc);
    try {
      const payload = new TextEncoder().encode('one');
      const acks = (await Promise.all(
        Array.from({ length: 50 }, (_, i) =>
          publisher.publish(names.subject('order.created'), payload, { msgID: `evt_${i}` }),
        ),
      )) as Array<{ seq: number; duplicate?: boolean }>;
      expect(new Set(acks.map((a) => a.seq)).size).toBe(50);
      const again = (await publisher.publish(names.subject('order.created'), payload, {
        msgID: 'evt_7',
      })) as {
        duplicate?: boolean;
      };
      expect(again.duplicate).toBe(true);
      expect((await jsm.streams.info(names.stream)).state.messages).toBe(50);
    } finally {
      publisher.close();
    }
  });

  it('fails at once when no stream takes the subject, and after its time-out when nothing acks', async () => {
    const publisher = createEventPublisher(nc);
    const subject = `t${randomBytes(6).toString('hex')}.nowhere`;
    try {
      const t0 = Date.now();
      await expect(publisher.publish(subject, new Uint8Array(1), { msgID: 'x' })).rejects.toThrow(
        /503|no responders/i,
      );
      expect(Date.now() - t0).toBeLessThan(1_000);
      // A subscriber that never answers: no ack, so the publish fails once its time-out passed.
      const silent = nc.subscribe(subject);
      try {
        const t1 = Date.now();
        await expect(
          publisher.publish(subject, new Uint8Array(1), { msgID: 'y', timeout: 300 }),
        ).rejects.toThrow(/no ack in time/);
        expect(Date.now() - t1).toBeGreaterThanOrEqual(290);
      } finally {
        silent.unsubscribe();
      }
    } finally {
      publisher.close();
    }
  });
});
