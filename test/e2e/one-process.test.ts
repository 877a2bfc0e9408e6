// The API's parts in one Node process (scripts/one-process.ts, `MCS_ONE_PROCESS=true pnpm start`),
// as a client sees it: one process holds the ports of the gateway, accounts, commerce and
// messaging, and the gateway reaches those three in process (no connection of its own to their
// ports); the webhooks service runs in a process of its own at niceness 10; idempotency, the error
// envelope, a flow across all four services, a signed order.created on a real HTTPS receiver, and
// SIGTERM.
import { createHmac } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import {
  type AccountKeys,
  createTestCerts,
  PARTS,
  REPO_ROOT,
  type Receiver,
  type Stack,
  startReceiver,
  startStack,
} from '@mcs/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acceptedOn, ESTABLISHED, LISTEN, socketInodes, tcpSockets } from './proc-net.ts';

let stack: Stack;
let receiver: Receiver;
let keys: AccountKeys;

beforeAll(async () => {
  const certs = createTestCerts();
  receiver = await startReceiver({ certs });
  stack = await startStack({
    oneProcess: true,
    // WEBHOOK_NICE: pnpm start's default, which test stacks leave at 0 (testkit).
    env: { NODE_EXTRA_CA_CERTS: certs.caFile, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_NICE: '10' },
  });
  keys = await stack.createAccount();
});

afterAll(async () => {
  await stack?.stop();
  await receiver?.close();
});

const api = (method: string, path: string, body?: unknown, headers?: Record<string, string>) =>
  stack.api(keys.secret_key, method, path, body, { headers });

const order = (name = 'Ada', items: unknown[] = [{ name: 'Tea', unit_amount: 450, quantity: 2 }]) => ({
  customer: { name, phone: '+4915112345678' },
  currency: 'EUR',
  items,
});

function expectError(
  res: Awaited<ReturnType<typeof api>>,
  status: number,
  type: string,
  code: string,
  param?: string,
) {
  expect(res.status, res.text).toBe(status);
  expect(res.headers.get('request-id')).toMatch(/^req_/);
  expect(Object.keys(res.json)).toEqual(['error']);
  expect(res.json.error).toMatchObject({ type, code, doc_url: `${stack.baseUrl}/docs/errors#${code}` });
  expect(typeof res.json.error.message).toBe('string');
  if (param) expect(res.json.error.param).toBe(param);
}

const TOGETHER = ['gateway', 'accounts', 'commerce', 'messaging'] as const;

/** Niceness of a thread (field 19 of /proc/<pid>/task/<tid>/stat). */
function niceOf(pid: number, tid: number): number {
  const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
}

describe('the API in one process, webhooks in its own', () => {
  it('one live process holds the ports of the gateway, accounts, commerce and messaging', () => {
    const pid = stack.pid('gateway');
    expect(pid).toBeTypeOf('number');
    for (const part of TOGETHER) expect(stack.pid(part), part).toBe(pid);
    expect(() => process.kill(pid!, 0)).not.toThrow();
    const mine = socketInodes(pid!);
    const listening = tcpSockets().filter((s) => s.state === LISTEN);
    for (const part of PARTS) {
      const port = stack.ports[part];
      expect(
        listening.some((s) => s.local === port && mine.has(s.inode)),
        `${part} listens on ${port} in that process`,
      ).toBe(part !== 'webhooks');
    }
  });

  it('the webhooks service is a process of its own, every thread at niceness 10', () => {
    const pid = stack.pid('webhooks');
    expect(pid).toBeTypeOf('number');
    expect(pid).not.toBe(stack.pid('gateway'));
    expect(readFileSync(`/proc/${pid}/cmdline`, 'utf8')).toContain('services/webhooks/src/main.ts');
    const port = stack.ports.webhooks;
    const theirs = socketInodes(pid!);
    expect(tcpSockets().some((s) => s.state === LISTEN && s.local === port && theirs.has(s.inode))).toBe(
      true,
    );
    // Relative to this test's own niceness, which the stack's processes start with.
    const own = os.getPriority();
    const tids = readdirSync(`/proc/${pid}/task`).map(Number);
    expect(tids.length).toBeGreaterThan(1);
    for (const tid of tids) expect(niceOf(pid!, tid), `thread ${tid}`).toBe(Math.max(10, own));
    for (const tid of readdirSync(`/proc/${stack.pid('gateway')}/task`).map(Number))
      expect(niceOf(stack.pid('gateway')!, tid), `API thread ${tid}`).toBe(own);
  });

  it('keyed writes: replayed byte for byte, refused for another body (422)', async () => {
    const key = `one-${Date.now()}`;
    const first = await api('POST', '/v1/orders', order(), { 'idempotency-key': key });
    expect(first.status, first.text).toBe(200);
    expect(first.json).toMatchObject({ object: 'order', status: 'pending', total: 900, currency: 'EUR' });
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    const again = await api('POST', '/v1/orders', order(), { 'idempotency-key': key });
    expect(again.status).toBe(200);
    expect(again.text).toBe(first.text);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expectError(
      await api('POST', '/v1/orders', order('Bob'), { 'idempotency-key': key }),
      422,
      'invalid_request_error',
      'idempotency_key_reused',
    );
  });

  it('a replay answered by the service: the decoded stored answer renders as the first one did', async () => {
    // Over 16 KiB, the answer is not kept by the gateway (gateway/idempotency createRecentAnswers),
    // so the replay comes from commerce's key table: the first answer is the handler's own message
    // (no encoding on this hop), the replay one decoded from the bytes stored with the key.
    const items = Array.from({ length: 100 }, (_, i) => ({
      name: `${i} ${'Darjeeling '.repeat(18)}`.slice(0, 200),
      unit_amount: 100 + i,
      quantity: 1 + (i % 3),
    }));
    const key = `big-${Date.now()}`;
    const first = await api('POST', '/v1/orders', order('Big', items), { 'idempotency-key': key });
    expect(first.status, first.text).toBe(200);
    expect(first.text.length).toBeGreaterThan(16 * 1024);
    const again = await api('POST', '/v1/orders', order('Big', items), { 'idempotency-key': key });
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.text).toBe(first.text);
    const read = await api('GET', `/v1/orders/${first.json.id}`);
    expect(read.text).toBe(first.text);
  });

  it('errors in the envelope: a missing order (404), a validation error (400)', async () => {
    expectError(
      await api('GET', `/v1/orders/ord_${'0'.repeat(26)}`),
      404,
      'not_found_error',
      'resource_missing',
      'id',
    );
    expectError(
      await api('POST', '/v1/orders', { ...order(), currency: 'euro' }),
      400,
      'invalid_request_error',
      'invalid_currency',
      'currency',
    );
  });

  it('a lone surrogate in a name: refused as it is over HTTP (400, never a 500), nothing stored', async () => {
    const before = (await api('GET', '/v1/orders?limit=100')).json.data.length;
    const placed = await api(
      'POST',
      '/v1/orders',
      order('A\ud800B', [{ name: 'T\udfffea', unit_amount: 1, quantity: 1 }]),
    );
    expect(placed.status, placed.text).toBe(400);
    expect(placed.json.error).toMatchObject({ code: 'invalid_value', param: 'customer.name' });
    expect((await api('GET', '/v1/orders?limit=100')).json.data.length).toBe(before);
  });

  it('a product, an order of it, a payment, a conversation: every service, in process', async () => {
    const product = await api('POST', '/v1/products', { name: 'Green tea', price: 450, currency: 'EUR' });
    expect(product.status, product.text).toBe(200);
    const placed = await api('POST', '/v1/orders', order('Ada', [{ product: product.json.id, quantity: 2 }]));
    expect(placed.status, placed.text).toBe(200);
    expect(placed.json).toMatchObject({
      total: 900,
      items: [{ product: product.json.id, name: 'Green tea', unit_amount: 450, quantity: 2, amount: 900 }],
    });
    const payment = await api('POST', '/v1/payments', { order: placed.json.id });
    expect(payment.status, payment.text).toBe(200);
    expect(payment.json).toMatchObject({ object: 'payment', order: placed.json.id, amount: 900 });
    const done = await api('POST', `/v1/test_helpers/payments/${payment.json.id}/complete`, {});
    expect(done.json).toMatchObject({ id: payment.json.id, status: 'succeeded' });
    expect((await api('GET', `/v1/orders/${placed.json.id}`)).json.status).toBe('paid');

    const conversation = await api('POST', '/v1/conversations', { customer: order().customer });
    expect(conversation.status, conversation.text).toBe(200);
    const sent = await api('POST', `/v1/conversations/${conversation.json.id}/messages`, {
      text: 'Paid, thanks!',
    });
    expect(sent.json).toMatchObject({ object: 'message', direction: 'outbound', status: 'sent' });
  });

  it('a webhook endpoint on an HTTPS receiver gets the signed order.created', async () => {
    const endpoint = await api('POST', '/v1/webhooks', { url: receiver.url, events: ['order.created'] });
    expect(endpoint.status, endpoint.text).toBe(200);
    const secret = endpoint.json.secret as string;
    const placed = await api('POST', '/v1/orders', order('Grace'));
    expect(placed.status, placed.text).toBe(200);

    const [delivery] = await receiver.waitFor(1, 15_000);
    const envelope = JSON.parse(delivery!.body);
    expect(envelope).toMatchObject({ object: 'event', type: 'order.created' });
    expect(envelope.data).toEqual(placed.json);
    expect(delivery!.headers['x-service-signature']).toBe(
      createHmac('sha256', secret).update(delivery!.body, 'utf8').digest('hex'),
    );
    const ts = delivery!.headers['webhook-timestamp'] as string;
    const mac = createHmac('sha256', Buffer.from(secret.slice(6), 'base64'))
      .update(`${envelope.id}.${ts}.${delivery!.body}`)
      .digest('base64');
    expect(delivery!.headers['webhook-signature']).toBe(`v1,${mac}`);
  });

  it('none of those calls went over a connection to accounts, commerce or messaging; webhooks over its socket', async () => {
    // The webhooks service answers through the gateway over its Unix domain socket (kit/config
    // serviceSocket), the connection kept alive for the next call.
    expect((await api('GET', '/v1/webhooks?limit=1')).status).toBe(200);
    // Those three run in the gateway's process and are called in process (kit/in-process).
    const pid = stack.pid('gateway')!;
    const mine = socketInodes(pid);
    const inProcess = new Set([stack.ports.accounts, stack.ports.commerce, stack.ports.messaging]);
    const established = tcpSockets().filter((s) => s.state === ESTABLISHED && mine.has(s.inode));
    expect(established.filter((s) => inProcess.has(s.remote))).toEqual([]);
    expect(established.filter((s) => s.remote === stack.ports.webhooks)).toEqual([]);
    const socket = `${REPO_ROOT}.data/run/${stack.ports.webhooks}.sock`;
    expect(acceptedOn(stack.pid('webhooks')!, socket)).toBeGreaterThan(0);
  });

  it('SIGTERM: a request in flight is answered, every part stops, exit 0 within the grace time', async () => {
    const pid = stack.pid('gateway')!;
    // Half the body now, the rest after SIGTERM: the request is in flight meanwhile, and its call
    // to commerce runs while the process is stopping (the gateway stops first, the services after).
    // The client keeps its connection alive for a minute after the answer, as pooling clients do:
    // the gateway must close it, not wait for it (before, it waited out the grace time: exit 1).
    const body = Buffer.from(JSON.stringify(order('Late')));
    const url = new URL(stack.baseUrl);
    const answer = new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = http.request(
        {
          host: url.hostname,
          port: url.port,
          path: '/v1/orders',
          agent: new http.Agent({ keepAlive: true, timeout: 60_000 }),
          method: 'POST',
          headers: {
            authorization: `Bearer ${keys.secret_key}`,
            'content-type': 'application/json',
            'content-length': body.length,
          },
        },
        (res) => {
          let text = '';
          res.on('data', (c: Buffer) => (text += c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
        },
      );
      req.on('error', reject);
      req.write(body.subarray(0, 20));
      setTimeout(() => req.end(body.subarray(20)), 500);
    });
    await new Promise((r) => setTimeout(r, 200));
    const signalled = Date.now();
    const exited = stack.kill('gateway', 'SIGTERM');
    const res = await answer;
    expect(res.status, res.text).toBe(200);
    expect(JSON.parse(res.text)).toMatchObject({ object: 'order', customer: { name: 'Late' } });
    const exit = await exited;
    const took = Date.now() - signalled;
    expect(exit, stack.logs.gateway.join('')).toEqual({ code: 0, signal: null });
    // runProcess forces an exit 1 after max(15 s, WEBHOOK_TIMEOUT + 5 s).
    expect(took).toBeLessThan(15_000);
    for (const part of TOGETHER) expect(stack.alive(part), part).toBe(false);
    expect(() => process.kill(pid, 0)).toThrow();
    // The webhooks service is stopped on its own (stack.stop), like any part of a process per part.
    expect(stack.alive('webhooks')).toBe(true);
    expect(stack.logs.gateway.join('')).not.toMatch(
      /error while stopping|did not stop in time|did not stop cleanly/,
    );
  });
});
