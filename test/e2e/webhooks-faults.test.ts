// Faults of the delivery engine: kill -9 of the webhooks service while deliveries are between
// retries (and some attempts in flight), events created while it is down, restart: every
// delivery still completes (docs/api.md, "Events and deliveries": retries survive restarts of any process).
import { createTestCerts, type Receiver, type Stack, startReceiver, startStack, until } from '@mcs/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

let stack: Stack;
let receiver: Receiver;

beforeAll(async () => {
  const certs = createTestCerts();
  receiver = await startReceiver({ certs });
  stack = await startStack({
    env: {
      NODE_EXTRA_CA_CERTS: certs.caFile,
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
      WEBHOOK_RETRY_SCHEDULE: '300ms,300ms,300ms,300ms,300ms',
      WEBHOOK_TIMEOUT: '1s',
      // A dead process's leases run out 2 s after its last claim.
      WEBHOOK_LEASE_MARGIN: '1s',
    },
  });
});

afterAll(async () => {
  await stack?.stop();
  await receiver?.close();
});

/** A request that must succeed; its JSON. */
async function api(key: string, method: string, path: string, body?: unknown) {
  const res = await stack.api(key, method, path, body);
  expect(res.status, res.text).toBe(200);
  return res.json as Record<string, any>;
}

describe('kill -9 of the webhooks service', () => {
  it('loses no delivery: all complete after a restart', async () => {
    const keys = await stack.createAccount();
    const endpoint = await api(keys.secret_key, 'POST', '/v1/webhooks', { url: receiver.url, events: ['*'] });

    // Every event fails three times (slowly, so some attempts are in flight at the kill), then
    // succeeds.
    const seen = new Map<string, number>();
    const succeeded = new Set<string>();
    receiver.reply = (req) => {
      const id = req.headers['webhook-id'] as string;
      const n = (seen.get(id) ?? 0) + 1;
      seen.set(id, n);
      if (n <= 3) return { status: 500, delayMs: 150 };
      succeeded.add(id);
      return { status: 200 };
    };
    const order = () =>
      api(keys.secret_key, 'POST', '/v1/orders', {
        customer: { name: 'Grace Hopper', phone: '+4915112345678' },
        currency: 'EUR',
        items: [{ name: 'Coffee', unit_amount: 300, quantity: 1 }],
      });

    for (let i = 0; i < 10; i++) await order();
    // Mid-retry: every event had its first attempt, and they are far from done.
    await until('all 10 events at the receiver', () => seen.size === 10, 15_000);
    expect(succeeded.size).toBeLessThan(10);
    const doneAtKill = succeeded.size;
    await stack.kill('webhooks', 'SIGKILL');
    const killedAt = Date.now();

    // Events keep coming while the webhooks service is down: JetStream holds them.
    for (let i = 0; i < 3; i++) await order();
    await stack.restart('webhooks');
    const restartedAt = Date.now();
    await until('13 successful deliveries at the receiver', () => succeeded.size === 13, 20_000);
    console.info(
      `${doneAtKill}/10 done at kill -9; restart took ${restartedAt - killedAt} ms; all 13 done ${Date.now() - restartedAt} ms after restart`,
    );

    const list = await until(
      '13 succeeded deliveries listed',
      async () => {
        const res = await api(keys.secret_key, 'GET', `/v1/webhooks/${endpoint.id}/deliveries?limit=100`);
        return res.data.length === 13 && res.data.every((d: any) => d.status === 'succeeded') && res.data;
      },
      10_000,
    );
    for (const d of list) {
      // The receiver saw the three failures and the success of every event. An attempt in flight
      // at the kill reached the receiver but was never recorded (the process died before its
      // transaction), so the log may hold one attempt fewer; it is made again, never lost.
      expect(seen.get(d.event)).toBeGreaterThanOrEqual(4);
      expect(d.attempt_count).toBeGreaterThanOrEqual(3);
      expect(d.attempts.at(-1).status_code).toBe(200);
    }
    const events = await api(keys.secret_key, 'GET', '/v1/events?limit=100');
    expect(events.data).toHaveLength(13);
  });
});
