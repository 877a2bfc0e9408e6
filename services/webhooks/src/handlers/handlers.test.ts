// The webhooks RPCs in memory (createRouterTransport) and over real gRPC (a stock @grpc/grpc-js
// client against the server on port 0), rendered as the gateway renders them.

import { Code, ConnectError, createClient, createRouterTransport } from '@connectrpc/connect';
import * as grpc from '@grpc/grpc-js';
import { type Caller, callerHeaders } from '@mcs/kit/caller';
import { createKeyStore, idempotencyKeys } from '@mcs/kit/idempotency';
import { createLogger } from '@mcs/kit/log';
import { errorLogger, type ServerHandle, startConnectServer } from '@mcs/kit/server';
import { events as eventsProto, webhooks } from '@mcs/proto';
import { render } from '@mcs/rest';
import { freshDatabase, grpcClient, type MigratedDatabase } from '@mcs/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateWebhooks } from '../db/migrate.ts';

import type { Deps } from '../deps.ts';
import type { QueuedDelivery } from '../domain/fanout.ts';
import { createSecretBox } from '../domain/secrets.ts';
import { routes } from '../routes.ts';

let db: MigratedDatabase;
let server: ServerHandle;
let deps: Deps;
const queued: QueuedDelivery[] = [];
const caller: Caller = { accountId: 'acct_h1', livemode: false };
const headers = callerHeaders(caller);

beforeAll(async () => {
  db = await freshDatabase(migrateWebhooks);
  deps = {
    db: db.db,
    keys: createKeyStore(db.db, idempotencyKeys),
    box: createSecretBox(Buffer.alloc(32, 5)),
    policy: { allowHttp: false, allowPrivate: true },
    queue: { leaseMs: 5_000, enqueue: (items) => queued.push(...items) },
    schedule: [30_000, 300_000],
    replays: { rate: 100, wake: () => {} },
  };
  server = await startConnectServer({
    routes: routes(deps),
    port: 0,
    interceptors: [errorLogger(createLogger('webhooks-test', 'silent'))],
  });
});
afterAll(async () => {
  await server?.close();
  await db?.close();
});

describe('WebhookEndpointService in memory', () => {
  const client = () => createClient(webhooks.WebhookEndpointService, createRouterTransport(routes(deps)));

  it('answers a repeated idempotency key with the same endpoint and secret, replayed', async () => {
    const c = client();
    const keyed = { ...caller, idempotency: { key: 'same', fingerprint: 'fp' } };
    const input = { url: 'https://127.0.0.1/a', events: ['*'] };
    let replayed: string | null = null;
    const a = await c.createWebhookEndpoint(input, { headers: callerHeaders(keyed) });
    const b = await c.createWebhookEndpoint(input, {
      headers: callerHeaders(keyed),
      onHeader: (h) => {
        replayed = h.get('mcs-idempotent-replayed');
      },
    });
    expect(replayed).toBe('true');
    expect(b).toEqual(a);
    expect(b.secret).toMatch(/^whsec_/);
    expect(
      (await c.listWebhookEndpoints({ limit: 100 }, { headers })).data.filter((e) => e.url === input.url),
    ).toHaveLength(1);
    const other = await c
      .createWebhookEndpoint(input, {
        headers: callerHeaders({ ...keyed, idempotency: { key: 'same', fingerprint: 'fp2' } }),
      })
      .catch((e: unknown) => ConnectError.from(e));
    expect(other).toBeInstanceOf(ConnectError);
    expect((other as ConnectError).rawMessage).toMatch(/different request/);
  });

  it('manages an endpoint through its whole life, rendered as REST', async () => {
    const c = client();
    const made = await c.createWebhookEndpoint(
      { url: 'https://127.0.0.1/h', events: ['order.created'], description: 'erp' },
      { headers },
    );
    const json = render(webhooks.WebhookEndpointSchema, made);
    expect(Object.keys(json)).toEqual([
      'id',
      'object',
      'url',
      'events',
      'description',
      'status',
      'disabled_reason',
      'failing_since',
      'last_error',
      'disable_on_gone',
      'max_rate',
      'ordering',
      'auto_recover',
      'secret',
      'livemode',
      'created_at',
    ]);
    expect(json).toMatchObject({
      object: 'webhook_endpoint',
      status: 'enabled',
      disabled_reason: null,
      failing_since: null,
      last_error: null,
      disable_on_gone: true,
      max_rate: null,
      ordering: 'none',
      auto_recover: false,
    });

    const disabled = await c.updateWebhookEndpoint({ id: made.id, disabled: true }, { headers });
    expect(render(webhooks.WebhookEndpointSchema, disabled)).toMatchObject({
      status: 'disabled',
      disabled_reason: 'manual',
      secret: null,
    });
    const enabled = await c.enableWebhookEndpoint({ id: made.id }, { headers });
    expect(render(webhooks.WebhookEndpointSchema, enabled)).toMatchObject({
      status: 'enabled',
      disabled_reason: null,
    });
    const limited = await c.updateWebhookEndpoint(
      { id: made.id, maxRate: 5, disableOnGone: false },
      { headers },
    );
    expect(render(webhooks.WebhookEndpointSchema, limited)).toMatchObject({
      max_rate: 5,
      disable_on_gone: false,
    });
    const unlimited = await c.updateWebhookEndpoint({ id: made.id, maxRate: 0 }, { headers });
    expect(render(webhooks.WebhookEndpointSchema, unlimited).max_rate).toBeNull();
    const rotated = await c.rotateWebhookEndpointSecret({ id: made.id }, { headers });
    expect(rotated.secret).toMatch(/^whsec_/);
    expect(rotated.secret).not.toBe(made.secret);

    const test = await c.sendTestWebhook({ id: made.id }, { headers });
    expect(queued.at(-1)).toMatchObject({ deliveryId: test.id, endpointId: made.id });
    const list = await c.listWebhookDeliveries({ id: made.id }, { headers });
    const [delivery] = list.data.map((d) => render(webhooks.WebhookDeliverySchema, d));
    expect(delivery).toMatchObject({
      id: test.id,
      object: 'webhook_delivery',
      webhook_endpoint: made.id,
      event_type: 'order.created',
      status: 'pending',
      attempt_count: 0,
      attempts: [],
    });
    expect(Object.keys(delivery!).slice(0, 4)).toEqual(['id', 'object', 'webhook_endpoint', 'event']);

    const deleted = await c.deleteWebhookEndpoint({ id: made.id }, { headers });
    expect(render(webhooks.DeletedWebhookEndpointSchema, deleted)).toEqual({
      id: made.id,
      object: 'webhook_endpoint',
      deleted: true,
    });
    const gone = await c.getWebhookEndpoint({ id: made.id }, { headers }).catch((e) => ConnectError.from(e));
    expect((gone as ConnectError).code).toBe(Code.NotFound);
  });

  it('refuses calls without a caller', async () => {
    const err = await client()
      .listWebhookEndpoints({})
      .catch((e) => ConnectError.from(e));
    expect((err as ConnectError).code).toBe(Code.Unauthenticated);
  });
});

describe('EventService over gRPC', () => {
  it('lists and reads events, with NOT_FOUND for others', async () => {
    const client = grpcClient(`127.0.0.1:${server.port}`);
    try {
      const rpc = webhooks.EventService.method;
      const empty = await client.call(rpc.listEvents, { type: eventsProto.EventType.ORDER_CREATED }, headers);
      expect(empty).toMatchObject({ data: [], hasMore: false });
      const missing = await client.call(rpc.getEvent, { id: 'evt_none' }, headers).catch((e) => e);
      expect((missing as grpc.ServiceError).code).toBe(grpc.status.NOT_FOUND);
    } finally {
      client.close();
    }
  });
});
