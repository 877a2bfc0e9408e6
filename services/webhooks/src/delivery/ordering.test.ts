// per_resource ordering across processes: two engines (as two webhooks replicas) on one real
// database, delivering to a real HTTPS receiver. The order is the changes' commit order (the
// outbox seq each event carries), not the event ids nor the order the engines got them; one
// delivery per resource is in flight at a time, whichever engine holds it; resources go in
// parallel; a failing change holds back only its own resource.
import { create, toBinary } from '@bufbuild/protobuf';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import type { Caller } from '@mcs/kit/caller';
import { createDatabase, type Db } from '@mcs/kit/db';
import { createLogger } from '@mcs/kit/log';
import { commerce, events } from '@mcs/proto';
import {
  createTestCerts,
  freshDatabase,
  type MigratedDatabase,
  type Received,
  type Receiver,
  startReceiver,
} from '@mcs/testkit';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { migrateWebhooks } from '../db/migrate.ts';
import { createEndpoint } from '../domain/endpoints.ts';
import { type IncomingEvent, recordEvents } from '../domain/fanout.ts';
import { startRecovery } from '../domain/replays.ts';
import { createSecretBox } from '../domain/secrets.ts';
import { countingDb } from '../testing.ts';
import { createEngine, type Engine } from './engine.ts';
import { createReplayer } from './replayer.ts';
import { createSender } from './sender.ts';

let db: MigratedDatabase;
const box = createSecretBox(Buffer.alloc(32, 5));
const log = createLogger('ordering-test', process.env.TEST_LOG ?? 'silent');
const certs = createTestCerts();
const open: Array<{ close(): Promise<void> } | { stop(): Promise<void> }> = [];
let n = 0;

beforeAll(async () => {
  db = await freshDatabase(migrateWebhooks);
});
afterEach(async () => {
  for (const o of open.splice(0).reverse()) await ('stop' in o ? o.stop() : o.close());
});
afterAll(() => db?.close());

/**
 * One engine, as one webhooks replica runs it: its own pool (1 s time-out: a lease of 2 s), or
 * `on` (a counting db).
 */
function engine(on?: Db, orderingWaitMs?: number): Engine {
  const own = createDatabase(db.url, { name: 'ordering-engine', max: 12 });
  open.push(own);
  const sender = createSender({
    timeoutMs: 1_000,
    allowPrivate: true,
    connectionsPerOrigin: 16,
    ca: certs.ca,
  });
  const e = createEngine({
    db: on ?? own.db,
    box,
    sender,
    log,
    schedule: [100, 200, 300, 400, 500],
    timeoutMs: 1_000,
    leaseMarginMs: 1_000,
    concurrency: 64,
    perEndpoint: 16,
    pollMs: 200,
    ...(orderingWaitMs === undefined ? {} : { orderingWaitMs }),
  });
  open.push(sender, e);
  return e;
}

async function receiver(): Promise<Receiver> {
  const r = await startReceiver({ certs });
  open.push(r);
  return r;
}

async function orderedEndpoint(url: string): Promise<Caller> {
  return (await orderedEndpointWithId(url)).caller;
}

async function orderedEndpointWithId(
  url: string,
  opts: { caller?: Caller; events?: string[]; ordering?: 'per_resource' | 'none' } = {},
): Promise<{ caller: Caller; id: string }> {
  const caller: Caller = opts.caller ?? { accountId: `acct_ord${++n}`, livemode: false };
  const { endpoint } = await db.db.transaction((tx) =>
    createEndpoint(
      tx,
      caller,
      { url, events: opts.events ?? ['*'], ordering: opts.ordering ?? 'per_resource' },
      { box, policy: { allowHttp: true, allowPrivate: true } },
    ),
  );
  return { caller, id: endpoint.id };
}

/** A change of order `order` (its label as the customer's name), committed at outbox seq `seq`. */
function change(
  caller: Caller,
  order: string,
  label: string,
  seq: number,
  eventId?: string,
  atMs = Date.now(),
  type = events.EventType.ORDER_UPDATED,
): IncomingEvent {
  const event = create(events.EventSchema, {
    id: eventId ?? `evt_ord${String(++n).padStart(8, '0')}`,
    type,
    createdAt: timestampFromMs(atMs),
    data: {
      case: 'order',
      value: create(commerce.OrderSchema, {
        id: order,
        status: commerce.OrderStatus.PENDING,
        total: 5n,
        currency: 'EUR',
        customer: { name: label, phone: '+15550100' },
      }),
    },
    livemode: caller.livemode,
    accountId: caller.accountId,
  });
  return { event, payload: toBinary(events.EventSchema, event), seq: String(seq) };
}

/** Records `incoming` as the consumer would, and hands the fresh deliveries to `to` (or to nobody). */
async function record(incoming: IncomingEvent[], to?: Engine) {
  const queued = await recordEvents(db.db, incoming, 3_000);
  to?.enqueue(queued);
  return queued;
}

async function waitUntil(fn: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await fn())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((res) => setTimeout(res, 25));
  }
}

const bodyOf = (g: Received) =>
  JSON.parse(g.body) as { id: string; data: { id: string; customer: { name: string } } };
const labels = (got: Received[], order: string) =>
  got
    .map(bodyOf)
    .filter((b) => b.data.id === order)
    .map((b) => b.data.customer.name);

describe('per_resource ordering with two engines on one database', () => {
  it('follows the commit order (outbox seq), not the event ids nor which engine got which', async () => {
    const r = await receiver();
    r.reply = () => ({ status: 200, delayMs: 40 });
    const [a, b] = [engine(), engine()];
    const caller = await orderedEndpoint(r.url);
    const order = `ord_seq${++n}`;
    // Event ids in the reverse of the commit order (a writer's clock behind another's).
    const changes = [
      change(caller, order, 'first', 101, 'evt_ord_z3'),
      change(caller, order, 'second', 102, 'evt_ord_z2'),
      change(caller, order, 'third', 103, 'evt_ord_z1'),
    ];
    const queued = await record(changes);
    expect(queued).toHaveLength(3);
    // Each engine gets some of them, the latest first.
    a.enqueue([queued[2]!]);
    b.enqueue([queued[1]!]);
    a.enqueue([queued[0]!]);
    const got = await r.waitFor(3, 10_000);
    expect(labels(got, order)).toEqual(['first', 'second', 'third']);
    // One at a time: each was sent after the previous one was answered.
    for (let i = 1; i < got.length; i++) expect(got[i]!.at - got[i - 1]!.at).toBeGreaterThanOrEqual(35);
  });

  it('holds a late earlier change until the later one in flight is answered, then sends it before that one’s retry', async () => {
    const r = await receiver();
    const [a, b] = [engine(), engine()];
    const caller = await orderedEndpoint(r.url);
    const order = `ord_late${++n}`;
    let failedOnce = false;
    r.reply = (g) => {
      const label = bodyOf(g).data.customer.name;
      if (label === 'second' && !failedOnce) {
        failedOnce = true;
        return { status: 500, delayMs: 300 };
      }
      return { status: 200, delayMs: 30 };
    };
    // The later change arrives first (a redelivered batch, or the other replica) and is sent.
    await record([change(caller, order, 'second', 202)], a);
    await r.waitFor(1, 5_000);
    // While it is in flight, the earlier change arrives at the other engine.
    await record([change(caller, order, 'first', 201)], b);
    const got = await r.waitFor(3, 10_000);
    expect(labels(got, order)).toEqual(['second', 'first', 'second']);
    // Not sent while the later one was in flight (it was answered after 300 ms).
    expect(got[1]!.at - got[0]!.at).toBeGreaterThanOrEqual(290);
    expect(got[2]!.at - got[1]!.at).toBeGreaterThanOrEqual(25);
    await new Promise((res) => setTimeout(res, 300));
    expect(r.received).toHaveLength(3);
  });

  it('holds a later version until the earlier one, not yet arrived, is recorded; an unordered endpoint is not held', async () => {
    const r = await receiver();
    r.reply = () => ({ status: 200, delayMs: 20 });
    const plain = await receiver();
    plain.reply = () => ({ status: 200, delayMs: 20 });
    const [a, b] = [engine(), engine()];
    const caller = await orderedEndpoint(r.url);
    await orderedEndpointWithId(plain.url, { caller, ordering: 'none' });
    const order = `ord_ver${++n}`;
    // Version 2 arrives first: the publish of version 1 failed, the outbox poll sends it later.
    const t0 = Date.now();
    await record([{ ...change(caller, order, 'second', 602), version: 2 }], a);
    // The unordered endpoint gets it at once; the ordered one waits.
    await plain.waitFor(1, 5_000);
    await new Promise((res) => setTimeout(res, 800));
    expect(r.received).toHaveLength(0);
    await record([{ ...change(caller, order, 'first', 601), version: 1 }], b);
    const got = await r.waitFor(2, 10_000);
    expect(labels(got, order)).toEqual(['first', 'second']);
    expect(got[0]!.at - t0).toBeGreaterThanOrEqual(800);
    // Version 1's success released version 2 at once (no wait for a poll).
    expect(got[1]!.at - got[0]!.at).toBeLessThan(1_000);
    expect(labels(plain.received, order)).toEqual(['second', 'first']);
  });

  it('waits for the previous version even when the endpoint does not take its type', async () => {
    const r = await receiver();
    r.reply = () => ({ status: 200, delayMs: 20 });
    const a = engine();
    const { caller } = await orderedEndpointWithId(r.url, { events: ['order.updated'] });
    const order = `ord_vtype${++n}`;
    await record([{ ...change(caller, order, 'updated', 702), version: 2 }], a);
    await new Promise((res) => setTimeout(res, 800));
    expect(r.received).toHaveLength(0);
    // Version 1 is an order.created this endpoint does not take: recorded, no delivery here.
    const created = {
      ...change(caller, order, 'created', 701, undefined, Date.now(), events.EventType.ORDER_CREATED),
      version: 1,
    };
    const t1 = Date.now();
    expect(await record([created], a)).toHaveLength(0);
    const got = await r.waitFor(1, 5_000);
    expect(labels(got, order)).toEqual(['updated']);
    // Due again after a poll interval (200 ms here): not the whole wait.
    expect(got[0]!.at - t1).toBeLessThan(2_000);
  });

  it('a previous version that never arrives holds the later one for the ordering wait only', async () => {
    const r = await receiver();
    r.reply = () => ({ status: 200, delayMs: 20 });
    const a = engine(undefined, 1_500);
    const caller = await orderedEndpoint(r.url);
    const order = `ord_vlost${++n}`;
    await record([{ ...change(caller, order, 'first', 801), version: 1 }], a);
    await r.waitFor(1, 5_000);
    // Version 2 is lost for good; version 3 goes once it waited 1.5 s, version 4 after it.
    const t0 = Date.now();
    await record([{ ...change(caller, order, 'third', 803), version: 3 }], a);
    await record([{ ...change(caller, order, 'fourth', 804), version: 4 }], a);
    const got = await r.waitFor(3, 10_000);
    expect(labels(got, order)).toEqual(['first', 'third', 'fourth']);
    expect(got[1]!.at - t0).toBeGreaterThanOrEqual(1_400);
    expect(got[1]!.at - t0).toBeLessThan(4_000);
  });

  it('a recovery sends the events that arrived while the endpoint was disabled in commit order too', async () => {
    const r = await receiver();
    r.reply = () => ({ status: 200, delayMs: 20 });
    const a = engine();
    const { caller, id } = await orderedEndpointWithId(r.url);
    const since = new Date(Date.now() - 1_000);
    await db.pool.query(
      `update webhooks.endpoints set status = 'disabled', disabled_reason = 'manual' where id = $1`,
      [id],
    );
    const order = `ord_rec${++n}`;
    // Recorded while disabled: no delivery. Event ids and times in the reverse of the commit
    // order (written by replicas whose clocks differ), all after the endpoint was created.
    await new Promise((res) => setTimeout(res, 100));
    const t = Date.now();
    const none = await record([
      change(caller, order, 'first', 301, 'evt_ord_rec3', t - 10),
      change(caller, order, 'second', 302, 'evt_ord_rec2', t - 20),
      change(caller, order, 'third', 303, 'evt_ord_rec1', t - 30),
    ]);
    expect(none).toHaveLength(0);
    await db.db.transaction((tx) => startRecovery(tx, caller, id, since));
    const replayer = createReplayer({
      db: db.db,
      log,
      rate: 100,
      leaseMs: 3_000,
      enqueue: (q) => a.enqueue(q),
    });
    open.push(replayer);
    await replayer.runDue();
    const got = await r.waitFor(3, 10_000);
    expect(labels(got, order)).toEqual(['first', 'second', 'third']);
  });

  it('many resources: strict order per resource, resources in parallel, a failing change holds back only its resource', async () => {
    const r = await receiver();
    const [a, b] = [engine(), engine()];
    const caller = await orderedEndpoint(r.url);
    const resources = Array.from({ length: 16 }, (_, i) => `ord_many${++n}x${i}`);
    const changesPer = 8;
    const stuck = resources[0]!;
    let refusals = 0;
    const inFlight = new Map<string, number>();
    let overlap = 0;
    let concurrent = 0;
    let maxConcurrent = 0;
    r.reply = (g) => {
      const { data } = bodyOf(g);
      // A receiver that notices two requests of one resource at once.
      const now = (inFlight.get(data.id) ?? 0) + 1;
      inFlight.set(data.id, now);
      if (now > 1) overlap++;
      concurrent++;
      maxConcurrent = Math.max(maxConcurrent, concurrent);
      setTimeout(() => {
        inFlight.set(data.id, (inFlight.get(data.id) ?? 1) - 1);
        concurrent--;
      }, 25);
      // The stuck resource's first change is refused three times (retries 100, 200, 300 ms).
      if (data.id === stuck && data.customer.name === '0' && refusals < 3) {
        refusals++;
        return { status: 500, delayMs: 25 };
      }
      return { status: 200, delayMs: 25 };
    };
    // Commit order: change k of every resource, then change k + 1 of every resource (seq grows).
    // The consumers take them in batches of 5, alternately (two replicas of one durable).
    const all: IncomingEvent[] = [];
    let seq = 1_000;
    for (let k = 0; k < changesPer; k++)
      for (const res of resources) all.push(change(caller, res, String(k), ++seq));
    for (let i = 0, turn = 0; i < all.length; i += 5, turn++) {
      await record(all.slice(i, i + 5), turn % 2 === 0 ? a : b);
    }
    const total = resources.length * changesPer + 3;
    const got = await r.waitFor(total, 30_000);
    const expected = Array.from({ length: changesPer }, (_, k) => String(k));
    for (const res of resources) {
      expect(labels(got, res), res).toEqual(res === stuck ? ['0', '0', '0', ...expected] : expected);
    }
    expect(overlap).toBe(0);
    // Resources went in parallel.
    expect(maxConcurrent).toBeGreaterThanOrEqual(4);
    // The stuck resource held back only itself: while its first change waited for its retries,
    // the other resources' changes went on (at least one of each on average; timing-free).
    const stuckAt = got.flatMap((g, i) => (bodyOf(g).data.id === stuck ? [i] : []));
    const meanwhile = got.slice(stuckAt[0]! + 1, stuckAt[3]!).filter((g) => bodyOf(g).data.id !== stuck);
    expect(meanwhile.length).toBeGreaterThanOrEqual(resources.length - 1);
    await new Promise((res) => setTimeout(res, 300));
    expect(r.received).toHaveLength(total);
    const { rows } = await db.pool.query(
      `select status, count(*)::int as n from webhooks.deliveries where account_id = $1 group by status`,
      [caller.accountId],
    );
    expect(rows).toEqual([{ status: 'succeeded', n: resources.length * changesPer }]);
  });
  it('records ordered successes together, as unordered ones: no statement per success, order kept', async () => {
    const r = await receiver();
    const counted = countingDb(db.pool);
    const e = engine(counted.db);
    const caller = await orderedEndpoint(r.url);
    // 8 resources, 3 changes each, recorded in one batch.
    const orders = Array.from({ length: 8 }, (_, i) => `ord_grp${n}_${i}`);
    const incoming = orders.flatMap((o, i) =>
      ['a', 'b', 'c'].map((label, k) => change(caller, o, label, 100 + k * 10 + i)),
    );
    await record(incoming, e);
    const got = await r.waitFor(24, 15_000);
    for (const o of orders) expect(labels(got, o)).toEqual(['a', 'b', 'c']);
    await waitUntil(async () => {
      const { rows } = await db.pool.query(
        `select count(*)::int as n from webhooks.deliveries d join webhooks.events ev on ev.id = d.event_id
          where ev.account_id = $1 and d.status = 'succeeded'`,
        [caller.accountId],
      );
      return rows[0].n === 24;
    });
    // Successes went through the group statement; recordAttempt's own update (one transaction
    // per success, as ordered successes had before) never ran.
    const single = counted.statements.filter((st) => /set status = \$1, attempts = \$2/.test(st));
    const groups = counted.statements.filter((st) => st.includes("set status = 'succeeded'"));
    expect(single).toHaveLength(0);
    expect(groups.length).toBeGreaterThan(0);
    expect(groups.length).toBeLessThan(24);
  });
});
