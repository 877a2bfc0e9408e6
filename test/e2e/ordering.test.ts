// Ordered delivery (ordering: "per_resource") in the scale-out setup: two commerce replicas write
// the changes (each event carries its outbox seq, drawn under the resource's row lock) and two
// webhooks replicas consume and deliver them, to a real HTTPS receiver. Many changes per
// resource across many resources: every resource's events arrive strictly in the order its
// changes committed, one request per resource at a time, resources in parallel, and a refused
// event holds back only its own resource.
import {
  type AccountKeys,
  createTestCerts,
  type Receiver,
  type Stack,
  startReceiver,
  startStack,
  type TestCerts,
} from '@mcs/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

let stack: Stack;
let certs: TestCerts;
let r: Receiver;

beforeAll(async () => {
  certs = createTestCerts();
  r = await startReceiver({ certs });
  stack = await startStack({
    replicas: { commerce: 2, webhooks: 2 },
    env: {
      NODE_EXTRA_CA_CERTS: certs.caFile,
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
      WEBHOOK_RETRY_SCHEDULE: '300ms,300ms,300ms,300ms,300ms',
      // Nothing here hangs, and every arrival is counted: on a starved 2-core machine a 1 s
      // time-out passed before the engine read a 20 ms answer, and the retry arrived twice.
      WEBHOOK_TIMEOUT: '10s',
      WEBHOOK_LEASE_MARGIN: '1s',
    },
  });
}, 240_000);

afterAll(async () => {
  await stack?.stop();
  await r?.close();
});

async function ok(p: Promise<{ status: number; text: string; json: Record<string, any> }>) {
  const res = await p;
  expect(res.status, res.text).toBe(200);
  return res.json;
}

interface Seen {
  at: number;
  type: string;
  id: string;
  name: string;
}

describe('ordering: "per_resource" with two commerce and two webhooks replicas', () => {
  it('delivers each resource’s events in commit order, one at a time, resources in parallel; a refused event holds back only its resource', async () => {
    const keys = JSON.parse(
      await stack.cli(['accounts', 'create', '--email', `ordering-${Date.now()}@example.com`]),
    ) as AccountKeys;
    const key = keys.secret_key;
    const ep = await ok(
      stack.api(key, 'POST', '/v1/webhooks', {
        url: r.url,
        events: ['product.created', 'product.updated'],
        ordering: 'per_resource',
      }),
    );
    expect(ep.ordering).toBe('per_resource');

    const PRODUCTS = 12;
    const UPDATES = 10;
    // The receiver takes 20 ms per request, refuses product p0's product.created twice,
    // and notes any moment two requests of one product are open at once.
    const seen: Seen[] = [];
    const open = new Map<string, number>();
    let overlap = 0;
    let concurrent = 0;
    let maxConcurrent = 0;
    let refusals = 0;
    r.reply = (g) => {
      const e = JSON.parse(g.body) as { type: string; data: { id: string; name: string } };
      seen.push({ at: g.at, type: e.type, id: e.data.id, name: e.data.name });
      const now = (open.get(e.data.id) ?? 0) + 1;
      open.set(e.data.id, now);
      if (now > 1) overlap++;
      maxConcurrent = Math.max(maxConcurrent, ++concurrent);
      setTimeout(() => {
        open.set(e.data.id, (open.get(e.data.id) ?? 1) - 1);
        concurrent--;
      }, 20);
      if (e.type === 'product.created' && e.data.name === 'p0 v0' && refusals < 2) {
        refusals++;
        return { status: 500, delayMs: 20 };
      }
      return { status: 200, delayMs: 20 };
    };

    // Each product: created, then UPDATES renames, each after the previous one was answered (so
    // the commit order is known: v1, v2, …). Products go in parallel, through both commerce
    // replicas (the stack's gateway spreads requests).
    const products = await Promise.all(
      Array.from({ length: PRODUCTS }, (_, i) =>
        ok(
          stack.api(key, 'POST', '/v1/products', { name: `p${i} v0`, price: 100 + i, currency: 'EUR' }),
        ).then((p) => p.id as string),
      ),
    );
    // The first product's product.created is refused twice: its updates wait behind it.
    const stuck = products[0]!;
    await Promise.all(
      products.map(async (id, i) => {
        for (let k = 1; k <= UPDATES; k++) {
          await ok(stack.api(key, 'POST', `/v1/products/${id}`, { name: `p${i} v${k}` }));
        }
      }),
    );

    const expected = PRODUCTS * (UPDATES + 1);
    // Until every product's last change has arrived (a count could be reached by a duplicate
    // before the last one came; duplicates fail the length checks below).
    const complete = () =>
      products.every((id, i) => seen.some((s) => s.id === id && s.name === `p${i} v${UPDATES}`));
    const deadline = Date.now() + 60_000;
    while (!complete() && Date.now() < deadline) await new Promise((s) => setTimeout(s, 50));
    const sequence = () =>
      products.map((id, i) => `${i}: ${seen.filter((s) => s.id === id).map((s) => s.name.split(' ')[1])}`);

    products.forEach((id, i) => {
      const names = seen.filter((s) => s.id === id).map((s) => s.name);
      const want = Array.from({ length: UPDATES + 1 }, (_, k) => `p${i} v${k}`);
      // The refused attempts come again, before anything later of their product.
      const got = names.filter((n, j) => j === 0 || n !== names[j - 1]);
      expect(got, `${id}\n${sequence().join('\n')}`).toEqual(want);
      expect(names.length, `${id}\n${sequence().join('\n')}`).toBe(want.length + (i === 0 ? refusals : 0));
    });
    const types = seen.filter((s) => s.id === products[1]).map((s) => s.type);
    expect(types[0]).toBe('product.created');
    expect(overlap).toBe(0);
    expect(maxConcurrent).toBeGreaterThanOrEqual(3);
    expect(refusals).toBe(2);
    // While the stuck product waited for its retries, the others went on.
    const mine = seen.flatMap((s, j) => (s.id === stuck ? [j] : []));
    const meanwhile = seen.slice(mine[0]! + 1, mine[refusals]!).filter((s) => s.id !== stuck);
    expect(meanwhile.length).toBeGreaterThanOrEqual(PRODUCTS - 1);
    await new Promise((s) => setTimeout(s, 500));
    expect(seen).toHaveLength(expected + refusals);
  });
});
