import { create, fromBinary } from '@bufbuild/protobuf';
import type { Caller } from '@mcs/kit/caller';
import { createKeyStore, idempotencyKeys, KeyTaken } from '@mcs/kit/idempotency';
import type { NewEvent } from '@mcs/kit/outbox';
import { commerce, events } from '@mcs/proto';
import { apiErrorOf, freshDatabase, type MigratedDatabase, secondWaitsForFirst } from '@mcs/testkit';
import { drizzle } from 'drizzle-orm/node-postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateCommerce } from '../db/migrate.ts';
import { outbox } from '../db/schema.ts';
import {
  createOrder,
  getOrder,
  listOrders,
  ORDER_STATUSES,
  ORDER_TRANSITIONS,
  type Order,
  type OrderStatus,
  type OrderTransition,
  transitionOrder,
  validateOrder,
} from './orders.ts';
import { archiveProduct, createProduct } from './products.ts';

let db: MigratedDatabase;
beforeAll(async () => {
  db = await freshDatabase(migrateCommerce);
});
afterAll(() => db?.close());

const caller: Caller = { accountId: 'acct_a', livemode: false };
const good = {
  customer: { name: 'Ada', phone: '+4915112345678' },
  currency: 'EUR',
  items: [
    { name: 'Tea', unitAmount: 450, quantity: 2 },
    { name: 'Cake', unitAmount: 300, quantity: 1 },
  ],
};
/** Strictly increasing times: ids order by their millisecond, and lists by id. */
const clock = (() => {
  let t = Date.now();
  return () => new Date(++t);
})();
const codeOf = async (fn: () => unknown) => (await apiErrorOf(Promise.resolve().then(fn))).code;
const paramOf = async (fn: () => unknown) => (await apiErrorOf(Promise.resolve().then(fn))).param;

describe('validateOrder', () => {
  it('sums item amounts into the total', () => {
    const v = validateOrder(good);
    expect(v.total).toBe(1200);
    expect(v.items.map((i) => i.amount)).toEqual([900, 300]);
  });
  it('requires a customer with name and E.164 phone', async () => {
    expect(await paramOf(() => validateOrder({ ...good, customer: undefined }))).toBe('customer');
    expect(await paramOf(() => validateOrder({ ...good, customer: { phone: '+4915112345678' } }))).toBe(
      'customer.name',
    );
    for (const phone of ['4915112345678', '+49 151', '+1234567', '+1234567890123456', '+0123456789']) {
      expect(await codeOf(() => validateOrder({ ...good, customer: { name: 'A', phone } }))).toBe(
        'invalid_phone',
      );
    }
  });
  it('checks the currency format', async () => {
    for (const currency of ['eur', 'EURO', 'E1R', '', 'ZZZ']) {
      expect(await paramOf(() => validateOrder({ ...good, currency }))).toBe('currency');
    }
  });
  it('needs items with positive quantities and non-negative amounts', async () => {
    expect(await paramOf(() => validateOrder({ ...good, items: [] }))).toBe('items');
    expect(
      await paramOf(() => validateOrder({ ...good, items: [{ name: 'x', unitAmount: 1, quantity: 0 }] })),
    ).toBe('items[0].quantity');
    expect(
      await paramOf(() => validateOrder({ ...good, items: [{ name: 'x', unitAmount: -1, quantity: 1 }] })),
    ).toBe('items[0].unit_amount');
    expect(await paramOf(() => validateOrder({ ...good, items: [{ unitAmount: 1, quantity: 1 }] }))).toBe(
      'items[0].name',
    );
  });
});

describe('orders in the database', () => {
  it('creates, reads and lists within one account and mode only', async () => {
    const { order } = await db.db.transaction((tx) => createOrder(tx, caller, good));
    expect(order).toMatchObject({ status: 'pending', total: 1200, currency: 'EUR' });
    expect((await getOrder(db.db, caller, order.id)).id).toBe(order.id);
    expect(await codeOf(() => getOrder(db.db, { ...caller, accountId: 'acct_b' }, order.id))).toBe(
      'resource_missing',
    );
    expect(await codeOf(() => getOrder(db.db, { ...caller, livemode: true }, order.id))).toBe(
      'resource_missing',
    );
    const page = await listOrders(db.db, caller, {});
    expect(page.data.map((o) => o.id)).toContain(order.id);
  });

  it('pages newest first with starting_after', async () => {
    const acct: Caller = { accountId: 'acct_pages', livemode: false };
    const ids: string[] = [];
    for (let i = 0; i < 5; i++)
      ids.push((await db.db.transaction((tx) => createOrder(tx, acct, good, clock()))).order.id);
    const first = await listOrders(db.db, acct, { limit: 2 });
    expect(first.data.map((o) => o.id)).toEqual([ids[4], ids[3]]);
    expect(first.hasMore).toBe(true);
    const rest = await listOrders(db.db, acct, { limit: 10, startingAfter: ids[3] });
    expect(rest.data.map((o) => o.id)).toEqual([ids[2], ids[1], ids[0]]);
    expect(rest.hasMore).toBe(false);
    expect(await paramOf(() => listOrders(db.db, acct, { limit: 101 }))).toBe('limit');
  });
});

describe('orders priced from products', () => {
  const shop: Caller = { accountId: 'acct_shop', livemode: false };
  const product = async (c: Caller, price: number, currency = 'EUR', name = 'Tea') =>
    (await db.db.transaction((tx) => createProduct(tx, c, { name, price, currency }))).product;
  const order = (c: Caller, items: unknown[], currency = 'EUR') =>
    db.db.transaction((tx) => createOrder(tx, c, { ...good, currency, items: items as never }));

  it("takes each product's name and price, mixed with ad-hoc lines", async () => {
    const tea = await product(shop, 450, 'EUR', 'Green tea');
    const cake = await product(shop, 300, 'EUR', 'Cake');
    const { order: o } = await order(shop, [
      { product: tea.id, quantity: 2 },
      { product: cake.id, quantity: 1 },
      { name: 'Gift wrap', unitAmount: 150, quantity: 1 },
    ]);
    expect(o.total).toBe(450 * 2 + 300 + 150);
    expect(o.items).toEqual([
      { product: tea.id, name: 'Green tea', unitAmount: 450, quantity: 2, amount: 900 },
      { product: cake.id, name: 'Cake', unitAmount: 300, quantity: 1, amount: 300 },
      { product: null, name: 'Gift wrap', unitAmount: 150, quantity: 1, amount: 150 },
    ]);
  });

  it('refuses products of other accounts or modes, archived products and other currencies', async () => {
    const mine = await product(shop, 100);
    const theirs = await product({ ...shop, accountId: 'acct_else' }, 100);
    const live = await product({ ...shop, livemode: true }, 100);
    const usd = await product(shop, 100, 'USD');
    const gone = await product(shop, 100);
    await db.db.transaction((tx) => archiveProduct(tx, shop, gone.id));
    const cases: Array<[string, RegExp]> = [
      ['prod_doesnotexist', /No such product/],
      [theirs.id, /No such product/],
      [live.id, /No such product/],
      [gone.id, /archived/],
      [usd.id, /priced in USD, but the order is in EUR/],
    ];
    for (const [id, message] of cases) {
      const e = await apiErrorOf(
        order(shop, [
          { product: mine.id, quantity: 1 },
          { product: id, quantity: 1 },
        ]),
      );
      expect([e.code, e.param], id).toEqual(['invalid_value', 'items[1].product']);
      expect(e.err.rawMessage).toMatch(message);
    }
    expect((await order(shop, [{ product: usd.id, quantity: 3 }], 'USD')).order.total).toBe(300);
  });

  it('refuses a line that names a product and also a name or price', async () => {
    const p = await product(shop, 100);
    expect((await apiErrorOf(order(shop, [{ product: p.id, quantity: 1, unitAmount: 5 }]))).param).toBe(
      'items[0].unit_amount',
    );
    expect((await apiErrorOf(order(shop, [{ product: p.id, quantity: 1, name: 'x' }]))).param).toBe(
      'items[0].name',
    );
    expect((await apiErrorOf(order(shop, [{ product: p.id, quantity: 0 }]))).param).toBe('items[0].quantity');
  });

  it('keeps the price it was created with when the product changes later', async () => {
    const p = await product(shop, 100);
    const { order: o } = await order(shop, [{ product: p.id, quantity: 1 }]);
    await db.db.transaction((tx) => archiveProduct(tx, shop, p.id));
    expect((await getOrder(db.db, shop, o.id)).items[0]).toMatchObject({ product: p.id, unitAmount: 100 });
  });
});

describe('an order and its event in one statement', () => {
  const acct: Caller = { accountId: 'acct_one', livemode: false };
  /** The pool, with every statement it is sent recorded: one statement is one round trip. */
  const counted = () => {
    const sent: string[] = [];
    return { sent, db: drizzle(db.pool, { logger: { logQuery: (q) => void sent.push(q) } }) };
  };
  const eventOf = (o: Order): NewEvent => ({
    type: events.EventType.ORDER_CREATED,
    accountId: o.accountId,
    livemode: o.livemode,
    data: { case: 'order', value: create(commerce.OrderSchema, { id: o.id, total: BigInt(o.total) }) },
    createdAtMs: o.updatedAt.getTime(),
  });
  /** The events in the outbox (no relay runs here) about order `id`. */
  const eventsAbout = async (id: string) =>
    (await db.db.select().from(outbox))
      .map((r) => ({ ...r, event: fromBinary(events.EventSchema, r.payload) }))
      .filter((r) => r.event.data.value?.id === id);

  it('writes the order, its event and its key with one statement, and none of them for a taken key', async () => {
    const keys = createKeyStore(db.db, idempotencyKeys);
    const keyed: Caller = { ...acct, idempotency: { key: 'k-one-statement', fingerprint: 'fp' } };
    const sidecar = { event: eventOf, key: { keys, answer: (o: Order) => new TextEncoder().encode(o.id) } };
    const { sent, db: pool } = counted();
    const at = clock();
    const first = await createOrder(pool, keyed, good, at, sidecar);
    expect(first.order).toMatchObject({ status: 'pending', total: 1200, createdAt: at, updatedAt: at });
    expect(first.event?.type).toBe('order.created');
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatch(
      /^\s*with k as \(\s*insert into "idempotency"."keys".*o as \(insert into "commerce"."orders" .*e as \(insert into "commerce"."outbox"/s,
    );
    const written = await eventsAbout(first.order.id);
    expect(written).toHaveLength(1);
    expect(written[0]!.type).toBe('order.created');
    expect(written[0]!.eventId).toBe(written[0]!.event.id);
    expect(written[0]!.event.accountId).toBe('acct_one');
    expect(written[0]!.event.data.value).toMatchObject({ id: first.order.id, total: 1200n });
    expect(written[0]!.event.createdAt?.seconds).toBe(BigInt(Math.floor(at.getTime() / 1000)));
    expect(await getOrder(db.db, acct, first.order.id)).toEqual(first.order);

    sent.length = 0;
    const again = await createOrder(pool, keyed, good, clock(), sidecar).catch((e: unknown) => e);
    expect(again).toBeInstanceOf(KeyTaken);
    // The statement that wrote nothing read the first answer too: still one round trip.
    expect(sent).toHaveLength(1);
    expect(new TextDecoder().decode(await keys.lookup(keyed).then((s) => s?.response))).not.toContain(
      first.order.id, // sealed at rest
    );
    expect(await eventsAbout(first.order.id)).toHaveLength(1);
    expect((await listOrders(db.db, keyed, {})).data.map((o) => o.id)).toEqual([first.order.id]);
  });

  it('reads the products first, then writes with one statement; refusals write nothing', async () => {
    const p = (await createProduct(db.db, acct, { name: 'Tea', price: 450, currency: 'EUR' })).product;
    const { sent, db: pool } = counted();
    const { order } = await createOrder(
      pool,
      acct,
      { ...good, items: [{ product: p.id, quantity: 2 }] },
      clock(),
      { event: eventOf },
    );
    expect(order.total).toBe(900);
    expect(sent).toHaveLength(2);
    expect(sent[0]).toMatch(/^select .* from "commerce"."products"/);
    expect(await eventsAbout(order.id)).toHaveLength(1);

    sent.length = 0;
    const before = (await db.db.select().from(outbox)).length;
    const e = await apiErrorOf(
      createOrder(
        pool,
        acct,
        { ...good, currency: 'USD', items: [{ product: p.id, quantity: 1 }] },
        clock(),
        { event: eventOf },
      ),
    );
    expect([e.code, e.param]).toEqual(['invalid_value', 'items[0].product']);
    expect(
      await codeOf(() => createOrder(pool, acct, { ...good, items: [] }, clock(), { event: eventOf })),
    ).toBe('missing_required_field');
    expect(sent).toHaveLength(1); // the product read: validation fails before any write
    expect((await db.db.select().from(outbox)).length).toBe(before);
  });
});

describe('the order life cycle', () => {
  const acct: Caller = { accountId: 'acct_life', livemode: false };
  const newOrder = async () => (await db.db.transaction((tx) => createOrder(tx, acct, good))).order;
  const step = (id: string, t: OrderTransition) =>
    db.db.transaction((tx) => transitionOrder(tx, acct, id, t));
  /** An order brought to `status` along legal steps. */
  const orderIn = async (status: OrderStatus) => {
    const o = await newOrder();
    const path: Record<OrderStatus, OrderTransition[]> = {
      pending: [],
      paid: ['pay'],
      fulfilled: ['pay', 'fulfill'],
      cancelled: ['cancel'],
      refunded: ['pay', 'refund'],
    };
    for (const t of path[status]) await step(o.id, t);
    return o;
  };

  it('allows exactly pending→paid→fulfilled, pending→cancelled and paid→refunded', async () => {
    const allowed = new Set(['pending>pay', 'pending>cancel', 'paid>fulfill', 'paid>refund']);
    for (const status of ORDER_STATUSES) {
      for (const t of Object.keys(ORDER_TRANSITIONS) as OrderTransition[]) {
        const o = await orderIn(status);
        const label = `${status}>${t}`;
        if (allowed.has(label)) {
          const after = await step(o.id, t);
          expect(after.status, label).toBe(ORDER_TRANSITIONS[t].to);
          expect(after.updatedAt.getTime()).toBeGreaterThanOrEqual(o.updatedAt.getTime());
        } else {
          const e = await apiErrorOf(step(o.id, t));
          expect([e.code, e.param], label).toEqual(['invalid_state_transition', '']);
          expect(e.err.rawMessage).toContain(`from ${status} to ${ORDER_TRANSITIONS[t].to}`);
          expect((await getOrder(db.db, acct, o.id)).status).toBe(status);
        }
      }
    }
  });

  it('changes only orders of the caller', async () => {
    const o = await newOrder();
    for (const other of [
      { ...acct, accountId: 'acct_x' },
      { ...acct, livemode: true },
    ]) {
      const e = await apiErrorOf(db.db.transaction((tx) => transitionOrder(tx, other, o.id, 'cancel')));
      expect(e.code).toBe('resource_missing');
    }
    expect((await getOrder(db.db, acct, o.id)).status).toBe('pending');
  });

  it('lets exactly one of several concurrent transitions win', async () => {
    const o = await newOrder();
    const results = await Promise.allSettled([
      step(o.id, 'cancel'),
      step(o.id, 'pay'),
      step(o.id, 'cancel'),
      step(o.id, 'pay'),
    ]);
    const won = results.filter((r) => r.status === 'fulfilled');
    expect(won).toHaveLength(1);
    const final = (await getOrder(db.db, acct, o.id)).status;
    expect(['cancelled', 'paid']).toContain(final);
    for (const r of results) {
      if (r.status === 'rejected')
        expect((await apiErrorOf(Promise.reject(r.reason))).code).toBe('invalid_state_transition');
    }
  });

  it('lists by status', async () => {
    const c: Caller = { accountId: 'acct_filter', livemode: false };
    const a = (await db.db.transaction((tx) => createOrder(tx, c, good, clock()))).order;
    const b = (await db.db.transaction((tx) => createOrder(tx, c, good, clock()))).order;
    await db.db.transaction((tx) => transitionOrder(tx, c, a.id, 'cancel'));
    const ids = async (status?: OrderStatus) =>
      (await listOrders(db.db, c, { status })).data.map((o) => o.id);
    expect(await ids()).toEqual([b.id, a.id]);
    expect(await ids('cancelled')).toEqual([a.id]);
    expect(await ids('pending')).toEqual([b.id]);
    expect(await ids('paid')).toEqual([]);
  });
});

describe('concurrent transitions', () => {
  it('stamps a transition that waited for the order later than the one it waited for', async () => {
    const { order } = await db.db.transaction((tx) => createOrder(tx, caller, good, clock()));
    const ahead = new Date(Date.now() + 60_000);
    const [paid, fulfilled] = await secondWaitsForFirst(
      db,
      (tx) => transitionOrder(tx, caller, order.id, 'pay', ahead),
      (tx) => transitionOrder(tx, caller, order.id, 'fulfill'),
    );
    expect([paid.status, fulfilled.status]).toEqual(['paid', 'fulfilled']);
    expect(fulfilled.updatedAt.getTime()).toBeGreaterThan(paid.updatedAt.getTime());
  });
});
