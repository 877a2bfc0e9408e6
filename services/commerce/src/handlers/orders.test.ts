// The OrderService through an in-memory Connect transport and through a stock gRPC client on a
// real port; each write's event goes through the outbox to a real JetStream stream.
import { fromBinary } from '@bufbuild/protobuf';
import { createClient, createRouterTransport } from '@connectrpc/connect';
import { createLogger } from '@mcs/kit/log';
import { connectNats, ensureStream, streamNames } from '@mcs/kit/nats';
import { type Relay, startRelay } from '@mcs/kit/outbox';
import { type ServerHandle, startConnectServer } from '@mcs/kit/server';
import { commerce, events } from '@mcs/proto';
import {
  apiErrorOf,
  createTestNats,
  freshDatabase,
  grpcClient,
  type MigratedDatabase,
  type TestNats,
} from '@mcs/testkit';
import { AckPolicy, type NatsConnection } from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateCommerce } from '../db/migrate.ts';
import { routes } from '../routes.ts';

let db: MigratedDatabase;
let tn: TestNats;
let nc: NatsConnection;
let relay: Relay;
let server: ServerHandle;
const headers = { 'mcs-account': 'acct_h', 'mcs-livemode': 'false' };
const input = {
  customer: { name: 'Ada', phone: '+4915112345678' },
  currency: 'EUR',
  items: [{ name: 'Tea', unitAmount: 450n, quantity: 2n }],
};

beforeAll(async () => {
  db = await freshDatabase(migrateCommerce);
  tn = createTestNats();
  nc = await connectNats(tn.url, 'commerce-test');
  const names = streamNames(tn.prefix);
  await ensureStream(await nc.jetstreamManager(), names);
  relay = startRelay({
    pool: db.pool,
    schema: 'commerce',
    js: nc.jetstream(),
    names,
    log: createLogger('t', 'silent'),
  });
  server = await startConnectServer({ routes: routes({ db: db.db, relay }), port: 0 });
});
afterAll(async () => {
  await server?.close();
  await relay?.stop();
  await nc?.close();
  await tn?.drop();
  await db?.close();
});

describe('OrderService', () => {
  it('creates an order and publishes order.created through the outbox', async () => {
    const client = createClient(commerce.OrderService, createRouterTransport(routes({ db: db.db, relay })));
    const order = await client.createOrder(input, { headers });
    expect(order.status).toBe(commerce.OrderStatus.PENDING);
    expect(order.total).toBe(900n);

    const names = streamNames(tn.prefix);
    const jsm = await nc.jetstreamManager();
    await jsm.consumers.add(names.stream, { durable_name: 'probe', ack_policy: AckPolicy.Explicit });
    const consumer = await nc.jetstream().consumers.get(names.stream, 'probe');
    const msg = await consumer.next({ expires: 5_000 });
    expect(msg).not.toBeNull();
    expect(msg!.subject).toBe(names.subject('order.created'));
    const event = fromBinary(events.EventSchema, msg!.data);
    expect(event.type).toBe(events.EventType.ORDER_CREATED);
    expect(msg!.headers?.get('Nats-Msg-Id')).toBe(event.id);
    expect(event.data.case).toBe('order');
    expect(event.data.value?.id).toBe(order.id);
    expect(event.accountId).toBe('acct_h');
    const { rows } = await db.pool.query('select count(*)::int as n from commerce.outbox');
    expect(rows[0].n).toBe(0);
  });

  it('refuses calls without the caller metadata', async () => {
    const client = createClient(commerce.OrderService, createRouterTransport(routes({ db: db.db, relay })));
    const { err } = await apiErrorOf(client.createOrder(input));
    expect(err.code).toBe(16); // Unauthenticated
  });

  it('answers a stock gRPC client with errors carrying the catalog detail', async () => {
    const grpc = grpcClient(`127.0.0.1:${server.port}`);
    try {
      const order = await grpc.call(commerce.OrderService.method.createOrder, input, headers);
      expect(order.id).toMatch(/^ord_/);
      const read = await grpc.call(commerce.OrderService.method.getOrder, { id: order.id }, headers);
      expect(read.total).toBe(900n);
      await expect(
        grpc.call(commerce.OrderService.method.getOrder, { id: 'ord_nope' }, headers),
      ).rejects.toMatchObject({
        code: 5, // NOT_FOUND
      });
    } finally {
      grpc.close();
    }
  });
});
