// A customer journey through the SDK against the real stack (gateway, services, PostgreSQL,
// NATS): catalog, order, payment, conversation, webhooks with signature verification, typed
// errors, auto-pagination, and retries that keep their Idempotency-Key. Type-checked under
// `tsc --strict` with the repository (no `!` assertions: biome refuses them in this package).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { type AccountKeys, type Receiver, type Stack, startReceiver, startStack } from '@mcs/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AuthenticationError,
  ConnectionError,
  constructEvent,
  InvalidRequestError,
  Mcs,
  McsError,
  NotFoundError,
  type Order,
  PermissionError,
  RateLimitError,
  WebhookVerificationError,
} from './index.ts';

let stack: Stack;
let keys: AccountKeys;
let receiver: Receiver;
let mcs: Mcs;

beforeAll(async () => {
  stack = await startStack({ env: { WEBHOOK_ALLOW_HTTP: 'true', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' } });
  keys = await stack.createAccount();
  receiver = await startReceiver();
  mcs = new Mcs({ apiKey: keys.secret_key, baseUrl: stack.baseUrl });
});
afterAll(async () => {
  await receiver?.close();
  await stack?.stop();
});

const customer = { name: 'Ada Lovelace', phone: '+4915112345678' };

async function errorOf(promise: PromiseLike<unknown>): Promise<McsError> {
  try {
    await promise;
  } catch (err) {
    if (err instanceof McsError) return err;
    throw err;
  }
  throw new Error('expected the call to fail');
}

describe('a customer journey through @mcs/client', () => {
  it('sells tea: catalog, order, payment, webhook, conversation', async () => {
    const endpoint = await mcs.webhooks.create({
      url: receiver.url,
      events: ['order.created', 'payment.completed'],
      description: 'SDK journey',
    });
    expect(endpoint.secret).toMatch(/^whsec_/);
    const secret = endpoint.secret ?? '';

    const tea = await mcs.products.create({ name: 'Green tea', price: 450, currency: 'EUR' });
    expect(tea).toMatchObject({ object: 'product', name: 'Green tea', price: 450, active: true });
    // The catalog is readable with the publishable key, as a storefront would.
    const storefront = new Mcs({ apiKey: keys.publishable_key, baseUrl: stack.baseUrl });
    expect((await storefront.products.retrieve(tea.id)).name).toBe('Green tea');

    const order = await mcs.orders.create({
      customer,
      currency: 'EUR',
      items: [
        { product: tea.id, quantity: 2 },
        { name: 'Gift wrap', unit_amount: 150, quantity: 1 },
      ],
    });
    const total: number = order.total; // typed: a number, not `number | undefined`
    expect(total).toBe(1050);
    expect(order.status).toBe('pending');
    expect(order.items.map((i) => i.product)).toEqual([tea.id, null]);

    const payment = await mcs.payments.create({ order: order.id });
    const paid = await mcs.testHelpers.payments.complete(payment.id);
    expect(paid.status).toBe('succeeded');
    expect((await mcs.orders.retrieve(order.id)).status).toBe('paid');
    expect((await mcs.orders.fulfill(order.id)).status).toBe('fulfilled');

    // Both deliveries arrive signed; constructEvent verifies them and narrows the type.
    const deliveries = await receiver.waitFor(2, 30_000);
    const types = new Set<string>();
    for (const d of deliveries) {
      const event = constructEvent(d.body, d.headers, secret);
      types.add(event.type);
      if (event.type === 'order.created') {
        expect(event.data.id).toBe(order.id);
        expect(event.data.total).toBe(1050);
      } else if (event.type === 'payment.completed') {
        expect(event.data.order).toBe(order.id);
      }
      expect(() => constructEvent(`${d.body} `, d.headers, secret)).toThrow(WebhookVerificationError);
      expect(() => Mcs.constructEvent(d.body, d.headers, 'whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA')).toThrow(
        WebhookVerificationError,
      );
    }
    expect([...types].sort()).toEqual(['order.created', 'payment.completed']);

    const conversation = await mcs.conversations.create({ customer });
    await mcs.messages.send(conversation.id, { text: 'Your tea is on its way.' });
    await mcs.testHelpers.conversations.receiveMessage(conversation.id, { text: 'Thanks!' });
    const texts: string[] = [];
    for await (const m of mcs.messages.list(conversation.id, { limit: 1 })) texts.push(m.text);
    expect(texts).toEqual(['Thanks!', 'Your tea is on its way.']);

    const events = await mcs.events.list({ type: 'order.created' });
    expect(events.data.map((e) => e.data.id)).toContain(order.id);
  });

  it('walks every page with for await, fetching pages as it goes', async () => {
    const ownKey = (await stack.createAccount()).secret_key;
    const own = new Mcs({ apiKey: ownKey, baseUrl: stack.baseUrl });
    const made: Order[] = [];
    for (let i = 0; i < 7; i++) {
      made.push(
        await own.orders.create({
          customer,
          currency: 'EUR',
          items: [{ name: `Tea ${i}`, unit_amount: 100, quantity: 1 }],
        }),
      );
    }
    const seen: string[] = [];
    for await (const order of own.orders.list({ limit: 3 })) seen.push(order.id);
    expect(seen).toEqual(made.map((o) => o.id).reverse()); // newest first, each once, over 3 pages
    const first = await own.orders.list({ limit: 3 });
    expect(first).toMatchObject({ object: 'list', has_more: true });
    expect(first.data).toHaveLength(3);
    expect(await own.orders.list({ limit: 2 }).toArray(5)).toHaveLength(5);
    // toArray(n) asks for no page it does not use: 6 on pages of 3 is two requests, not three.
    let pages = 0;
    const counted = new Mcs({
      apiKey: ownKey,
      baseUrl: stack.baseUrl,
      fetch: (request) => {
        pages++;
        return fetch(request);
      },
    });
    expect(await counted.orders.list({ limit: 3 }).toArray(6)).toHaveLength(6);
    expect(pages).toBe(2);
    // Breaking out early stops fetching.
    let n = 0;
    for await (const _ of own.orders.list({ limit: 2 })) if (++n === 1) break;
    expect(n).toBe(1);
  });

  it('resends events, one or in bulk, recovers an endpoint and sets the retry schedule', async () => {
    const own = new Mcs({ apiKey: (await stack.createAccount()).secret_key, baseUrl: stack.baseUrl });
    const settings = await own.webhookSettings.update({ retry_schedule: ['5s', '30s'] });
    expect(settings).toMatchObject({ object: 'webhook_settings', custom: true });
    expect((await own.webhookSettings.retrieve()).retry_schedule).toEqual(['5s', '30s']);
    const since = new Date(Date.now() - 1_000).toISOString();
    const endpoint = await own.webhooks.create({ url: receiver.url, events: ['product.created'] });
    const product = await own.products.create({ name: 'Tea', price: 450, currency: 'EUR' });
    let event: Awaited<ReturnType<typeof own.events.retrieve>> | undefined;
    for (let i = 0; i < 100 && !event; i++) {
      event = (await own.events.list({ type: 'product.created' })).data.find((e) => e.data.id === product.id);
      if (!event) await new Promise((r) => setTimeout(r, 50));
    }
    if (!event) throw new Error('no product.created event listed');
    const resent = await own.events.resend(event.id, { endpoint: endpoint.id });
    // One new delivery, to the endpoint named.
    expect(resent.object).toBe('list');
    expect(resent.data).toHaveLength(1);
    const bulk = await own.eventResends.create({ since, type: 'product.created' });
    expect((await own.eventResends.retrieve(bulk.id)).id).toBe(bulk.id);
    const recovery = await own.webhooks.recover(endpoint.id, { since });
    expect(recovery).toMatchObject({ object: 'recovery' });
    expect((await own.webhooks.retrieveRecovery(endpoint.id, recovery.id)).id).toBe(recovery.id);
  });

  it('throws typed errors with type, code, param and Request-Id', async () => {
    const missing = await errorOf(mcs.orders.retrieve('ord_01kaaaaaaaaaaaaaaaaaaaaaaa'));
    expect(missing).toBeInstanceOf(NotFoundError);
    expect(missing).toMatchObject({ type: 'not_found_error', code: 'resource_missing', status: 404 });
    expect(missing.requestId).toMatch(/^req_/);
    expect(missing.docUrl).toContain('/docs/errors#resource_missing');

    const currency = await errorOf(
      mcs.orders.create({ customer, currency: 'ZZZ', items: [{ name: 'Tea', unit_amount: 1, quantity: 1 }] }),
    );
    expect(currency).toBeInstanceOf(InvalidRequestError);
    expect(currency).toMatchObject({ code: 'invalid_currency', param: 'currency', status: 400 });

    const phone = await errorOf(mcs.conversations.create({ customer: { name: 'A', phone: '12' } }));
    expect(phone).toMatchObject({ code: 'invalid_phone', param: 'customer.phone' });

    const storefront = new Mcs({ apiKey: keys.publishable_key, baseUrl: stack.baseUrl });
    const denied = await errorOf(storefront.orders.list());
    expect(denied).toBeInstanceOf(PermissionError);
    expect(denied).toMatchObject({ type: 'permission_error', code: 'secret_key_required', status: 403 });

    const nobody = new Mcs({ apiKey: `sk_test_${'x'.repeat(32)}`, baseUrl: stack.baseUrl });
    expect(await errorOf(nobody.products.list())).toBeInstanceOf(AuthenticationError);

    const offline = new Mcs({ apiKey: keys.secret_key, baseUrl: 'http://127.0.0.1:9', maxRetries: 1 });
    const refused = await errorOf(offline.products.retrieve('prod_x'));
    expect(refused).toBeInstanceOf(ConnectionError);
  });

  it('replays the first answer for a repeated Idempotency-Key', async () => {
    const body = { customer, currency: 'EUR', items: [{ name: 'Tea', unit_amount: 450, quantity: 1 }] };
    const key = `journey-${Date.now()}`;
    const a = await mcs.orders.create(body, { idempotencyKey: key });
    const b = await mcs.orders.create(body, { idempotencyKey: key });
    expect(b.id).toBe(a.id);
    const reused = await errorOf(mcs.orders.create({ ...body, currency: 'USD' }, { idempotencyKey: key }));
    expect(reused).toMatchObject({ code: 'idempotency_key_reused', status: 422 });
  });
});

describe('retries', () => {
  /**
   * A fault injector between the SDK and the real gateway: forwards every request, but for the
   * first `failures` POSTs throws the gateway's answer away and answers 503 instead (the write
   * committed, the client never heard). Records each request's Idempotency-Key.
   */
  async function startFaultyProxy(failures: number) {
    const seen: Array<{ method: string; path: string; key: string | undefined }> = [];
    let failed = 0;
    const server = http.createServer(async (req, res) => {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const key = req.headers['idempotency-key'];
      seen.push({
        method: req.method ?? '',
        path: req.url ?? '',
        key: typeof key === 'string' ? key : undefined,
      });
      const headers: Record<string, string> = {};
      const hopByHop = new Set(['host', 'connection', 'keep-alive', 'content-length', 'transfer-encoding']);
      for (const [k, v] of Object.entries(req.headers))
        if (typeof v === 'string' && !hopByHop.has(k)) headers[k] = v;
      const upstream = await fetch(`${stack.baseUrl}${req.url}`, {
        method: req.method,
        headers,
        ...(req.method === 'GET' ? {} : { body: Buffer.concat(chunks) }),
      });
      const text = await upstream.text();
      if (req.method === 'POST' && failed < failures) {
        failed++;
        res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '1' });
        res.end(
          JSON.stringify({
            error: { type: 'api_error', code: 'service_unavailable', message: 'injected', doc_url: 'x' },
          }),
        );
        return;
      }
      res.writeHead(upstream.status, {
        'content-type': upstream.headers.get('content-type') ?? 'application/json',
        'request-id': upstream.headers.get('request-id') ?? '',
        ...(upstream.headers.has('idempotent-replayed') ? { 'idempotent-replayed': 'true' } : {}),
      });
      res.end(text);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    return { url: `http://127.0.0.1:${port}`, seen, close: () => new Promise((r) => server.close(r)) };
  }

  it('retries a POST whose answer was lost with the same Idempotency-Key: one order, Retry-After honoured', async () => {
    const own = await stack.createAccount();
    const proxy = await startFaultyProxy(2);
    const delays: number[] = [];
    try {
      const client = new Mcs({
        apiKey: own.secret_key,
        baseUrl: proxy.url,
        onRetry: ({ delayMs }) => delays.push(delayMs),
      });
      const started = Date.now();
      const order = await client.orders.create({
        customer,
        currency: 'EUR',
        items: [{ name: 'Tea', unit_amount: 450, quantity: 1 }],
      });
      expect(Date.now() - started).toBeGreaterThanOrEqual(2_000); // two Retry-After: 1
      expect(delays).toEqual([1_000, 1_000]);
      const posts = proxy.seen.filter((r) => r.method === 'POST');
      expect(posts).toHaveLength(3);
      expect(new Set(posts.map((p) => p.key)).size).toBe(1);
      expect(posts[0]?.key).toMatch(/^mcs-[0-9a-f-]{36}$/);
      // Three attempts reached the server and wrote once: the retries replayed the first answer.
      const direct = new Mcs({ apiKey: own.secret_key, baseUrl: stack.baseUrl });
      const all = await direct.orders.list({ limit: 100 });
      expect(all.data.map((o) => o.id)).toEqual([order.id]);
    } finally {
      await proxy.close();
    }
  });

  it('gives up after maxRetries with the last typed error', async () => {
    const proxy = await startFaultyProxy(5);
    try {
      const client = new Mcs({ apiKey: keys.secret_key, baseUrl: proxy.url, maxRetries: 1 });
      const err = await errorOf(client.products.create({ name: 'Tea', price: 1, currency: 'EUR' }));
      expect(err).toMatchObject({
        type: 'api_error',
        code: 'service_unavailable',
        status: 503,
        retryAfter: 1,
      });
      expect(proxy.seen.filter((r) => r.method === 'POST')).toHaveLength(2);
    } finally {
      await proxy.close();
    }
  });

  it('waits out a 429 from the real rate limiter', async () => {
    const slow = JSON.parse(
      await stack.cli([
        'accounts',
        'create',
        '--email',
        `slow-${Date.now()}@example.com`,
        '--rate-limit',
        '1',
      ]),
    ) as AccountKeys;
    const statuses: Array<number | undefined> = [];
    const client = new Mcs({
      apiKey: slow.secret_key,
      baseUrl: stack.baseUrl,
      maxRetries: 5,
      onRetry: ({ status }) => statuses.push(status),
    });
    const pages = await Promise.all([1, 2, 3].map(() => client.products.list()));
    expect(pages.every((p) => p.object === 'list')).toBe(true);
    expect(statuses.length).toBeGreaterThan(0);
    expect(statuses.every((s) => s === 429)).toBe(true);
    const noRetry = new Mcs({ apiKey: slow.secret_key, baseUrl: stack.baseUrl, maxRetries: 0 });
    const burst = await Promise.allSettled([1, 2, 3].map(() => noRetry.products.list().then((page) => page)));
    const limited = burst.flatMap((r) =>
      r.status === 'rejected' && r.reason instanceof RateLimitError ? [r.reason] : [],
    );
    expect(limited.length).toBeGreaterThan(0);
    expect(limited[0]).toMatchObject({ code: 'rate_limited', status: 429 });
  });
});
