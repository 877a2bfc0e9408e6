// Chaos: hostile receivers. Four endpoints of one account answer badly — never, a byte a second,
// a 100 MB body, a redirect to 127.0.0.1 — beside a healthy one, over 1,040 deliveries in
// `pnpm test:chaos` (100 in `pnpm test`). A failing endpoint gets one attempt in flight at a time
// (delivery/engine.ts), so a hung one takes WEBHOOK_TIMEOUT (1 s here) per delivery. The webhooks service's memory stays flat, no redirect
// is followed, hostile connections are closed, and the healthy endpoint gets every event, fast.
import { readFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { type Receiver, type Stack, startReceiver, startStack, until } from '@mcs/testkit';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ledger, sleep } from '../e2e/load.ts';
import { pick, STACK_ENV } from './lib.ts';

/** Endpoints of each hostile kind; with the healthy one, ORDERS × ENDPOINTS deliveries. */
const COPIES = pick(1, 3);
const ORDERS = pick(20, 80);
const ENDPOINTS = 1 + 4 * COPIES;

let stack: Stack;
let healthy: Receiver;
const servers: Array<{ close(): void }> = [];
/** Sockets each hostile server has open now. */
const open = { hang: new Set<net.Socket>(), drip: new Set<net.Socket>(), huge: new Set<net.Socket>() };
let trapHits = 0;

function track(server: net.Server | http.Server, set: Set<net.Socket>) {
  server.on('connection', (s: net.Socket) => {
    set.add(s);
    s.on('close', () => set.delete(s));
    s.on('error', () => {});
  });
}

async function listen(server: net.Server | http.Server): Promise<string> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  servers.push({ close: () => server.close() });
  return `http://127.0.0.1:${(server.address() as net.AddressInfo).port}/hook`;
}

const urls: Record<string, string> = {};

beforeAll(async () => {
  healthy = await startReceiver();
  // Never answers: reads the request and keeps the connection open.
  const hang = net.createServer((s) => {
    s.on('data', () => {});
  });
  track(hang, open.hang);
  urls.hang = await listen(hang);
  // Drips its answer, status line included, one byte a second.
  const drip = net.createServer((s) => {
    const answer = Buffer.from('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok');
    let i = 0;
    const timer = setInterval(() => {
      if (i >= answer.length || s.destroyed) return clearInterval(timer);
      s.write(answer.subarray(i, ++i));
    }, 1_000);
    s.on('data', () => {});
    s.on('close', () => clearInterval(timer));
  });
  track(drip, open.drip);
  urls.drip = await listen(drip);
  // Answers 200 with a 100 MB body, written as fast as the client reads.
  const chunk = Buffer.alloc(64 * 1024, 0x61);
  const huge = http.createServer((req, res) => {
    req.resume();
    res.writeHead(200, { 'content-length': String(100 * 1024 * 1024) });
    let sent = 0;
    const pump = () => {
      while (sent < 100 * 1024 * 1024) {
        sent += chunk.length;
        if (!res.write(chunk)) return res.once('drain', pump);
      }
      res.end();
    };
    res.on('error', () => {});
    pump();
  });
  track(huge, open.huge);
  urls.huge = await listen(huge);
  // The redirect's target: a loopback service no delivery may reach.
  const trap = http.createServer((req, res) => {
    trapHits++;
    req.resume();
    res.end('trapped');
  });
  const trapUrl = await listen(trap);
  const redirect = http.createServer((req, res) => {
    req.resume();
    res.writeHead(302, { location: trapUrl }).end();
  });
  urls.redirect = await listen(redirect);

  stack = await startStack({
    env: {
      ...STACK_ENV,
      WEBHOOK_TIMEOUT: '1s',
      // Retries far apart: every hostile endpoint stays enabled and keeps getting first attempts.
      WEBHOOK_RETRY_SCHEDULE: '1m,1m,1m,1m,1m',
    },
  });
}, 180_000);

afterAll(async () => {
  await stack?.stop();
  await healthy?.close();
  for (const set of Object.values(open)) for (const s of set) s.destroy();
  for (const s of servers) s.close();
});

/** Resident memory of a process (MiB), from /proc. */
function rssMiB(pid: number | undefined): number {
  if (pid === undefined) return 0;
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : 0;
}

it(`hostile receivers over ${ORDERS * ENDPOINTS} deliveries: flat memory, healthy endpoint unaffected`, async () => {
  const keys = JSON.parse(
    await stack.cli([
      'accounts',
      'create',
      '--email',
      `hostile-${Date.now()}@example.com`,
      '--rate-limit',
      '100000',
    ]),
  ) as { secret_key: string; account: { id: string } };
  const hostile = Array.from({ length: COPIES }, () => [
    urls.hang,
    urls.drip,
    urls.huge,
    urls.redirect,
  ]).flat();
  for (const url of [healthy.url, ...hostile]) {
    const res = await stack.api(keys.secret_key, 'POST', '/v1/webhooks', { url, events: ['order.created'] });
    expect(res.status, res.text).toBe(200);
  }
  const pid = stack.pid('webhooks');
  const rssBefore = rssMiB(pid);
  let rssMax = rssBefore;
  const sampler = setInterval(() => {
    rssMax = Math.max(rssMax, rssMiB(pid));
  }, 250);

  const created = new Map<string, number>();
  await Promise.all(
    [0, 1, 2, 3].map(async (lane) => {
      for (let i = lane; i < ORDERS; i += 4) {
        const res = await stack.api(keys.secret_key, 'POST', '/v1/orders', {
          customer: { name: `Customer ${i}`, phone: '+4915112345678' },
          currency: 'EUR',
          items: [{ name: 'Tea', unit_amount: 100, quantity: 1 }],
        });
        expect(res.status, res.text).toBe(200);
        created.set(res.json.id, Date.now());
        await sleep(20);
      }
    }),
  );
  const firstAt = Math.min(...created.values());
  await until('the healthy endpoint got every order', () => healthy.received.length >= ORDERS, {
    timeoutMs: 60_000,
    everyMs: 100,
  });
  const healthyDoneMs = Date.now() - firstAt;
  // Every hostile endpoint had its first attempts (one at a time, WEBHOOK_TIMEOUT 1 s each).
  const attemptsDone = async () => {
    const rows = await ledger(stack, keys.account.id);
    if (rows.deliveries !== ORDERS * ENDPOINTS) return false;
    const c = new pg.Client({ connectionString: stack.db.url });
    await c.connect();
    try {
      const r = await c.query(
        'select count(*)::int as n from webhooks.deliveries where account_id = $1 and attempts = 0',
        [keys.account.id],
      );
      return r.rows[0].n === 0;
    } finally {
      await c.end();
    }
  };
  await until('a first attempt of every delivery', attemptsDone, { timeoutMs: 180_000, everyMs: 500 });
  const allAttemptedMs = Date.now() - firstAt;
  const bodies = healthy.received.map((r) => JSON.parse(r.body) as { data: { id: string } });
  const latencies = healthy.received
    .map((r, i) => r.at - (created.get(bodies[i]!.data.id) ?? r.at))
    .sort((a, b) => a - b);
  const p99 = latencies[Math.floor(latencies.length * 0.99)] ?? 0;
  // Let the last hostile attempts run out, then look at what is left open.
  await sleep(3_000);
  clearInterval(sampler);
  const rssAfter = rssMiB(pid);
  const rows = await ledger(stack, keys.account.id);
  const lingering = { hang: open.hang.size, drip: open.drip.size, huge: open.huge.size };
  const delivered = new Set(bodies.map((b) => b.data.id)).size;
  console.info(
    `[chaos] hostile receivers: sent=${ORDERS * ENDPOINTS} delivered=${delivered} lost=${ORDERS - delivered} duplicated=${rows.duplicateDeliveries} ` +
      `healthy endpoint: all ${ORDERS} in ${(healthyDoneMs / 1000).toFixed(1)} s, p99 ${p99} ms after the order; every hostile first attempt made in ${(allAttemptedMs / 1000).toFixed(1)} s; ` +
      `webhooks RSS ${rssBefore.toFixed(0)} → max ${rssMax.toFixed(0)} → ${rssAfter.toFixed(0)} MiB; redirect followed ${trapHits}×; ` +
      `connections left open: ${JSON.stringify(lingering)}`,
  );
  expect(delivered).toBe(ORDERS);
  expect(healthy.received.length, 'the healthy endpoint got each event once').toBe(ORDERS);
  expect(p99, 'healthy deliveries wait for no hostile one').toBeLessThan(2_000);
  expect(rows.duplicateDeliveries).toBe(0);
  expect(trapHits, 'a redirect was followed').toBe(0);
  // Flat: a 100 MB body is never buffered, hung and dripping attempts are let go.
  expect(rssMax - rssBefore, 'webhooks RSS growth (MiB)').toBeLessThan(64);
  // The time-out ends hung and dripping connections; none is kept past it (8 per endpoint at most).
  expect(lingering.hang).toBeLessThanOrEqual(8 * COPIES);
  expect(lingering.drip).toBeLessThanOrEqual(8 * COPIES);
  expect(stack.alive('webhooks')).toBe(true);
}, 240_000);
