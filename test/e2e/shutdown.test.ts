// Graceful shutdown (issue 11): SIGTERM lets what is in flight finish — delivery attempts (up to
// WEBHOOK_TIMEOUT) and their records, Connect calls, HTTP requests — and the process exits 0.
// No attempt is lost or recorded twice.
import http from 'node:http';
import net from 'node:net';
import { type AccountKeys, type Receiver, type Stack, startReceiver, startStack } from '@mcs/testkit';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const ORDER = {
  customer: { name: 'Ada', phone: '+4915112345678' },
  currency: 'EUR',
  items: [{ name: 'Tea', unit_amount: 450, quantity: 2 }],
};

describe('SIGTERM drains and exits 0', () => {
  let stack: Stack;
  let receiver: Receiver;
  let keys: AccountKeys;
  let db: pg.Client;

  beforeAll(async () => {
    receiver = await startReceiver();
    stack = await startStack({
      env: { WEBHOOK_ALLOW_HTTP: 'true', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_TIMEOUT: '5s' },
    });
    keys = await stack.createAccount();
    const res = await stack.api(keys.secret_key, 'POST', '/v1/webhooks', {
      url: receiver.url,
      events: ['order.created'],
    });
    expect(res.status, res.text).toBe(200);
    db = new pg.Client({ connectionString: stack.db.url });
    await db.connect();
  }, 120_000);

  afterAll(async () => {
    await db?.end();
    await stack?.stop();
    await receiver?.close();
  });

  it('webhooks: the attempts in flight are answered and recorded once, then it exits 0', async () => {
    // The receiver takes 2 s to answer: the attempts are still in flight when SIGTERM arrives.
    receiver.reply = () => ({ status: 200, delayMs: 2_000 });
    const orders = 5;
    const ids: string[] = [];
    for (let i = 0; i < orders; i++) {
      const res = await stack.api(keys.secret_key, 'POST', '/v1/orders', ORDER);
      expect(res.status, res.text).toBe(200);
      ids.push(res.json.id);
    }
    await receiver.waitFor(orders);
    const signalled = Date.now();
    const exit = await stack.kill('webhooks', 'SIGTERM');
    const took = Date.now() - signalled;
    expect(exit).toEqual({ code: 0, signal: null });
    // It waited for the answers (about 2 s after they were sent), within WEBHOOK_TIMEOUT.
    expect(took).toBeGreaterThan(500);
    expect(took).toBeLessThan(5_000 + 5_000);

    const { rows } = await db.query<{ status: string; attempts: number; recorded: number }>(`
      select d.status, d.attempts, (select count(*)::int from webhooks.attempts a where a.delivery_id = d.id) as recorded
        from webhooks.deliveries d`);
    expect(rows).toHaveLength(orders);
    for (const row of rows) expect(row).toEqual({ status: 'succeeded', attempts: 1, recorded: 1 });

    // Started again, it sends nothing twice.
    receiver.reply = () => ({ status: 200 });
    await stack.restart('webhooks');
    await sleep(2_000);
    expect(receiver.received).toHaveLength(orders);
  }, 60_000);

  it('commerce: a Connect call in flight completes, its event goes out, then it exits 0', async () => {
    const before = receiver.received.length;
    // Hold the orders table so the next CreateOrder waits inside commerce.
    await db.query('begin');
    await db.query('lock table commerce.orders in share mode');
    const pending = stack.api(keys.secret_key, 'POST', '/v1/orders', ORDER);
    for (let i = 0; ; i++) {
      const { rows } = await db.query(
        "select 1 from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'",
      );
      if (rows.length > 0) break;
      if (i > 100) throw new Error('CreateOrder never waited for the lock');
      await sleep(50);
    }
    const exited = stack.kill('commerce', 'SIGTERM');
    await sleep(500);
    expect(stack.alive('commerce'), 'commerce waits for its call').toBe(true);
    await db.query('commit');
    const res = await pending;
    expect(res.status, res.text).toBe(200);
    expect(await exited).toEqual({ code: 0, signal: null });
    // Its order.created was published before commerce exited.
    const [delivered] = (await receiver.waitFor(before + 1)).slice(before);
    expect(JSON.parse(delivered!.body).data.id).toBe(res.json.id);
    await stack.restart('commerce');
  }, 60_000);

  it('gateway: a request in flight is answered, then it exits 0', async () => {
    const body = Buffer.from(JSON.stringify(ORDER));
    const url = new URL(stack.baseUrl);
    const answer = new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = http.request(
        {
          host: url.hostname,
          port: url.port,
          path: '/v1/orders',
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
      // Half the body now, the rest after SIGTERM: the request is in flight meanwhile.
      req.write(body.subarray(0, 20));
      setTimeout(() => req.end(body.subarray(20)), 1_000);
    });
    await sleep(300);
    const exited = stack.kill('gateway', 'SIGTERM');
    const res = await answer;
    expect(res.status, res.text).toBe(200);
    expect(await exited).toEqual({ code: 0, signal: null });
    await stack.restart('gateway');
  }, 60_000);

  it('gateway: a connection that never sent a request (a preconnect) does not hold the stop', async () => {
    const url = new URL(stack.baseUrl);
    expect((await fetch(`${stack.baseUrl}/healthz`)).status).toBe(200); // up again after the test before
    const socket = net.connect(Number(url.port), url.hostname);
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.on('error', () => {});
    const started = Date.now();
    // Before, it waited out its 15 s grace for this socket and exited 1.
    expect(await stack.kill('gateway', 'SIGTERM')).toEqual({ code: 0, signal: null });
    expect(Date.now() - started).toBeLessThan(5_000);
    await closed;
    await stack.restart('gateway');
  }, 60_000);
});
