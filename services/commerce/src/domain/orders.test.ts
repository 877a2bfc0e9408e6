import type { Caller } from '@mcs/kit/caller';
import { apiErrorOf, freshDatabase, type MigratedDatabase } from '@mcs/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateCommerce } from '../db/migrate.ts';
import { createOrder, getOrder, listOrders, validateOrder } from './orders.ts';

let db: MigratedDatabase;
beforeAll(async () => {
  db = await freshDatabase(migrateCommerce);
});
afterAll(() => db?.close());

const caller: Caller = { accountId: 'acct_a', livemode: false, idempotencyKey: undefined };
const good = {
  customer: { name: 'Ada', phone: '+4915112345678' },
  currency: 'EUR',
  items: [
    { name: 'Tea', unitAmount: 450, quantity: 2 },
    { name: 'Cake', unitAmount: 300, quantity: 1 },
  ],
};
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
    for (const currency of ['eur', 'EURO', 'E1R', '']) {
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
    const { order, created } = await db.db.transaction((tx) => createOrder(tx, caller, good));
    expect(created).toBe(true);
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

  it('returns the first order again for a reused idempotency key', async () => {
    const keyed = { ...caller, idempotencyKey: 'k-1' };
    const a = await db.db.transaction((tx) => createOrder(tx, keyed, good));
    const b = await db.db.transaction((tx) => createOrder(tx, keyed, good));
    expect(b.created).toBe(false);
    expect(b.order.id).toBe(a.order.id);
    const other = await db.db.transaction((tx) => createOrder(tx, { ...keyed, accountId: 'acct_c' }, good));
    expect(other.created).toBe(true);
  });

  it('pages newest first with starting_after', async () => {
    const acct: Caller = { accountId: 'acct_pages', livemode: false, idempotencyKey: undefined };
    const ids: string[] = [];
    for (let i = 0; i < 5; i++)
      ids.push((await db.db.transaction((tx) => createOrder(tx, acct, good))).order.id);
    const first = await listOrders(db.db, acct, { limit: 2 });
    expect(first.data.map((o) => o.id)).toEqual([ids[4], ids[3]]);
    expect(first.hasMore).toBe(true);
    const rest = await listOrders(db.db, acct, { limit: 10, startingAfter: ids[3] });
    expect(rest.data.map((o) => o.id)).toEqual([ids[2], ids[1], ids[0]]);
    expect(rest.hasMore).toBe(false);
    expect(await paramOf(() => listOrders(db.db, acct, { limit: 101 }))).toBe('limit');
  });
});
