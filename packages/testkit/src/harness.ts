// What a producing service's tests need around its routes: a migrated database of its own, a
// JetStream namespace of its own, the service's real outbox relay into it, and a probe that
// reads back every event the relay published.
import { type DescService, fromBinary } from '@bufbuild/protobuf';
import { type Client, type ConnectRouter, createClient, createRouterTransport } from '@connectrpc/connect';
import { CALLER_HEADERS } from '@mcs/kit/caller';
import type { Database } from '@mcs/kit/db';
import { createLogger } from '@mcs/kit/log';
import {
  connectNats,
  createEventPublisher,
  ensureStream,
  type StreamNames,
  streamNames,
} from '@mcs/kit/nats';
import { type Relay, startRelay } from '@mcs/kit/relay';
import { type ServerHandle, startConnectServer } from '@mcs/kit/server';
import { events } from '@mcs/proto';
import type { NatsConnection } from 'nats';
import { createTestNats, type TestNats } from './nats.ts';
import { freshDatabase, grpcClient, type MigratedDatabase } from './service.ts';

export interface EventProbe {
  /** Every event published so far, in stream order. */
  received: events.Event[];
  /** The first event (already received or still to come) that `match` accepts. */
  waitFor(match: (e: events.Event) => boolean, timeoutMs?: number): Promise<events.Event>;
  /** Events whose data is the resource `id`, in stream order. */
  about(id: string): events.Event[];
  close(): Promise<void>;
}

/** Reads the whole stream from its start with an ordered (ephemeral) consumer, a batch's events one by one. */
export async function startEventProbe(nc: NatsConnection, names: StreamNames): Promise<EventProbe> {
  const consumer = await nc.jetstream().consumers.get(names.stream);
  const messages = await consumer.consume();
  const received: events.Event[] = [];
  const waiters = new Set<() => void>();
  const loop = (async () => {
    for await (const m of messages) {
      // One event, or several in one EventBatch (kit/relay).
      if (m.subject === names.batch) {
        for (const item of fromBinary(events.EventBatchSchema, m.data).events)
          received.push(fromBinary(events.EventSchema, item.event));
      } else received.push(fromBinary(events.EventSchema, m.data));
      for (const w of waiters) w();
    }
  })();
  return {
    received,
    waitFor(match, timeoutMs = 10_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const hit = received.find(match);
          if (!hit) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve(hit);
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`no matching event among ${received.length} after ${timeoutMs} ms`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    about(id) {
      return received.filter((e) => (e.data.value as { id?: string } | undefined)?.id === id);
    },
    async close() {
      messages.stop();
      await loop.catch(() => {});
    },
  };
}

export interface ServiceHarness {
  db: MigratedDatabase;
  nats: TestNats;
  nc: NatsConnection;
  relay: Relay;
  events: EventProbe;
  /** Rows still waiting in the service's outbox. */
  outboxSize(): Promise<number>;
  close(): Promise<void>;
}

export async function startServiceHarness(opts: {
  migrate: (db: Database) => Promise<void>;
  /** The service's schema, which holds its outbox. */
  schema: string;
}): Promise<ServiceHarness> {
  const db = await freshDatabase(opts.migrate, opts.schema);
  const nats = createTestNats();
  const nc = await connectNats(nats.url, `${opts.schema}-test`);
  const names = streamNames(nats.prefix);
  await ensureStream(await nc.jetstreamManager(), names);
  const relay = startRelay({
    pool: db.pool,
    schema: opts.schema,
    js: createEventPublisher(nc),
    names,
    log: createLogger(`${opts.schema}-test`, 'silent'),
    pollMs: 200,
  });
  const probe = await startEventProbe(nc, names);
  return {
    db,
    nats,
    nc,
    relay,
    events: probe,
    async outboxSize() {
      const { rows } = await db.pool.query<{ n: number }>(
        `select count(*)::int as n from "${opts.schema}".outbox`,
      );
      return rows[0]!.n;
    },
    async close() {
      await probe.close();
      await relay.stop();
      await nc.close();
      await nats.drop();
      await db.close();
    },
  };
}

export interface ServiceUnderTest<D> {
  h: ServiceHarness;
  deps: D;
  server: ServerHandle;
  /** A Connect client over the in-memory router transport. */
  client<S extends DescService>(service: S): Client<S>;
  /** A stock gRPC client against the real HTTP/2 server. */
  grpc(): ReturnType<typeof grpcClient>;
  close(): Promise<void>;
}

/**
 * A producing service as its handler tests use it: its real routes over a fresh database, its
 * real outbox relay into a fresh JetStream namespace (with a probe), an in-memory Connect
 * transport, and a real server on port 0 for stock gRPC clients.
 */
export async function startServiceUnderTest<D>(opts: {
  migrate: (db: Database) => Promise<void>;
  schema: string;
  deps: (h: ServiceHarness) => D;
  routes: (deps: D) => (router: ConnectRouter) => void;
}): Promise<ServiceUnderTest<D>> {
  const h = await startServiceHarness({ migrate: opts.migrate, schema: opts.schema });
  const deps = opts.deps(h);
  const transport = createRouterTransport(opts.routes(deps));
  const server = await startConnectServer({ routes: opts.routes(deps), port: 0 });
  return {
    h,
    deps,
    server,
    client: (service) => createClient(service, transport),
    grpc: () => grpcClient(`127.0.0.1:${server.port}`),
    async close() {
      await server.close();
      await h.close();
    },
  };
}

/**
 * Caller metadata as the gateway sends it. `fingerprint` stands for the REST request's
 * fingerprint (the gateway hashes method, path and body); reuse a key with another one to
 * make "the same key for another request".
 */
export function callerMeta(
  accountId: string,
  opts: { livemode?: boolean; idempotencyKey?: string; fingerprint?: string } = {},
) {
  const headers: Record<string, string> = {
    [CALLER_HEADERS.account]: accountId,
    [CALLER_HEADERS.livemode]: String(opts.livemode ?? false),
  };
  if (opts.idempotencyKey) {
    headers[CALLER_HEADERS.idempotencyKey] = opts.idempotencyKey;
    headers[CALLER_HEADERS.idempotencyFingerprint] = opts.fingerprint ?? 'fingerprint';
  }
  return headers;
}
