// A whole customer journey through the public API, with one `*` endpoint on a real HTTPS
// receiver: product → conversation → message out → message in → order from the product → a
// declined payment → a completed payment → fulfilment. The receiver must get exactly the events
// of spec 6.1 those writes make (no more: re-creating the open conversation and creating a
// payment emit nothing), each signed, each carrying its resource as the REST API rendered it at
// that moment.
import {
  type AccountKeys,
  createTestCerts,
  type Receiver,
  type Stack,
  startReceiver,
  startStack,
} from '@mcs/testkit';
import { verifyWebhook, type WebhookEvent } from '@mcs/webhook-verify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

let stack: Stack;
let receiver: Receiver;

beforeAll(async () => {
  const certs = createTestCerts();
  receiver = await startReceiver({ certs });
  stack = await startStack({
    env: { NODE_EXTRA_CA_CERTS: certs.caFile, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' },
  });
});

afterAll(async () => {
  await stack?.stop();
  await receiver?.close();
});

type Json = Record<string, any>;

const api = (key: string, method: string, path: string, body?: unknown) => stack.api(key, method, path, body);

/** A successful call's JSON (the test fails with the error body otherwise). */
async function ok(key: string, method: string, path: string, body?: unknown): Promise<Json> {
  const res = await api(key, method, path, body);
  expect(res.status, `${method} ${path}: ${res.text}`).toBe(200);
  return res.json;
}

/** Deliveries may repeat (receivers dedupe on the event id): the distinct events so far, verified. */
function eventsReceived(secret: string): WebhookEvent[] {
  const byId = new Map<string, WebhookEvent>();
  for (const r of receiver.received) {
    const event = verifyWebhook(secret, r.body, r.headers);
    const seen = byId.get(event.id);
    if (seen) expect(JSON.stringify(seen)).toBe(JSON.stringify(event));
    else byId.set(event.id, event);
  }
  return [...byId.values()];
}

async function waitForEvents(secret: string, count: number, timeoutMs = 30_000): Promise<WebhookEvent[]> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const got = eventsReceived(secret);
    if (got.length >= count) return got;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`received ${eventsReceived(secret).length} of ${count} events in ${timeoutMs} ms`);
}

describe('a customer journey, end to end', () => {
  it('delivers exactly the events of every step, signed, with the resources as the API shows them', async () => {
    const keys: AccountKeys = await stack.createAccount();
    const sk = keys.secret_key;
    const endpoint = await ok(sk, 'POST', '/v1/webhooks', { url: receiver.url, events: ['*'] });
    const secret = endpoint.secret as string;

    // The catalog: a product, then a change to it.
    const created = await ok(sk, 'POST', '/v1/products', {
      name: 'Green tea',
      price: 450,
      currency: 'EUR',
      description: 'Loose leaf, 100 g',
    });
    expect(created).toMatchObject({ object: 'product', name: 'Green tea', price: 450, active: true });
    expect(created.id).toMatch(/^prod_/);
    const product = await ok(sk, 'POST', `/v1/products/${created.id}`, { description: 'Loose leaf, 120 g' });
    expect(product).toMatchObject({ id: created.id, description: 'Loose leaf, 120 g', price: 450 });

    // The customer writes and is answered.
    const customer = { name: 'Ada Lovelace', phone: '+4915112345678' };
    const conversation = await ok(sk, 'POST', '/v1/conversations', { customer });
    expect(conversation).toMatchObject({ object: 'conversation', status: 'open', customer, closed_at: null });
    // Her open conversation again, not a second one (and no second event).
    expect(await ok(sk, 'POST', '/v1/conversations', { customer })).toEqual(conversation);
    const sent = await ok(sk, 'POST', `/v1/conversations/${conversation.id}/messages`, {
      text: 'Hello Ada, your tea is in stock.',
    });
    expect(sent).toMatchObject({
      object: 'message',
      conversation: conversation.id,
      direction: 'outbound',
      status: 'sent',
    });
    const received = await ok(
      sk,
      'POST',
      `/v1/test_helpers/conversations/${conversation.id}/inbound_messages`,
      {
        text: 'Great, two packs please!',
      },
    );
    expect(received).toMatchObject({
      direction: 'inbound',
      status: 'received',
      text: 'Great, two packs please!',
    });
    const thread = await ok(sk, 'GET', `/v1/conversations/${conversation.id}/messages`);
    expect(thread).toMatchObject({ object: 'list', has_more: false });
    expect(thread.data.map((m: Json) => m.id).sort()).toEqual([sent.id, received.id].sort());

    // She orders from the catalog and pays on the second try.
    const order = await ok(sk, 'POST', '/v1/orders', {
      customer,
      currency: 'EUR',
      items: [{ product: product.id, quantity: 2 }],
    });
    expect(order).toMatchObject({
      object: 'order',
      status: 'pending',
      total: 900,
      items: [{ product: product.id, name: 'Green tea', unit_amount: 450, quantity: 2, amount: 900 }],
    });
    const declined = await ok(sk, 'POST', '/v1/payments', { order: order.id });
    expect(declined).toMatchObject({ object: 'payment', order: order.id, amount: 900, status: 'pending' });
    const failed = await ok(sk, 'POST', `/v1/test_helpers/payments/${declined.id}/fail`, {
      failure_message: 'Insufficient funds.',
    });
    expect(failed).toMatchObject({ status: 'failed', failure_message: 'Insufficient funds.' });
    const payment = await ok(sk, 'POST', '/v1/payments', { order: order.id });
    const completed = await ok(sk, 'POST', `/v1/test_helpers/payments/${payment.id}/complete`, {});
    expect(completed).toMatchObject({ id: payment.id, status: 'succeeded', failure_message: null });
    const paid = await ok(sk, 'GET', `/v1/orders/${order.id}`);
    expect(paid.status).toBe('paid');
    const fulfilled = await ok(sk, 'POST', `/v1/orders/${order.id}/fulfill`, {});
    expect(fulfilled.status).toBe('fulfilled');

    // Another account's writes never reach this endpoint.
    const stranger = await stack.createAccount();
    const theirs = await ok(stranger.secret_key, 'POST', '/v1/products', {
      name: 'X',
      price: 1,
      currency: 'EUR',
    });

    const expected: Array<[string, Json]> = [
      ['product.created', created],
      ['product.updated', product],
      ['conversation.created', conversation],
      ['message.sent', sent],
      ['message.received', received],
      ['order.created', order],
      ['payment.failed', failed],
      ['payment.completed', completed],
      ['order.updated', paid],
      ['order.updated', fulfilled],
    ];
    await waitForEvents(secret, expected.length);
    // Give strays (duplicates of a step, another account's event) time to show up.
    await new Promise((r) => setTimeout(r, 1_500));
    const events = eventsReceived(secret);

    // Exactly this multiset of types.
    const count = (types: string[]) => {
      const m: Record<string, number> = {};
      for (const t of types) m[t] = (m[t] ?? 0) + 1;
      return m;
    };
    expect(count(events.map((e) => e.type))).toEqual(count(expected.map(([t]) => t)));
    expect(events.some((e) => e.data.id === theirs.id)).toBe(false);

    // Each event carries its resource exactly as the API answered at that step.
    const remaining = [...events];
    const matched = expected.map(([type, resource]) => {
      const i = remaining.findIndex(
        (e) => e.type === type && JSON.stringify(e.data) === JSON.stringify(resource),
      );
      expect(i, `${type} carrying ${JSON.stringify(resource)}`).toBeGreaterThanOrEqual(0);
      const [event] = remaining.splice(i, 1);
      expect(event).toMatchObject({ object: 'event', livemode: false });
      expect(event!.id).toMatch(/^evt_/);
      return event!;
    });

    // Ordering of deliveries is not promised; the events' own times follow the journey. A
    // payment's completion and its order's payment are one transaction: one instant.
    const at = matched.map((e) => Date.parse(e.created_at));
    for (let i = 1; i < at.length; i++) {
      expect(at[i]!, `${matched[i - 1]!.type} → ${matched[i]!.type}`).toBeGreaterThanOrEqual(at[i - 1]!);
    }
    expect(matched[7]!.created_at).toBe(matched[8]!.created_at);
    const sorted = [...matched].sort((a, b) => Date.parse(a.created_at) - Date.parse(b.created_at));
    expect(sorted.map((e) => e.type)).toEqual(matched.map((e) => e.type));

    // Resources that have not changed since their last event read the same now.
    for (const [path, last] of [
      [`/v1/products/${product.id}`, product],
      [`/v1/conversations/${conversation.id}`, conversation],
      [`/v1/messages/${sent.id}`, sent],
      [`/v1/messages/${received.id}`, received],
      [`/v1/payments/${failed.id}`, failed],
      [`/v1/payments/${completed.id}`, completed],
      [`/v1/orders/${order.id}`, fulfilled],
    ] as const) {
      const now = await api(sk, 'GET', path);
      expect(now.text, path).toBe(JSON.stringify(last));
    }
  });

  it('keeps test helpers to test mode and refuses illegal steps with the error envelope', async () => {
    const keys = await stack.createAccount();
    const live = await api(keys.live_secret_key, 'POST', '/v1/test_helpers/payments/pay_x/complete', {});
    expect(live.status).toBe(403);
    expect(live.json.error).toMatchObject({ type: 'permission_error', code: 'test_mode_only' });

    const sk = keys.secret_key;
    const order = await ok(sk, 'POST', '/v1/orders', {
      customer: { name: 'Bo', phone: '+4915100000000' },
      currency: 'EUR',
      items: [{ name: 'Cake', unit_amount: 300, quantity: 1 }],
    });
    const fulfil = await api(sk, 'POST', `/v1/orders/${order.id}/fulfill`, {});
    expect(fulfil.status).toBe(400);
    expect(fulfil.json.error).toMatchObject({
      type: 'invalid_request_error',
      code: 'invalid_state_transition',
    });
    expect(fulfil.json.error.message).toMatch(/from pending to fulfilled/);
    const archived = await ok(
      sk,
      'DELETE',
      `/v1/products/${(await ok(sk, 'POST', '/v1/products', { name: 'Old', price: 1, currency: 'EUR' })).id}`,
    );
    expect(archived).toMatchObject({ object: 'product', active: false });
    const stale = await api(sk, 'POST', '/v1/orders', {
      customer: { name: 'Bo', phone: '+4915100000000' },
      currency: 'EUR',
      items: [{ product: archived.id, quantity: 1 }],
    });
    expect(stale.status).toBe(400);
    expect(stale.json.error).toMatchObject({ code: 'invalid_value', param: 'items[0].product' });
    const missing = await api(sk, 'GET', `/v1/payments/pay_${'0'.repeat(26)}`);
    expect(missing.status).toBe(404);
    expect(missing.json.error).toMatchObject({ type: 'not_found_error', code: 'resource_missing' });
    const listed = await ok(sk, 'GET', '/v1/orders?status=pending&limit=5');
    expect(listed).toMatchObject({ object: 'list', url: '/v1/orders' });
    expect(listed.data.map((o: Json) => o.id)).toEqual([order.id]);
    const conv = await ok(sk, 'POST', '/v1/conversations', {
      customer: { name: 'Bo', phone: '+4915100000000' },
    });
    const empty = await api(sk, 'POST', `/v1/conversations/${conv.id}/messages`, {});
    expect(empty.status).toBe(400);
    expect(empty.json.error).toMatchObject({ code: 'missing_required_field', param: 'text' });
    const bad = await api(sk, 'GET', '/v1/orders?status=shipped');
    expect(bad.json.error).toMatchObject({ code: 'invalid_value', param: 'status' });
  });
});
