// Scale-out on one machine (issue "Scale-out"): replicas of every part against one PostgreSQL and
// one NATS, under load. Work is shared (each replica does a part), nothing is lost or doubled,
// idempotency holds across gateways, a replica of each part killed mid-load loses nothing, and the
// rate limit is one limit for the account whichever gateway replicas its requests land on.
import {
  type AccountKeys,
  type Part,
  type Receiver,
  type Stack,
  startReceiver,
  startStack,
  until,
} from '@mcs/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  cpuMs,
  createdEvents,
  ledger,
  missingDeliveries,
  sleep,
  startLoad,
  startStreamAudit,
  summary,
} from './load.ts';

const PARTS_OF_WORK: Part[] = ['gateway', 'accounts', 'commerce', 'messaging', 'webhooks'];

let stack: Stack;
let receiver: Receiver;

beforeAll(async () => {
  receiver = await startReceiver();
  stack = await startStack({
    replicas: { gateway: 3, accounts: 2, commerce: 2, messaging: 2, webhooks: 2 },
    env: {
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
      WEBHOOK_ALLOW_HTTP: 'true',
      WEBHOOK_TIMEOUT: '2s',
      WEBHOOK_LEASE_MARGIN: '1s',
      WEBHOOK_RETRY_SCHEDULE: '500ms,1s,1s,1s,1s',
      WEBHOOK_ACK_WAIT: '5s',
      // Keys are re-checked often, so both accounts replicas serve the gateways during the load.
      AUTH_CACHE_TTL: '500ms',
      // The old per-replica split would allow a third of the rate on one replica.
      RATE_LIMIT_REPLICAS: '3',
    },
  });
}, 240_000);

afterAll(async () => {
  await stack?.stop();
  await receiver?.close();
});

async function account(rateLimit: number): Promise<AccountKeys> {
  return JSON.parse(
    await stack.cli([
      'accounts',
      'create',
      '--email',
      `scale-${Date.now()}@example.com`,
      '--rate-limit',
      String(rateLimit),
    ]),
  ) as AccountKeys;
}

describe('two replicas of every part, one PostgreSQL, one NATS', () => {
  it('shares the work, loses and doubles nothing, and survives a replica of each part killed mid-load', async () => {
    const keys = await account(100_000);
    const endpoint = await stack.api(keys.secret_key, 'POST', '/v1/webhooks', {
      url: receiver.url,
      events: ['*'],
    });
    expect(endpoint.status, endpoint.text).toBe(200);
    const audit = await startStreamAudit(stack);

    // Phase 1: load on every replica; CPU per replica shows who did the work.
    const pids = () =>
      PARTS_OF_WORK.flatMap((p) =>
        Array.from({ length: stack.replicas[p] }, (_, r) => ({ p, r, pid: stack.pid(p, r) })),
      );
    const before = pids().map((x) => ({ ...x, cpu: cpuMs(x.pid) }));
    const load = startLoad(stack, keys.secret_key, { lanes: 6, conversations: true });
    await sleep(4_000);
    const share = new Map<Part, number[]>();
    for (const x of before) {
      const used = cpuMs(stack.pid(x.p, x.r)) - x.cpu;
      share.set(x.p, [...(share.get(x.p) ?? []), used]);
    }

    // Phase 2: kill -9 replica 1 of every part at once, mid-load; bring them back 2 s later.
    const killedAt = Date.now();
    await Promise.all(PARTS_OF_WORK.map((p) => stack.kill(p, 'SIGKILL', 1)));
    await sleep(2_000);
    await Promise.all(
      (['accounts', 'commerce', 'messaging', 'webhooks'] as Part[]).map((p) => stack.restart(p, 1)),
    );
    await stack.restart('gateway', 1);
    const restartedAt = Date.now();
    await sleep(3_000);
    const report = await load.stop();

    // Idempotency across gateways: every key replayed on another gateway gives the same resource.
    const replays = [...report.done.entries()].filter((_, i) => i % 25 === 0);
    for (const [idem, outcome] of replays) {
      for (const replica of [0, 1, 2]) {
        const res = await stack.api(keys.secret_key, 'POST', outcome.path, outcome.body, {
          replica,
          headers: { 'idempotency-key': idem },
        });
        expect(res.status, res.text).toBe(200);
        expect(res.json.id).toBe(outcome.id);
        expect(res.headers.get('idempotent-replayed')).toBe('true');
      }
    }

    const ids = [...report.done.values()].map((o) => o.id);
    const recovery = await until(
      'every created resource delivered',
      () => missingDeliveries(receiver, ids).length === 0 && Date.now(),
      { timeoutMs: 60_000, everyMs: 200 },
    );
    await sleep(1_000);
    const rows = await ledger(stack, keys.account.id);
    const stream = await audit.read();
    const seen = createdEvents(receiver);
    const doubled = ids.filter((id) => (seen.get(id)?.size ?? 0) > 1);
    const shares = [...share.entries()]
      .map(([p, v]) => `${p} ${v.map((x) => Math.round(x)).join('/')} ms`)
      .join(', ');
    console.info(
      summary('scale-out 2× every part, replica 1 of each killed -9', {
        sent: report.sent,
        delivered: ids.length - missingDeliveries(receiver, ids).length,
        lost: missingDeliveries(receiver, ids).length + report.gaveUp.length,
        duplicated: rows.duplicateDeliveries + doubled.length,
        recoveryMs: recovery - restartedAt,
        extra: `killed at +4s; statuses ${JSON.stringify(Object.fromEntries(report.statuses))}; CPU during load: ${shares}; stream stored ${stream.events} events (${stream.events - stream.distinct} twice) in ${stream.messages} messages; killed→restarted ${restartedAt - killedAt} ms`,
      }),
    );

    expect(report.violations).toEqual([]);
    expect(report.gaveUp).toEqual([]);
    expect(report.done.size).toBe(report.sent);
    // Work shared: every replica of every part did at least a tenth of its part's work.
    for (const [p, used] of share) {
      const total = used.reduce((a, b) => a + b, 0);
      for (const u of used) expect(u, `${p}: ${used.join('/')}`).toBeGreaterThan(total * 0.1);
    }
    // Nothing lost or doubled: one resource per key, one delivery row and one published event per resource.
    const orders = [...report.done.values()].filter((o) => o.kind === 'order').length;
    expect(rows.orders).toBe(orders);
    expect(rows.conversations).toBe(report.done.size - orders);
    expect(rows.duplicateDeliveries).toBe(0);
    expect(rows.deliveries).toBe(report.done.size);
    // One event per resource created reached the stream (a copy stored twice, a batch's events
    // published again after a lost ack, is recorded once: one delivery row each, above).
    expect(stream.distinct).toBe(report.done.size);
    expect(missingDeliveries(receiver, ids)).toEqual([]);
    expect(doubled).toEqual([]);
    await until(
      'every delivery recorded as succeeded',
      async () => (await ledger(stack, keys.account.id)).undelivered === 0,
      20_000,
    );
  }, 180_000);

  it('keeps one rate limit for an account over three gateways, exact within 10 % on one of them', async () => {
    const rate = 20;
    const keys = await account(rate);
    /** Requests from 4 clients for `ms` at the replicas `pick` chooses; how many passed. */
    const hammer = async (ms: number, pick: (i: number) => number) => {
      let ok = 0;
      let limited = 0;
      let i = 0;
      const t0 = performance.now();
      await Promise.all(
        [0, 1, 2, 3].map(async () => {
          while (performance.now() - t0 < ms) {
            const res = await stack.api(keys.secret_key, 'GET', '/v1/orders?limit=1', undefined, {
              replica: pick(i++),
            });
            if (res.status === 200) ok++;
            else {
              expect(res.status, res.text).toBe(429);
              expect(res.json.error.type).toBe('rate_limit_error');
              expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
              limited++;
            }
          }
        }),
      );
      return { ok, limited, seconds: (performance.now() - t0) / 1000 };
    };
    const one = await hammer(4_000, () => 0);
    // A full bucket (one second of the rate) plus the rate for the time hammered.
    const expectedOne = rate + rate * one.seconds;
    await sleep(1_500); // the bucket refills
    const spread = await hammer(4_000, (i) => i % 3);
    const expectedSpread = rate + rate * spread.seconds;
    console.info(
      `[scale-out] rate limit ${rate}/s: all on one gateway of three ${one.ok} passed (${one.limited} limited) in ${one.seconds.toFixed(1)} s, expected ${expectedOne.toFixed(0)}; ` +
        `spread over three ${spread.ok} passed (${spread.limited} limited), expected ${expectedSpread.toFixed(0)}`,
    );
    expect(one.limited).toBeGreaterThan(0);
    expect(one.ok).toBeGreaterThanOrEqual(expectedOne * 0.9);
    expect(one.ok).toBeLessThanOrEqual(expectedOne * 1.1);
    expect(spread.ok).toBeGreaterThanOrEqual(expectedSpread * 0.9);
    expect(spread.ok).toBeLessThanOrEqual(expectedSpread * 1.1);
  }, 60_000);
});
