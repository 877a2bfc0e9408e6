// The delivery engine against real receivers and a real database: signatures, the retry
// schedule, time-outs, redirects, health, isolation and target checks at connect time.
import { create } from '@bufbuild/protobuf';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import type { Caller } from '@mcs/kit/caller';
import { DEFAULT_NATS_URL } from '@mcs/kit/config';
import type { Db } from '@mcs/kit/db';
import { createLogger } from '@mcs/kit/log';
import { commerce, events } from '@mcs/proto';
import {
  createTestCerts,
  freshDatabase,
  type MigratedDatabase,
  type Receiver,
  startReceiver,
  until,
} from '@mcs/testkit';
import { verifyWebhook } from '@mcs/webhook-verify';
import { drizzle } from 'drizzle-orm/node-postgres';
import { connect } from 'nats';
import type pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { migrateWebhooks } from '../db/migrate.ts';
import { retryDelivery } from '../domain/deliveries.ts';
import { createEndpoint, deleteEndpoint, enableEndpoint } from '../domain/endpoints.ts';
import { recordEvent } from '../domain/fanout.ts';
import { createSecretBox } from '../domain/secrets.ts';
import { countingDb } from '../testing.ts';
import { createEngine, type Engine, type EngineOptions } from './engine.ts';
import { maxInFlight } from './lanes.ts';
import { sharePauses } from './pauses.ts';
import { createSender, type Sender } from './sender.ts';

let db: MigratedDatabase;
const box = createSecretBox(Buffer.alloc(32, 3));
const log = createLogger('engine-test', process.env.TEST_LOG ?? 'silent');
const open: Array<{ close(): Promise<void> } | { stop(): Promise<void> }> = [];
let n = 0;

beforeAll(async () => {
  db = await freshDatabase(migrateWebhooks);
});
afterEach(async () => {
  for (const o of open.splice(0).reverse()) await ('stop' in o ? o.stop() : o.close());
});
afterAll(() => db?.close());

function setup(
  over: Partial<EngineOptions> & { timeoutMs?: number; allowPrivate?: boolean; ca?: string } = {},
) {
  const timeoutMs = over.timeoutMs ?? 2_000;
  const sender: Sender = createSender({
    timeoutMs,
    allowPrivate: over.allowPrivate ?? true,
    connectionsPerOrigin: maxInFlight(over.concurrency ?? 64), // as part.ts (no prober here)
    ...(over.ca ? { ca: over.ca } : {}),
  });
  const engine: Engine = createEngine({
    db: db.db,
    box,
    sender,
    log,
    schedule: [100, 200, 300, 400, 500],
    timeoutMs,
    concurrency: 64,
    perEndpoint: 4,
    pollMs: 1_000,
    ...over,
  });
  open.push(sender, engine);
  return engine;
}

async function receiver(certs?: ReturnType<typeof createTestCerts>): Promise<Receiver> {
  const r = await startReceiver(certs ? { certs } : {});
  open.push(r);
  return r;
}

/** A new account with one endpoint at `url`; returns what the engine needs to deliver to it. */
async function endpointFor(url: string) {
  const caller: Caller = { accountId: `acct_${++n}`, livemode: false };
  const { endpoint, secret } = await db.db.transaction((tx) =>
    createEndpoint(
      tx,
      caller,
      { url, events: ['*'] },
      { box, policy: { allowHttp: true, allowPrivate: true } },
    ),
  );
  return { caller, endpoint, secret };
}

async function emit(caller: Caller, engine: Pick<Engine, 'leaseMs' | 'enqueue'>) {
  const order = create(commerce.OrderSchema, {
    id: `ord_${++n}`,
    status: commerce.OrderStatus.PENDING,
    total: 5n,
    currency: 'EUR',
  });
  const event = create(events.EventSchema, {
    id: `evt_test${++n}`,
    type: events.EventType.ORDER_CREATED,
    createdAt: timestampFromMs(Date.now()),
    data: { case: 'order', value: order },
    livemode: caller.livemode,
    accountId: caller.accountId,
  });
  const queued = await recordEvent(db.db, event, new Uint8Array(), engine.leaseMs);
  engine.enqueue(queued);
  return { event, queued };
}

/** A db whose claim statements take effect at once but answer `ms` later (a slow round trip). */
function slowClaims(real: pg.Pool, ms: number) {
  const pool = Object.create(real) as pg.Pool;
  pool.query = (async (q: unknown, values?: unknown) => {
    const result = await real.query(q as string, values as unknown[]);
    const text = typeof q === 'string' ? q : (q as { text: string }).text;
    if (text.includes('p.paused_until >')) await new Promise((res) => setTimeout(res, ms));
    return result;
  }) as pg.Pool['query'];
  return drizzle(pool) as Db;
}

async function deliveryRow(id: string) {
  const { rows } = await db.pool.query('select * from webhooks.deliveries where id = $1', [id]);
  return rows[0];
}

describe('delivery engine', () => {
  it('delivers once, signed with both schemes, over verified TLS', async () => {
    const certs = createTestCerts();
    const r = await receiver(certs);
    const engine = setup({ ca: certs.ca });
    const { caller, secret } = await endpointFor(r.url);
    const { event, queued } = await emit(caller, engine);
    const [got] = await r.waitFor(1);
    const verified = verifyWebhook(secret, got!.body, got!.headers);
    expect(verified.id).toBe(event.id);
    expect(got!.headers['user-agent']).toMatch(/^mcs-webhooks\//);
    const row = await until('the delivery to succeed', async () => {
      const d = await deliveryRow(queued[0]!.deliveryId);
      return d.status === 'succeeded' && d;
    });
    expect(row.attempts).toBe(1);
    const { rows } = await db.pool.query('select * from webhooks.attempts where delivery_id = $1', [row.id]);
    expect(rows).toMatchObject([{ number: 1, status_code: 200, error: null, response_excerpt: 'ok' }]);
  });

  it('records an answer holding a NUL byte (PostgreSQL text cannot) instead of sending it again', async () => {
    const r = await receiver();
    r.reply = () => ({ status: 500, body: 'no\0pe' });
    const engine = setup();
    const { caller } = await endpointFor(r.url);
    const { queued } = await emit(caller, engine);
    // Recorded, the first failure schedules the second attempt; unrecorded, the lease would send
    // the first again.
    const rows = await until('two attempts recorded', async () => {
      const { rows } = await db.pool.query(
        'select number, status_code, response_excerpt from webhooks.attempts where delivery_id = $1 order by number',
        [queued[0]!.deliveryId],
      );
      return rows.length >= 2 && rows;
    });
    expect(rows.slice(0, 2)).toEqual([
      { number: 1, status_code: 500, response_excerpt: 'no\uFFFDpe' },
      { number: 2, status_code: 500, response_excerpt: 'no\uFFFDpe' },
    ]);
  });

  it('makes exactly 6 attempts on the schedule, then marks the endpoint unhealthy once', async () => {
    const r = await receiver();
    r.reply = () => ({ status: 500, body: 'nope' });
    const engine = setup();
    const { caller, endpoint } = await endpointFor(r.url);
    const { queued } = await emit(caller, engine);
    const got = await r.waitFor(6, 10_000);
    const gaps = got.slice(1).map((g, i) => g.at - got[i]!.at);
    [100, 200, 300, 400, 500].forEach((want, i) => {
      expect(gaps[i]).toBeGreaterThanOrEqual(want - 5);
      expect(gaps[i]).toBeLessThan(want + 400);
    });
    // webhook-id stays the event id on every attempt; the timestamp is per attempt.
    expect(new Set(got.map((g) => g.headers['webhook-id'])).size).toBe(1);
    const row = await until('the delivery to fail', async () => {
      const d = await deliveryRow(queued[0]!.deliveryId);
      return d.status === 'failed' && d;
    });
    expect(row.attempts).toBe(6);
    const ep = await db.pool.query(
      'select status, last_error, failing_since from webhooks.endpoints where id = $1',
      [endpoint.id],
    );
    expect(ep.rows[0]).toMatchObject({ status: 'unhealthy', last_error: 'HTTP 500' });
    expect(ep.rows[0].failing_since).toBeInstanceOf(Date);
    // One e-mail per transition: the early warning (half the retries spent: attempt 4), then unhealthy.
    const notes = await db.pool.query(
      'select kind, detail from webhooks.notifications where endpoint_id = $1 order by created_at',
      [endpoint.id],
    );
    expect(notes.rows.map((n) => n.kind)).toEqual(['endpoint_failing', 'endpoint_unhealthy']);
    expect(JSON.parse(notes.rows[0].detail)).toMatchObject({ attempts: 4, lastError: 'HTTP 500' });
    // Nothing more is sent, and new events for it are recorded as not delivered.
    const later = await emit(caller, engine);
    expect(later.queued).toEqual([]);
    const skipped = await db.pool.query('select status from webhooks.deliveries where event_id = $1', [
      later.event.id,
    ]);
    expect(skipped.rows).toEqual([{ status: 'skipped' }]);
    await new Promise((res) => setTimeout(res, 700));
    expect(r.received).toHaveLength(6);
  });

  it('counts a time-out as a failed attempt', async () => {
    const r = await receiver();
    r.reply = (_req, i) => (i === 0 ? { hang: true } : { status: 204 });
    const engine = setup({ timeoutMs: 300 });
    const { caller } = await endpointFor(r.url);
    const { queued } = await emit(caller, engine);
    await r.waitFor(2);
    const row = await until('the delivery to succeed', async () => {
      const d = await deliveryRow(queued[0]!.deliveryId);
      return d.status === 'succeeded' && d;
    });
    expect(row.attempts).toBe(2);
    const { rows } = await db.pool.query(
      'select number, status_code, error, latency_ms from webhooks.attempts where delivery_id = $1 order by number',
      [row.id],
    );
    expect(rows[0]).toMatchObject({ number: 1, status_code: null, error: 'timed out after 300 ms' });
    expect(rows[0].latency_ms).toBeGreaterThanOrEqual(290);
    expect(rows[1]).toMatchObject({ number: 2, status_code: 204, error: null });
  });

  it('treats a redirect as a failure and does not follow it', async () => {
    const r = await receiver();
    r.reply = (req) =>
      req.path === '/webhooks' ? { status: 302, headers: { location: '/elsewhere' } } : { status: 200 };
    const engine = setup({ schedule: [60_000] });
    const { caller } = await endpointFor(r.url);
    const { queued } = await emit(caller, engine);
    await r.waitFor(1);
    const row = await until('a first attempt', async () => {
      const d = await deliveryRow(queued[0]!.deliveryId);
      return d.attempts === 1 && d;
    });
    expect(row.status).toBe('pending');
    await new Promise((res) => setTimeout(res, 200));
    expect(r.received.map((x) => x.path)).toEqual(['/webhooks']);
  });

  it('keeps a hanging endpoint from delaying a healthy one', async () => {
    const slow = await receiver();
    slow.reply = () => ({ hang: true });
    const fast = await receiver();
    const engine = setup({ timeoutMs: 3_000, schedule: [60_000] });
    const a = await endpointFor(slow.url);
    const b = await endpointFor(fast.url);
    for (let i = 0; i < 20; i++) await emit(a.caller, engine);
    await slow.waitFor(4); // its per-endpoint slots are full and hanging
    const started = Date.now();
    await emit(b.caller, engine);
    await fast.waitFor(1, 2_000);
    expect(Date.now() - started).toBeLessThan(1_000);
  });

  it("keeps hanging endpoints on a healthy one's host, of other accounts, from delaying it", async () => {
    // Three endpoints of other accounts on the same host and port, each holding its 4 slots with
    // attempts that never answer: the healthy endpoint's attempt must not queue for a connection
    // behind them (its deadline would run out before it was even sent).
    const host = await receiver();
    host.reply = (r) => (r.path.includes('/hang') ? { hang: true } : { status: 200 });
    const engine = setup({ timeoutMs: 20_000, schedule: [60_000] });
    const hanging = await Promise.all([1, 2, 3].map((i) => endpointFor(`${host.url}/hang/${i}`)));
    const healthy = await endpointFor(`${host.url}/ok`);
    for (const a of hanging) for (let i = 0; i < 4; i++) await emit(a.caller, engine);
    // All twelve reach the host long before their time-out (none frees a connection meanwhile).
    await until('every hanging slot taken', () => host.received.length >= 12, 5_000);
    const started = Date.now();
    await emit(healthy.caller, engine);
    await until('the healthy endpoint served', () => host.received.some((r) => r.path.endsWith('/ok')));
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it('keeps more hanging endpoints than slots from delaying a healthy one (slow lane, shares)', async () => {
    // Six endpoints that never answer, 4 deliveries each, against 4 slots: the old engine gave
    // the first one all 4 slots until its time-out (5 s), then the next ones theirs.
    const hanging = await Promise.all(Array.from({ length: 6 }, () => receiver()));
    for (const r of hanging) r.reply = () => ({ hang: true });
    const fast = await receiver();
    const engine = setup({ timeoutMs: 5_000, schedule: [60_000], concurrency: 4, perEndpoint: 4 });
    const callers = await Promise.all(hanging.map((r) => endpointFor(r.url)));
    const b = await endpointFor(fast.url);
    for (const a of callers) for (let i = 0; i < 4; i++) await emit(a.caller, engine);
    const inFlight = () => hanging.reduce((sum, r) => sum + r.received.length, 0);
    await until('every slot holding a hanging attempt', () => inFlight() >= 4);
    const started = Date.now();
    await emit(b.caller, engine);
    await fast.waitFor(1, 4_000);
    // Within slowAfterMs (1 s: half the time-out, at most 1 s) and a turn, not a time-out.
    expect(Date.now() - started).toBeLessThan(2_500);
    // The hanging attempts stay bounded: 4 fast slots, the slow lane at most twice that.
    expect(inFlight()).toBeLessThanOrEqual(12);
  });

  it("keeps more hanging endpoints than slots, on a healthy one's host, from delaying it", async () => {
    // As above, but all on one host and port: the hanging attempts that moved to the slow lane
    // still hold their connections, so the host's attempts in flight reach three times the
    // overall cap. With connections per host capped at the overall cap, the healthy endpoint's
    // attempt queued for a connection until the first hanging ones timed out (5 s).
    const host = await receiver();
    host.reply = (r) => (r.path.includes('/hang') ? { hang: true } : { status: 200 });
    const engine = setup({ timeoutMs: 5_000, schedule: [60_000], concurrency: 4, perEndpoint: 4 });
    const hanging = await Promise.all(
      Array.from({ length: 6 }, (_, i) => endpointFor(`${host.url}/hang/${i}`)),
    );
    const healthy = await endpointFor(`${host.url}/ok`);
    for (const a of hanging) for (let i = 0; i < 4; i++) await emit(a.caller, engine);
    await until('every fast slot holding a hanging attempt', () => host.received.length >= 4);
    // After 1 s (slowAfterMs) those move to the slow lane, and the next hanging ones start.
    await new Promise((r) => setTimeout(r, 1_500));
    const started = Date.now();
    await emit(healthy.caller, engine);
    await until(
      'the healthy endpoint served',
      () => host.received.some((r) => r.path.endsWith('/ok')),
      4_000,
    );
    expect(Date.now() - started).toBeLessThan(2_500);
  });

  it("gives a failing endpoint's one slot to the delivery furthest along its schedule", async () => {
    // A hanging endpoint with a backlog: one attempt at a time, each the whole time-out. Its
    // retries must not wait behind the backlog's first attempts, or the schedule stretches with
    // the backlog and the endpoint turns unhealthy (ending it) only after all of it was tried.
    const r = await receiver();
    r.reply = () => ({ hang: true });
    const engine = setup({ timeoutMs: 300, schedule: [100, 100] });
    const { caller, endpoint } = await endpointFor(r.url);
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) ids.push((await emit(caller, engine)).event.id);
    await until('the endpoint unhealthy', async () => {
      const { rows } = await db.pool.query('select status from webhooks.endpoints where id = $1', [
        endpoint.id,
      ]);
      return rows[0].status === 'unhealthy';
    });
    const order = r.received.map((got) => JSON.parse(got.body).id as string);
    const lastOfFirst = order.lastIndexOf(ids[0]!);
    expect(order.filter((id) => id === ids[0]).length).toBe(3);
    // The first four went at once (perEndpoint 4), then the endpoint was failing: their retries
    // came before any later event's first attempt but the one already under way.
    const laterFirsts = new Set(order.slice(0, lastOfFirst).filter((id) => !ids.slice(0, 4).includes(id)));
    expect(laterFirsts.size, order.join(' ')).toBeLessThanOrEqual(2);
  });

  it('gives a failing endpoint one attempt at a time until it recovers', async () => {
    const r = await receiver();
    r.reply = (_req, i) => (i < 7 ? { delayMs: 400 } : { status: 200 }); // 400 ms > the 200 ms time-out
    const engine = setup({ timeoutMs: 200, schedule: [60_000] });
    const { caller } = await endpointFor(r.url);
    for (let i = 0; i < 12; i++) await emit(caller, engine);
    const got = await r.waitFor(12, 10_000);
    // The first 4 go out together (perEndpoint); once they time out, one at a time: each
    // arrives only after the previous one's time-out. Arrivals are seen at the receiver, which a
    // busy machine delays by a few tens of ms now and then: so each gap is far from "together"
    // (concurrent attempts arrive within a few ms), and three gaps add up to three time-outs.
    for (let i = 5; i < 8; i++) expect(got[i]!.at - got[i - 1]!.at).toBeGreaterThanOrEqual(100);
    expect(got[7]!.at - got[4]!.at).toBeGreaterThanOrEqual(3 * 200 - 60);
    // After a success the endpoint gets its full concurrency back: the rest arrive together.
    expect(got[11]!.at - got[8]!.at).toBeLessThan(150);
  });

  it('refuses private addresses at connect time unless allowed', async () => {
    const r = await receiver();
    const engine = setup({ allowPrivate: false, schedule: [60_000] });
    const { caller } = await endpointFor(r.url); // registered while allowed
    const { queued } = await emit(caller, engine);
    const row = await until('a first attempt', async () => {
      const d = await deliveryRow(queued[0]!.deliveryId);
      return d.attempts === 1 && d;
    });
    const { rows } = await db.pool.query('select error from webhooks.attempts where delivery_id = $1', [
      row.id,
    ]);
    expect(rows[0].error).toMatch(/not a public address/);
    expect(r.received).toHaveLength(0);
  });

  it('picks up due retries from the database through the poller', async () => {
    const r = await receiver();
    r.reply = (_req, i) => ({ status: i === 0 ? 503 : 200 });
    const engine = setup({ schedule: [1_200], pollMs: 200 });
    const { caller } = await endpointFor(r.url);
    const { queued } = await emit(caller, engine);
    const got = await r.waitFor(2, 5_000);
    expect(got[1]!.at - got[0]!.at).toBeGreaterThanOrEqual(1_195);
    await until(
      'the delivery to succeed',
      async () => (await deliveryRow(queued[0]!.deliveryId)).status === 'succeeded',
    );
  });

  it('calls onNotify once per transition; a resend after re-enabling runs the schedule again', async () => {
    const r = await receiver();
    r.reply = () => ({ status: 500 });
    const unhealthy: string[] = [];
    const engine = setup({
      schedule: [50, 50, 50, 50, 50],
      onNotify: (id, transition) => {
        if (transition === 'unhealthy') unhealthy.push(id);
      },
    });
    const { caller, endpoint } = await endpointFor(r.url);
    const { queued } = await emit(caller, engine);
    const id = queued[0]!.deliveryId;
    await until('the delivery to fail', async () => (await deliveryRow(id)).status === 'failed');
    expect(unhealthy).toEqual([endpoint.id]);

    await db.db.transaction((tx) => enableEndpoint(tx, caller, endpoint.id));
    const again = await db.db.transaction((tx) => retryDelivery(tx, caller, endpoint.id, id, engine.leaseMs));
    engine.enqueue([again.queued!]);
    await r.waitFor(12, 5_000);
    const row = await until('the delivery to fail', async () => {
      const d = await deliveryRow(id);
      return d.status === 'failed' && d;
    });
    expect(row).toMatchObject({ attempts: 12, schedule_start: 6 });
    expect(unhealthy).toEqual([endpoint.id, endpoint.id]);
    // Re-enabling starts a new failing stretch: a warning and an unhealthy e-mail each time.
    const notes = await db.pool.query(
      'select kind from webhooks.notifications where endpoint_id = $1 order by created_at',
      [endpoint.id],
    );
    expect(notes.rows.map((n) => n.kind)).toEqual([
      'endpoint_failing',
      'endpoint_unhealthy',
      'endpoint_failing',
      'endpoint_unhealthy',
    ]);
    await new Promise((res) => setTimeout(res, 300));
    expect(r.received).toHaveLength(12);
  });

  it('skips a delivery whose endpoint was deleted instead of keeping it pending', async () => {
    const r = await receiver();
    const engine = setup();
    const { caller, endpoint } = await endpointFor(r.url);
    const event = await emit(caller, { enqueue: () => {}, leaseMs: engine.leaseMs });
    // Deleted between fan-out and the attempt (the delete's own skip ran before this row existed).
    await db.pool.query('delete from webhooks.endpoints where id = $1', [endpoint.id]);
    // As the poller (or a long wait in memory) hands it over: without what fan-out read, so the
    // engine claims it and finds the endpoint gone. (A fresh one still holding fan-out's target
    // would be attempted once, like an attempt already in flight when the delete came.)
    engine.enqueue(event.queued.map(({ target: _, ...rest }) => rest));
    await until(
      'the delivery to be skipped',
      async () => (await deliveryRow(event.queued[0]!.deliveryId)).status === 'skipped',
    );
    expect(r.received).toHaveLength(0);
    await expect(db.db.transaction((tx) => deleteEndpoint(tx, caller, endpoint.id))).rejects.toThrow();
  });

  it('takes over a delivery whose process died once its lease runs out', async () => {
    const r = await receiver();
    // leaseMs = timeout + margin = 500 ms: what a dead process's claims are worth.
    const engine = setup({ timeoutMs: 200, leaseMarginMs: 300, pollMs: 50 });
    expect(engine.leaseMs).toBe(500);
    const { caller } = await endpointFor(r.url);
    // Fan-out recorded it with a lease for an in-memory queue that died with its process.
    const recorded = Date.now();
    const dead = { enqueue: () => {}, leaseMs: engine.leaseMs };
    const { queued } = await emit(caller, dead);
    const [got] = await r.waitFor(1, 3_000);
    expect(got!.at - recorded).toBeGreaterThanOrEqual(480);
    expect(got!.at - recorded).toBeLessThan(1_500);
    await until(
      'the delivery to succeed',
      async () => (await deliveryRow(queued[0]!.deliveryId)).status === 'succeeded',
    );
  });

  it('logs an attempt that was in flight when its delivery was skipped, and a success counts', async () => {
    const r = await receiver();
    r.reply = () => ({ status: 200, body: 'late but fine', delayMs: 300 });
    const engine = setup();
    const { caller } = await endpointFor(r.url);
    const { queued } = await emit(caller, engine);
    const id = queued[0]!.deliveryId;
    await r.waitFor(1);
    // As the unhealthy transition of another delivery, or a delete, does meanwhile.
    await db.pool.query(
      `update webhooks.deliveries set status = 'skipped', next_attempt_at = null where id = $1`,
      [id],
    );
    const row = await until('a first attempt', async () => {
      const d = await deliveryRow(id);
      return d.attempts === 1 && d;
    });
    expect(row.status).toBe('succeeded');
    const { rows } = await db.pool.query('select * from webhooks.attempts where delivery_id = $1', [id]);
    expect(rows).toMatchObject([{ number: 1, status_code: 200, response_excerpt: 'late but fine' }]);
  });

  it('starts fresh deliveries from what fan-out read, and records their successes together', async () => {
    const r = await receiver();
    const counted = countingDb(db.pool);
    // A long group-commit window, so all five land in one group however slow the machine is.
    const engine = setup({ db: counted.db, pollMs: 60_000, groupCommitMs: 500 });
    const { caller, secret } = await endpointFor(r.url);
    const emitted = [];
    // Recorded by fan-out (not counted), then handed over at once, as the consumer does.
    for (let i = 0; i < 5; i++)
      emitted.push(await emit(caller, { enqueue: () => {}, leaseMs: engine.leaseMs }));
    engine.enqueue(emitted.flatMap((e) => e.queued));
    const got = await r.waitFor(5);
    for (const g of got) expect(verifyWebhook(secret, g.body, g.headers).id).toMatch(/^evt_test/);
    const ids = emitted.map((e) => e.queued[0]!.deliveryId);
    await until('all five deliveries to succeed at the first attempt', async () => {
      const { rows } = await db.pool.query(
        `select count(*)::int as n from webhooks.deliveries where id = any($1) and status = 'succeeded' and attempts = 1`,
        [ids],
      );
      return rows[0].n === 5;
    });
    // No claim: the engine's only statement was the one that recorded all five successes.
    expect(counted.statements).toHaveLength(1);
    expect(counted.statements[0]).toMatch(/unnest/);
    const { rows } = await db.pool.query(
      'select delivery_id, number, status_code from webhooks.attempts where delivery_id = any($1)',
      [ids],
    );
    expect(rows).toHaveLength(5);
    expect(rows.every((a) => a.number === 1 && a.status_code === 200)).toBe(true);
  });

  it('claims deliveries whose lease is too short for an attempt, a batch per statement', async () => {
    const r = await receiver();
    const counted = countingDb(db.pool);
    // The engine's clock runs 3 s ahead: a fan-out lease of timeout (2 s) + margin (5 s) has
    // 4 s left, under the 2 s + 2.5 s an attempt without a claim needs.
    const engine = setup({ db: counted.db, pollMs: 60_000, clock: () => new Date(Date.now() + 3_000) });
    const { caller } = await endpointFor(r.url);
    const emitted = [];
    for (let i = 0; i < 6; i++)
      emitted.push(await emit(caller, { enqueue: () => {}, leaseMs: engine.leaseMs }));
    engine.enqueue(emitted.flatMap((e) => e.queued));
    await r.waitFor(6);
    const ids = emitted.map((e) => e.queued[0]!.deliveryId);
    await until('all six deliveries to succeed', async () => {
      const { rows } = await db.pool.query(
        `select count(*)::int as n from webhooks.deliveries where id = any($1) and status = 'succeeded'`,
        [ids],
      );
      return rows[0].n === 6;
    });
    // One claim for the six (the endpoint's queue head, up to 32), then the grouped successes.
    const claims = counted.statements.filter((st) => st.includes('p.paused_until >'));
    expect(claims).toHaveLength(1);
    expect(r.received).toHaveLength(6);
  });

  it('shares one max_rate between two engines (replicas) through their slot reservations', async () => {
    const r = await receiver();
    const a = setup();
    const b = setup();
    const { caller, endpoint } = await endpointFor(r.url);
    const rate = 5;
    await db.pool.query('update webhooks.endpoints set max_rate = $2 where id = $1', [endpoint.id, rate]);
    // Each engine gets half of the events, as two consumers of one durable would.
    for (let i = 0; i < 10; i++) await emit(caller, i % 2 === 0 ? a : b);
    const got = await r.waitFor(10, 15_000);
    const span = got.at(-1)!.at - got[0]!.at;
    // Slots are 200 ms apart whichever engine holds them: 10 starts span at least 9 slots.
    expect(span).toBeGreaterThanOrEqual(9 * (1000 / rate) - 100);
    for (const g of got) {
      expect(got.filter((h) => h.at >= g.at && h.at < g.at + 1000).length).toBeLessThanOrEqual(rate + 1);
    }
    const { rows } = await db.pool.query('select rate_tat from webhooks.endpoints where id = $1', [
      endpoint.id,
    ]);
    expect(rows[0].rate_tat).toBeInstanceOf(Date);
  });

  it('holds a Retry-After pause for a delivery whose claim was under way when the pause committed', async () => {
    const r = await receiver();
    // The first attempt is answered 429 Retry-After: 1 after 300 ms; everything else 200.
    r.reply = (_req, i) =>
      i === 0 ? { status: 429, headers: { 'retry-after': '1' }, delayMs: 300 } : { status: 200 };
    // Claims commit at once but come back 600 ms later: B's claim is done before A's answer and
    // the pause it records, and its copy reaches the queue after both.
    const engine = setup({ db: slowClaims(db.pool, 600), pollMs: 200 });
    const { caller } = await endpointFor(r.url);
    const a = await emit(caller, { enqueue: () => {}, leaseMs: engine.leaseMs });
    const b = await emit(caller, { enqueue: () => {}, leaseMs: engine.leaseMs });
    const bItem = b.queued[0]!;
    // A starts from fan-out's target; B is claimed first (as the poller's or a replay's are).
    engine.enqueue([
      ...a.queued,
      { deliveryId: bItem.deliveryId, endpointId: bItem.endpointId, lease: bItem.lease },
    ]);
    const got = await r.waitFor(3, 10_000);
    const first = got[0]!;
    expect(first.headers['webhook-id']).toBe(a.event.id);
    const bAt = got.find((g) => g.headers['webhook-id'] === b.event.id)!.at;
    // Not before the pause ends (300 ms answer + 1 s), though its claim predates the pause.
    expect(bAt - first.at).toBeGreaterThanOrEqual(1_250);
    await until('B to succeed', async () => (await deliveryRow(bItem.deliveryId)).status === 'succeeded');
    expect((await deliveryRow(bItem.deliveryId)).attempts).toBe(1);
  });

  it("holds another replica's Retry-After pause for a delivery it claimed before that pause committed", async () => {
    const r = await receiver();
    // The first attempt is answered 429 Retry-After: 1 after 300 ms; everything else 200.
    r.reply = (_req, i) =>
      i === 0 ? { status: 429, headers: { 'retry-after': '1' }, delayMs: 300 } : { status: 200 };
    // Two replicas told of each other's pauses over the real NATS (delivery/pauses.ts). B's
    // claims commit at once but come back 600 ms later: B claims its delivery before A's answer
    // and the pause A records, and has it in hand after both.
    const nc = await connect({ servers: process.env.NATS_URL ?? DEFAULT_NATS_URL });
    const prefix = `t${Math.random().toString(36).slice(2, 10)}`;
    const engines: Engine[] = [];
    const buses = [0, 1].map((i) =>
      sharePauses({ nc, prefix, log, onPaused: (id, until) => engines[i]?.paused(id, until) }),
    );
    try {
      const a = setup({ pollMs: 200, onPause: (id, until) => buses[0]!.announce(id, until) });
      const b = setup({ db: slowClaims(db.pool, 600), pollMs: 200 });
      engines.push(a, b);
      const { caller } = await endpointFor(r.url);
      const ea = await emit(caller, { enqueue: () => {}, leaseMs: a.leaseMs });
      const eb = await emit(caller, { enqueue: () => {}, leaseMs: b.leaseMs });
      const bItem = eb.queued[0]!;
      a.enqueue(ea.queued);
      b.enqueue([{ deliveryId: bItem.deliveryId, endpointId: bItem.endpointId, lease: bItem.lease }]);
      const got = await r.waitFor(3, 10_000);
      expect(got[0]!.headers['webhook-id']).toBe(ea.event.id);
      const bAt = got.find((g) => g.headers['webhook-id'] === eb.event.id)!.at;
      // Not before the pause ends (300 ms answer + 1 s), though B claimed it before the pause.
      expect(bAt - got[0]!.at).toBeGreaterThanOrEqual(1_250);
      await until('B to succeed', async () => (await deliveryRow(bItem.deliveryId)).status === 'succeeded');
      expect((await deliveryRow(bItem.deliveryId)).attempts).toBe(1);
    } finally {
      for (const bus of buses) bus.stop();
      await nc.close();
    }
  });

  it('sends nothing for a claimed delivery whose lease another worker moved', async () => {
    const r = await receiver();
    const engine = setup({ pollMs: 60_000, clock: () => new Date(Date.now() + 3_000) });
    const { caller } = await endpointFor(r.url);
    const { queued } = await emit(caller, { enqueue: () => {}, leaseMs: engine.leaseMs });
    // Another replica's poller took it over after the lease ran out.
    await db.pool.query(
      `update webhooks.deliveries set next_attempt_at = now() + interval '1 minute' where id = $1`,
      [queued[0]!.deliveryId],
    );
    engine.enqueue(queued);
    await new Promise((res) => setTimeout(res, 300));
    expect(r.received).toHaveLength(0);
  });
});
