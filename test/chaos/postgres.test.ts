// Chaos: PostgreSQL stopped under steady load (30 s in `pnpm test:chaos`, 5 s in `pnpm test`).
// While it is down every request is answered 503 api_error within 100 ms (never a bare 500, never
// a hang): the gateway refuses the calls of a service whose database is down at once (its
// circuit, gateway/circuit.ts), so they do not reach the services at all; when it is back, the
// API recovers without restarts and every resource the API accepted is delivered once. A
// private PostgreSQL: the shared one is never touched.
import {
  type PrivatePostgres,
  privatePostgres,
  type Receiver,
  type Stack,
  startReceiver,
  startStack,
  until,
} from '@mcs/testkit';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { sleep, startLoad } from '../e2e/load.ts';
import { pick, STACK_ENV, setUp, verdict } from './lib.ts';

const OUTAGE_MS = pick(5_000, 30_000);
/** The issue's bound for an answer while a store is down (held at p99). */
const FAST_MS = 100;
/** No answer near a hang, even on a loaded 2-core box. */
const MAX_MS = 500;
/** Probes (a read and a write) every this many ms during the outage. */
const PROBE_EVERY_MS = 25;

/** Calls the services answered `unavailable` so far (their own /metrics). */
async function unavailableCalls(stack: Stack): Promise<number> {
  let n = 0;
  for (const part of ['accounts', 'commerce', 'messaging', 'webhooks'] as const) {
    const text = await (await fetch(stack.metricsUrl(part))).text();
    for (const m of text.matchAll(/^mcs_rpc_requests_total\{[^}]*code="unavailable"[^}]*\} (\d+)/gm))
      n += Number(m[1]);
  }
  return n;
}

let pg: PrivatePostgres;
let stack: Stack;
let receiver: Receiver;

beforeAll(async () => {
  pg = await privatePostgres();
  await pg.start();
  receiver = await startReceiver();
  stack = await startStack({ databaseServerUrl: pg.url, env: { ...STACK_ENV, AUTH_CACHE_TTL: '2s' } });
}, 180_000);

afterAll(async () => {
  if (pg && !(await pg.running())) await pg.start().catch(() => {});
  await stack?.stop();
  await receiver?.close();
  await pg?.remove();
});

it(
  `PostgreSQL stopped ${OUTAGE_MS / 1000} s under load: fast 503s, then recovery, nothing lost`,
  async () => {
    const keys = await setUp(stack, receiver);
    const load = startLoad(stack, keys.secret_key, {
      lanes: 4,
      pauseMs: 20,
      conversations: true,
      retryDelayMs: 200,
    });
    await sleep(2_000);

    await pg.stop('fast');
    const downAt = Date.now();
    // A probe beside the load: reads and writes, a pair every 25 ms, each timed.
    const during: Array<{ at: number; ms: number; status: number; type?: string; code?: string }> = [];
    /** Once every part of the gateway has seen the outage (the auth cache expires after 2 s). */
    const SETTLE_MS = 2_500;
    let reachedBefore: number | undefined;
    while (Date.now() - downAt < OUTAGE_MS) {
      if (reachedBefore === undefined && Date.now() - downAt >= SETTLE_MS)
        reachedBefore = await unavailableCalls(stack);
      for (const [method, path, body] of [
        ['GET', '/v1/orders?limit=1', undefined],
        [
          'POST',
          '/v1/orders',
          {
            customer: { name: 'Probe', phone: '+4915112345678' },
            currency: 'EUR',
            items: [{ name: 'Tea', unit_amount: 1, quantity: 1 }],
          },
        ],
      ] as const) {
        const t0 = performance.now();
        const res = await stack.api(keys.secret_key, method, path, body, {
          signal: AbortSignal.timeout(10_000),
        });
        during.push({
          at: Date.now() - downAt,
          ms: performance.now() - t0,
          status: res.status,
          type: res.json?.error?.type,
          code: res.json?.error?.code,
        });
      }
      await sleep(PROBE_EVERY_MS);
    }
    // Calls that still reached a service after the gateway had seen the outage (its circuits).
    const reached = (await unavailableCalls(stack)) - (reachedBefore ?? 0);
    const ready = await fetch(`${stack.baseUrl}/readyz`, { signal: AbortSignal.timeout(10_000) });
    const readiness = `${ready.status} ${await ready.text()}`;
    await pg.start();
    const upAt = Date.now();
    const recoveredAt = await until(
      'a write succeeds after PostgreSQL is back',
      async () => {
        const res = await stack.api(keys.secret_key, 'GET', '/v1/orders?limit=1');
        return res.status === 200 && Date.now();
      },
      30_000,
    );
    await sleep(2_000);
    const report = await load.stop();

    // Answers in the first 200 ms may still be from requests that began before the stop.
    const settled = during.filter((d) => d.at >= 200);
    const sorted = settled.map((d) => d.ms).sort((a, b) => a - b);
    const slow = sorted.filter((ms) => ms > FAST_MS);
    const maxMs = sorted.at(-1) ?? 0;
    const p99 = sorted[Math.floor(sorted.length * 0.99)] ?? 0;
    await verdict(`PostgreSQL stopped ${OUTAGE_MS / 1000}s`, stack, receiver, keys, report, {
      recoveryMs: recoveredAt - upAt,
      extra: `during the outage ${settled.length} probes answered ${[...new Set(settled.map((d) => `${d.status} ${d.code}`))].join(', ')} in p50 ${(sorted[sorted.length >> 1] ?? 0).toFixed(0)} ms, p99 ${p99.toFixed(0)} ms, max ${maxMs.toFixed(0)} ms (${slow.length} over ${FAST_MS} ms); ${reached} calls reached a service after the first ${SETTLE_MS / 1000} s`,
    });
    for (const d of settled) {
      expect(d, 'answer while PostgreSQL is down').toMatchObject({ status: 503, type: 'api_error' });
    }
    expect(readiness).toMatch(/^503 not ready: PostgreSQL/);
    // The issue's bound, 100 ms, for 99 % of the answers (on a shared 2-core box a few wait for
    // the CPU), and none anywhere near a hang.
    expect(
      p99,
      `p99 of answers while down, ms (${slow.length} of ${sorted.length} over ${FAST_MS} ms)`,
    ).toBeLessThanOrEqual(FAST_MS);
    expect(maxMs, 'slowest answer while down, ms').toBeLessThanOrEqual(MAX_MS);
    // By design, not by luck: once the gateway knows the database is down it answers alone (the
    // services' own rpc counters), instead of every request going the long way to fail there.
    expect(reached, 'calls that reached a service while it was known down').toBeLessThanOrEqual(3);
  },
  180_000 + OUTAGE_MS,
);
