// Chaos: hostile receivers. Four endpoints of one account answer badly — never, a byte a second,
// a 100 MB body, a redirect to 127.0.0.1 — beside a healthy one, over 1,040 deliveries in
// `pnpm test:chaos` (100 in `pnpm test`), with fewer delivery slots than the hostile endpoints
// could fill. A failing endpoint gets one attempt in flight at a time, in the slow lane
// (delivery/engine.ts), so a hung one takes WEBHOOK_TIMEOUT per delivery. The webhooks service's
// memory stays flat, no 100 MB body is read, no redirect is followed, hostile connections are
// closed, and the healthy endpoint gets every event, fast: before the slow lane, the hung and
// dripping endpoints held every slot until their time-out (p50 1 s, p99 1.5 s in `pnpm test`).
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
/** Delivery slots of the webhooks service (WEBHOOK_CONCURRENCY). */
const CONCURRENCY = pick(4, 16);
/**
 * WEBHOOK_TIMEOUT: how long a slot held by a hung attempt stays held (2 s in `pnpm test`, so a
 * healthy delivery that waited for one shows; 1 s in the full run: 80 hung deliveries in a row).
 */
const TIMEOUT_S = pick(2, 1);
/** The healthy endpoint's p99 bound (ms), from the order's creation to the receiver. */
const HEALTHY_P99_MS = pick(1_500, 2_500);

let stack: Stack;
let healthy: Receiver;
const servers: Array<{ close(): void }> = [];
/** Sockets each hostile server has open now. */
const open = { hang: new Set<net.Socket>(), drip: new Set<net.Socket>(), huge: new Set<net.Socket>() };
let trapHits = 0;
/** What the 100 MB server wrote into its sockets, and how many requests it answered. */
const hugeOut = { bytes: 0, requests: 0 };

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
    hugeOut.requests++;
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
  huge.on('connection', (s: net.Socket) => s.on('close', () => (hugeOut.bytes += s.bytesWritten)));
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
      WEBHOOK_TIMEOUT: `${TIMEOUT_S}s`,
      // Fewer slots than hostile endpoints × WEBHOOK_ENDPOINT_CONCURRENCY (8): they could hold every one.
      WEBHOOK_CONCURRENCY: String(CONCURRENCY),
      // Retries far apart: every hostile endpoint stays enabled and keeps getting first attempts.
      WEBHOOK_RETRY_SCHEDULE: '1m,1m,1m,1m,1m',
    },
  });
}, 180_000);

/** Samples the webhooks service's RSS during the run. */
let sampler: NodeJS.Timeout | undefined;

afterAll(async () => {
  clearInterval(sampler);
  await stack?.stop();
  await healthy?.close();
  for (const set of Object.values(open)) for (const s of set) s.destroy();
  for (const s of servers) s.close();
});

/** Resident memory of a process (MiB), from /proc. */
function rssMiB(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : 0;
  } catch {
    return 0; // the process is gone (the stack stopped)
  }
}

/**
 * Where the healthy endpoint's deliveries spent their time, p99 of each stage (ms): from the
 * event to its delivery row (the consumer's fan-out), and from the row to its attempt (the engine).
 */
async function healthyStages(url: string): Promise<{ fanoutP99: number; waitP99: number; failed: string[] }> {
  const c = new pg.Client({ connectionString: stack.db.url });
  await c.connect();
  try {
    const r = await c.query(
      `select percentile_disc(0.99) within group (order by extract(epoch from d.created_at - ev.created_at)) as fanout,
              percentile_disc(0.99) within group (order by extract(epoch from d.last_attempt_at - d.created_at)) as wait
         from webhooks.deliveries d join webhooks.events ev on ev.id = d.event_id
         join webhooks.endpoints e on e.id = d.endpoint_id
        where e.url = $1`,
      [url],
    );
    // An attempt of the healthy endpoint that failed (its retry comes a schedule step later).
    const f = await c.query(
      `select a.error, a.status_code, a.latency_ms from webhooks.attempts a
         join webhooks.deliveries d on d.id = a.delivery_id
         join webhooks.endpoints e on e.id = d.endpoint_id
        where e.url = $1 and (a.error is not null or a.status_code is distinct from 200)`,
      [url],
    );
    return {
      fanoutP99: Math.round(Number(r.rows[0].fanout) * 1000),
      waitP99: Math.round(Number(r.rows[0].wait) * 1000),
      failed: f.rows.map((a) => `${a.status_code ?? '-'} ${a.error} after ${a.latency_ms} ms`),
    };
  } finally {
    await c.end();
  }
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
  const rssSeries: number[] = [];
  sampler = setInterval(() => {
    const v = rssMiB(pid);
    rssMax = Math.max(rssMax, v);
    rssSeries.push(v);
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
  // Every hostile endpoint had its first attempts (one at a time, WEBHOOK_TIMEOUT each).
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
  const p50 = latencies[Math.floor(latencies.length * 0.5)] ?? 0;
  const p99 = latencies[Math.floor(latencies.length * 0.99)] ?? 0;
  const stages = await healthyStages(healthy.url);
  // Let the last hostile attempts run out, then look at what is left open.
  await sleep(3_000);
  clearInterval(sampler);
  const rssAfter = rssMiB(pid);
  // RSS at each tenth of the run (GC garbage comes and goes; a leak climbs).
  const rssTenths = Array.from({ length: 10 }, (_, i) =>
    Math.round(Math.max(...rssSeries.slice((i * rssSeries.length) / 10, ((i + 1) * rssSeries.length) / 10))),
  );
  const rows = await ledger(stack, keys.account.id);
  const lingering = { hang: open.hang.size, drip: open.drip.size, huge: open.huge.size };
  const delivered = new Set(bodies.map((b) => b.data.id)).size;
  console.info(
    `[chaos] hostile receivers: sent=${ORDERS * ENDPOINTS} delivered=${delivered} lost=${ORDERS - delivered} duplicated=${rows.duplicateDeliveries} ` +
      `healthy endpoint: all ${ORDERS} in ${(healthyDoneMs / 1000).toFixed(1)} s, p50 ${p50} ms, p99 ${p99} ms after the order ` +
      `(p99 event → delivery row ${stages.fanoutP99} ms, row → attempt ${stages.waitP99} ms; failed attempts ${JSON.stringify(stages.failed)}); ` +
      `every hostile first attempt made in ${(allAttemptedMs / 1000).toFixed(1)} s; ` +
      `webhooks RSS ${rssBefore.toFixed(0)} → max ${rssMax.toFixed(0)} → ${rssAfter.toFixed(0)} MiB; by tenths ${rssTenths.join(' ')}; ` +
      `100 MB server wrote ${(hugeOut.bytes / hugeOut.requests / 1024).toFixed(0)} KiB per request (${hugeOut.requests}); redirect followed ${trapHits}×; ` +
      `connections left open: ${JSON.stringify(lingering)}`,
  );
  expect(delivered).toBe(ORDERS);
  expect(healthy.received.length, 'the healthy endpoint got each event once').toBe(ORDERS);
  expect(p99, 'healthy deliveries wait for no hostile one').toBeLessThan(HEALTHY_P99_MS);
  expect(rows.duplicateDeliveries).toBe(0);
  expect(trapHits, 'a redirect was followed').toBe(0);
  // Flat: a 100 MB body is never buffered, hung and dripping attempts are let go.
  // The 100 MB server got to write what the sockets buffer, not the body (64 KiB are read).
  expect(hugeOut.bytes / hugeOut.requests, 'bytes of a 100 MB answer taken').toBeLessThan(16 * 2 ** 20);
  // No climb: GC garbage peaks early and stays; a leak per delivery would keep rising.
  const half = Math.floor(rssSeries.length / 2);
  expect(
    Math.max(...rssSeries.slice(half)) - Math.max(...rssSeries.slice(0, half)),
    'webhooks RSS climb in the second half (MiB)',
  ).toBeLessThan(16);
  expect(rssMax - rssBefore, 'webhooks RSS growth (MiB)').toBeLessThan(128);
  // The time-out ends hung and dripping connections; none is kept past it (8 per endpoint at most).
  expect(lingering.hang).toBeLessThanOrEqual(8 * COPIES);
  expect(lingering.drip).toBeLessThanOrEqual(8 * COPIES);
  expect(stack.alive('webhooks')).toBe(true);
}, 240_000);
