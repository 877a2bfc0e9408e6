import type { Caller } from '@mcs/kit/caller';
import { apiErrorOf, freshDatabase, type MigratedDatabase, secondWaitsForFirst } from '@mcs/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateCommerce } from '../db/migrate.ts';
import {
  archiveProduct,
  createProduct,
  getProduct,
  listProducts,
  productsById,
  updateProduct,
  validateProduct,
} from './products.ts';

let db: MigratedDatabase;
beforeAll(async () => {
  db = await freshDatabase(migrateCommerce);
});
afterAll(() => db?.close());

const caller: Caller = { accountId: 'acct_p', livemode: false };
const tea = { name: 'Green tea', description: 'Loose leaf, 100 g', price: 450, currency: 'EUR' };
/** Strictly increasing times: ids order by their millisecond, and lists by id. */
const clock = (() => {
  let t = Date.now();
  return () => new Date(++t);
})();
const errorOf = (fn: () => unknown) => apiErrorOf(Promise.resolve().then(fn));
const create = (c: Caller, input: Parameters<typeof createProduct>[2] = tea) =>
  db.db.transaction((tx) => createProduct(tx, c, input, clock()));

describe('validateProduct', () => {
  it('takes name, optional description, a non-negative integer price and a currency', () => {
    expect(validateProduct(tea)).toEqual(tea);
    for (const currency of ['USD', 'JPY', 'CHF', 'XOF'])
      expect(validateProduct({ ...tea, currency }).currency).toBe(currency);
    expect(validateProduct({ ...tea, description: undefined, price: 0 })).toMatchObject({
      description: null,
      price: 0,
    });
  });
  it('names the offending parameter', async () => {
    const cases: Array<[Partial<typeof tea>, string, string]> = [
      [{ name: undefined }, 'name', 'missing_required_field'],
      [{ name: '   ' }, 'name', 'missing_required_field'],
      [{ name: 'x'.repeat(201) }, 'name', 'invalid_value'],
      [{ description: 'x'.repeat(1001) }, 'description', 'invalid_value'],
      [{ price: undefined }, 'price', 'missing_required_field'],
      [{ price: -1 }, 'price', 'invalid_value'],
      [{ price: 1.5 }, 'price', 'invalid_value'],
      [{ price: 100_000_000_000 }, 'price', 'invalid_value'],
      [{ currency: undefined }, 'currency', 'missing_required_field'],
      [{ currency: 'eur' }, 'currency', 'invalid_currency'],
      // Every bad value gets the one code: not ISO 4217, wrong case or length, not letters.
      ...['ZZZ', 'XXX', 'ABC', 'EURO', 'EU', 'E1R', ' EUR', 'x'.repeat(300)].map(
        (currency): [Partial<typeof tea>, string, string] => [{ currency }, 'currency', 'invalid_currency'],
      ),
    ];
    for (const [patch, param, code] of cases) {
      const e = await errorOf(() => validateProduct({ ...tea, ...patch }));
      expect([e.param, e.code], JSON.stringify(patch)).toEqual([param, code]);
    }
  });
});

describe('products in the database', () => {
  it('creates an active product and reads it back in its own account and mode only', async () => {
    const { product } = await create(caller);
    expect(product).toMatchObject({ ...tea, active: true, livemode: false, accountId: 'acct_p' });
    expect(product.id).toMatch(/^prod_[0-9a-z]{26}$/);
    expect((await getProduct(db.db, caller, product.id)).name).toBe('Green tea');
    for (const other of [
      { ...caller, accountId: 'acct_other' },
      { ...caller, livemode: true },
    ]) {
      const e = await errorOf(() => getProduct(db.db, other, product.id));
      expect([e.code, e.param]).toEqual(['resource_missing', 'id']);
      expect((await errorOf(() => updateProduct(db.db, other, product.id, { price: 1 }))).code).toBe(
        'resource_missing',
      );
      expect((await errorOf(() => archiveProduct(db.db, other, product.id))).code).toBe('resource_missing');
      expect((await productsById(db.db, other, [product.id])).size).toBe(0);
    }
  });

  it('updates only the given fields, and reports no change when nothing differs', async () => {
    const { product } = await create(caller);
    const later = new Date(product.createdAt.getTime() + 1_000);
    const up = await db.db.transaction((tx) =>
      updateProduct(tx, caller, product.id, { price: 500, description: 'Now 120 g' }, later),
    );
    expect(up.changed).toBe(true);
    expect(up.product).toMatchObject({ name: 'Green tea', price: 500, description: 'Now 120 g' });
    expect(up.product.updatedAt).toEqual(later);
    // Its product.updated is version 2 (product.created was 1); no change, no version.
    expect([product.version, up.product.version]).toEqual([1, 2]);
    const same = await db.db.transaction((tx) => updateProduct(tx, caller, product.id, { price: 500 }));
    expect(same).toMatchObject({ changed: false, product: { updatedAt: later, version: 2 } });
    const none = await db.db.transaction((tx) => updateProduct(tx, caller, product.id, {}));
    expect(none.changed).toBe(false);
    expect((await errorOf(() => updateProduct(db.db, caller, product.id, { price: -5 }))).param).toBe(
      'price',
    );
    expect((await errorOf(() => updateProduct(db.db, caller, product.id, { name: '' }))).param).toBe('name');
  });

  it('archives softly (once) and lists by the active filter', async () => {
    const acct: Caller = { accountId: 'acct_list', livemode: false };
    const a = (await create(acct)).product;
    const b = (await create(acct)).product;
    const archived = await db.db.transaction((tx) => archiveProduct(tx, acct, a.id));
    expect(archived).toMatchObject({ changed: true, product: { id: a.id, active: false } });
    expect((await db.db.transaction((tx) => archiveProduct(tx, acct, a.id))).changed).toBe(false);
    expect((await getProduct(db.db, acct, a.id)).active).toBe(false);

    const ids = async (opts: Parameters<typeof listProducts>[2]) =>
      (await listProducts(db.db, acct, opts)).data.map((p) => p.id);
    expect(await ids({})).toEqual([b.id, a.id]);
    expect(await ids({ active: true })).toEqual([b.id]);
    expect(await ids({ active: false })).toEqual([a.id]);
    expect(await listProducts(db.db, acct, { limit: 1 })).toMatchObject({ hasMore: true });
    expect(await ids({ startingAfter: b.id })).toEqual([a.id]);
    // Reactivating is an update like any other.
    const back = await db.db.transaction((tx) => updateProduct(tx, acct, a.id, { active: true }));
    expect(back).toMatchObject({ changed: true, product: { active: true } });
  });
});

describe('ids and paging', () => {
  it('answers ids that cannot exist without a query, and checks starting_after', async () => {
    for (const id of ['', 'prod_', 'ord_01k00000000000000000000000', 'prod_\u0000', '../x']) {
      expect((await errorOf(() => getProduct(db.db, caller, id))).code).toBe('resource_missing');
    }
    const e = await errorOf(() => listProducts(db.db, caller, { startingAfter: 'x' }));
    expect([e.code, e.param]).toEqual(['invalid_value', 'starting_after']);
    for (const limit of [0, 101, -1, 1.5]) {
      const l = await errorOf(() => listProducts(db.db, caller, { limit }));
      expect([l.code, l.param], String(limit)).toEqual(['invalid_value', 'limit']);
    }
    expect((await listProducts(db.db, caller, { limit: undefined })).data.length).toBeLessThanOrEqual(10);
    expect((await productsById(db.db, caller, ['prod_\u0000', 'nope'])).size).toBe(0);
  });
});

describe('concurrent changes', () => {
  it('stamps a change that waited for the row later than the change it waited for', async () => {
    const { product: p } = await create(caller);
    // The first change is stamped a minute ahead and holds the row while the second waits: the
    // second commits after it, so its updated_at (and its event's time) must be later.
    const ahead = new Date(Date.now() + 60_000);
    const [a, b] = await secondWaitsForFirst(
      db,
      (tx) => updateProduct(tx, caller, p.id, { price: 1 }, ahead),
      (tx) => updateProduct(tx, caller, p.id, { price: 2 }),
    );
    expect(b.product.version).toBe(a.product.version + 1);
    expect(b.product.updatedAt.getTime()).toBeGreaterThan(a.product.updatedAt.getTime());
  });
});
