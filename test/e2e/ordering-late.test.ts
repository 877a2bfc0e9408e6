// Ordered delivery when an earlier change arrives late. A change whose publish fails stays in
// the outbox and is published by the outbox poll seconds later, after a later change of the
// same resource was published at once. The failure is real: JetStream refuses the message (the
// stream's max_msg_size, lowered for a moment below that event's size only), so the fast path's
// publish fails, the poll's too until it is raised again. A per_resource endpoint still gets
// the resource's events in order (the later one waits for the version before it, carried by each
// event); an unordered endpoint is not held; and an event that never arrives holds the later
// ones for WEBHOOK_ORDERING_WAIT only.
import { streamNames } from '@mcs/kit/nats';
import {
  type AccountKeys,
  createTestCerts,
  type Receiver,
  type Stack,
  startReceiver,
  startStack,
  type TestCerts,
} from '@mcs/testkit';
import { connect, type NatsConnection } from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const WAIT_MS = 8_000;

let stack: Stack;
let certs: TestCerts;
let ordered: Receiver;
let plain: Receiver;
let nc: NatsConnection;
let key: string;

beforeAll(async () => {
  certs = createTestCerts();
  ordered = await startReceiver({ certs });
  plain = await startReceiver({ certs });
  stack = await startStack({
    env: {
      NODE_EXTRA_CA_CERTS: certs.caFile,
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
      WEBHOOK_RETRY_SCHEDULE: '300ms,300ms,300ms',
      // Nothing here hangs, and every arrival is counted: on a starved 2-core machine a 1 s
      // time-out passed before the engine read a 20 ms answer, and the retry arrived twice.
      WEBHOOK_TIMEOUT: '10s',
      WEBHOOK_LEASE_MARGIN: '1s',
      WEBHOOK_ORDERING_WAIT: `${WAIT_MS}ms`,
    },
  });
  nc = await connect({ servers: stack.nats.url });
  const keys = JSON.parse(
    await stack.cli(['accounts', 'create', '--email', `ordering-late-${Date.now()}@example.com`]),
  ) as AccountKeys;
  key = keys.secret_key;
  for (const [r, ordering] of [
    [ordered, 'per_resource'],
    [plain, 'none'],
  ] as const) {
    await ok(
      stack.api(key, 'POST', '/v1/webhooks', {
        url: r.url,
        events: ['product.created', 'product.updated'],
        ordering,
      }),
    );
  }
}, 240_000);

afterAll(async () => {
  if (nc) {
    await admitAll().catch(() => {});
    await nc.close();
  }
  await stack?.stop();
  await ordered?.close();
  await plain?.close();
});

async function ok(p: Promise<{ status: number; text: string; json: Record<string, any> }>) {
  const res = await p;
  expect(res.status, res.text).toBe(200);
  return res.json;
}

/** JetStream refuses every message over 800 bytes: a product with a long description. */
async function refuseLarge(): Promise<void> {
  const jsm = await nc.jetstreamManager();
  await jsm.streams.update(streamNames(stack.nats.prefix).stream, { max_msg_size: 800 });
}
async function admitAll(): Promise<void> {
  const jsm = await nc.jetstreamManager();
  await jsm.streams.update(streamNames(stack.nats.prefix).stream, { max_msg_size: -1 });
}

/** The names of product `id` as receiver `r` got them, in order. */
const names = (r: Receiver, id: string) =>
  r.received
    .map((g) => JSON.parse(g.body) as { data: { id: string; name: string } })
    .filter((e) => e.data.id === id)
    .map((e) => e.data.name);

async function until(what: string, ok: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`${what}: not in ${timeoutMs} ms`);
    await new Promise((res) => setTimeout(res, 25));
  }
}

/**
 * Creates a product (v1), waits for both endpoints to get it, then makes v2 (a description too
 * large for JetStream while refuseLarge holds) and v3 (description cleared: small again).
 */
async function threeChanges(label: string): Promise<{ id: string; v3At: number }> {
  const p = await ok(
    stack.api(key, 'POST', '/v1/products', { name: `${label} v1`, price: 100, currency: 'EUR' }),
  );
  const id = p.id as string;
  await until('v1 at both endpoints', () => names(ordered, id).length === 1 && names(plain, id).length === 1);
  await refuseLarge();
  await ok(
    stack.api(key, 'POST', `/v1/products/${id}`, { name: `${label} v2`, description: 'x'.repeat(1_000) }),
  );
  await ok(stack.api(key, 'POST', `/v1/products/${id}`, { name: `${label} v3`, description: '' }));
  return { id, v3At: Date.now() };
}

describe('per_resource: an earlier change that arrives late', () => {
  it('is delivered before the later change that overtook it; an unordered endpoint gets the later one at once', async () => {
    const { id, v3At } = await threeChanges('late');
    // v3 was published at once; v2 is stuck in the outbox. The unordered endpoint gets v3 now.
    await until('v3 at the unordered endpoint', () => names(plain, id).length === 2, 5_000);
    expect(names(plain, id)).toEqual(['late v1', 'late v3']);
    expect(Date.now() - v3At).toBeLessThan(3_000);
    // The ordered one waits for v2.
    await new Promise((res) => setTimeout(res, 1_000));
    expect(names(ordered, id)).toEqual(['late v1']);
    // JetStream takes it again: the outbox poll publishes v2 (3 s old at least) and it goes
    // first, then v3.
    await admitAll();
    await until('v2 and v3 at the ordered endpoint', () => names(ordered, id).length === 3, 15_000);
    expect(names(ordered, id)).toEqual(['late v1', 'late v2', 'late v3']);
    await until('v2 at the unordered endpoint', () => names(plain, id).length === 3, 15_000);
    expect(names(plain, id)).toEqual(['late v1', 'late v3', 'late v2']);
    // Well within the wait: v3 went once v2 was in, not because the wait ran out.
    const v3 = ordered.received.find((g) => g.body.includes('"late v3"'))!;
    expect(v3.at - v3At).toBeLessThan(WAIT_MS);
  });

  it('a change that never arrives holds the later one for WEBHOOK_ORDERING_WAIT only, with a warning', async () => {
    const { id, v3At } = await threeChanges('lost');
    await until('v3 at the unordered endpoint', () => names(plain, id).length === 2, 5_000);
    // v2 stays refused: v3 waits for it, then goes without it once the wait ran out.
    await until('v3 at the ordered endpoint', () => names(ordered, id).length === 2, WAIT_MS + 10_000);
    const v3 = ordered.received.find((g) => g.body.includes('"lost v3"'))!;
    expect(v3.at - v3At).toBeGreaterThanOrEqual(WAIT_MS - 1_000);
    expect(names(ordered, id)).toEqual(['lost v1', 'lost v3']);
    expect(stack.logs.webhooks.join('\n')).toMatch(/previous version of the resource never arrived/);
    expect(stack.logs.webhooks.join('\n')).toMatch(new RegExp(`product:${id}`));
    // Published at last, v2 is delivered too (late: the wait is the bound of the guarantee).
    await admitAll();
    await until('v2 at the ordered endpoint', () => names(ordered, id).length === 3, 15_000);
    expect(names(ordered, id)).toEqual(['lost v1', 'lost v3', 'lost v2']);
  });
});
