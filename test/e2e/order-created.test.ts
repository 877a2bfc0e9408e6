// The first complete path: an account registers an HTTPS endpoint, creates an order, and its
// receiver gets a signed order.created whose data is the order as the REST API renders it.
import { createHmac } from 'node:crypto';
import { createTestCerts, type Receiver, type Stack, startReceiver, startStack } from '@mcs/testkit';
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

const api = (key: string, method: string, path: string, body?: unknown) => stack.api(key, method, path, body);

describe('order.created, end to end', () => {
  it('delivers a signed envelope to an HTTPS receiver', async () => {
    const keys = await stack.createAccount();
    expect(keys.secret_key).toMatch(/^sk_test_/);

    const endpoint = await api(keys.secret_key, 'POST', '/v1/webhooks', {
      url: receiver.url,
      events: ['order.created'],
      description: 'e2e receiver',
    });
    expect(endpoint.status, JSON.stringify(endpoint.json)).toBe(200);
    expect(endpoint.json).toMatchObject({ object: 'webhook_endpoint', status: 'enabled', url: receiver.url });
    expect(endpoint.json.id).toMatch(/^we_/);
    const secret = endpoint.json.secret as string;
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{32,}={0,2}$/);
    expect(Buffer.from(secret.slice(6), 'base64').length).toBeGreaterThanOrEqual(24);

    const order = await api(keys.secret_key, 'POST', '/v1/orders', {
      customer: { name: 'Ada Lovelace', phone: '+4915112345678' },
      currency: 'EUR',
      items: [
        { name: 'Tea', unit_amount: 450, quantity: 2 },
        { name: 'Cake', unit_amount: 300, quantity: 1 },
      ],
    });
    expect(order.status, JSON.stringify(order.json)).toBe(200);
    expect(order.headers.get('request-id')).toMatch(/^req_/);
    expect(order.json).toMatchObject({
      object: 'order',
      status: 'pending',
      total: 1200,
      currency: 'EUR',
      customer: { name: 'Ada Lovelace', phone: '+4915112345678' },
      livemode: false,
    });
    expect(order.json.id).toMatch(/^ord_/);

    const [delivery] = await receiver.waitFor(1, 20_000);
    expect(delivery!.method).toBe('POST');
    expect(delivery!.headers['content-type']).toBe('application/json');
    const expected = createHmac('sha256', secret).update(delivery!.body, 'utf8').digest('hex');
    expect(delivery!.headers['x-service-signature']).toBe(expected);

    const envelope = JSON.parse(delivery!.body);
    expect(Object.keys(envelope).slice(0, 4)).toEqual(['id', 'object', 'type', 'created_at']);
    expect(envelope).toMatchObject({ object: 'event', type: 'order.created' });
    expect(envelope.id).toMatch(/^evt_/);
    expect(new Date(envelope.created_at).toISOString()).toBe(envelope.created_at);
    expect(envelope.data).toEqual(order.json);
    expect(delivery!.headers['webhook-id']).toBe(envelope.id);

    // Standard Webhooks: HMAC of "id.timestamp.body" keyed by the decoded secret.
    const ts = delivery!.headers['webhook-timestamp'] as string;
    const mac = createHmac('sha256', Buffer.from(secret.slice(6), 'base64'))
      .update(`${envelope.id}.${ts}.${delivery!.body}`)
      .digest('base64');
    expect(delivery!.headers['webhook-signature']).toBe(`v1,${mac}`);
    expect(Math.abs(Number(ts) - Date.now() / 1000)).toBeLessThan(60);

    // The REST rendering of the same order is byte for byte what the event carried.
    const read = await api(keys.secret_key, 'GET', `/v1/orders/${order.json.id}`);
    expect(JSON.stringify(read.json)).toBe(JSON.stringify(envelope.data));
  });
});
