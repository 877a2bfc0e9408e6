// The ProductService through an in-memory Connect transport and a stock gRPC client, with the
// events it publishes read back from JetStream.
import { commerce, events } from '@mcs/proto';
import { apiErrorOf } from '@mcs/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { as, type CommerceUnderTest, startCommerce } from '../testing.ts';

let svc: CommerceUnderTest;
beforeAll(async () => {
  svc = await startCommerce();
});
afterAll(() => svc?.close());

const headers = as('acct_products');
const T = events.EventType;
const tea = { name: 'Tea', description: 'Loose leaf', price: 450n, currency: 'EUR' };

describe('ProductService', () => {
  it('creates, updates and archives, each change with its event carrying the product', async () => {
    const client = svc.client(commerce.ProductService);
    const created = await client.createProduct(tea, { headers });
    expect(created).toMatchObject({ ...tea, active: true, livemode: false });
    expect(created.id).toMatch(/^prod_/);

    const updated = await client.updateProduct({ id: created.id, price: 500n }, { headers });
    expect(updated).toMatchObject({ name: 'Tea', description: 'Loose leaf', price: 500n, active: true });
    // Nothing differs: no write, no event.
    expect(await client.updateProduct({ id: created.id, price: 500n }, { headers })).toEqual(updated);
    const archived = await client.archiveProduct({ id: created.id }, { headers });
    expect(archived.active).toBe(false);
    expect(await client.archiveProduct({ id: created.id }, { headers })).toEqual(archived);
    expect(await client.getProduct({ id: created.id }, { headers })).toEqual(archived);

    const sentinel = await client.createProduct(tea, { headers });
    await svc.h.events.waitFor((e) => e.data.value?.id === sentinel.id);
    const seen = svc.h.events.about(created.id);
    expect(seen.map((e) => e.type)).toEqual([T.PRODUCT_CREATED, T.PRODUCT_UPDATED, T.PRODUCT_UPDATED]);
    expect(seen.map((e) => e.data.value)).toEqual([created, updated, archived]);
    expect(seen.every((e) => e.data.case === 'product' && e.accountId === 'acct_products')).toBe(true);
  });

  it('creates once per idempotency key', async () => {
    const client = svc.client(commerce.ProductService);
    const keyed = as('acct_products', { idempotencyKey: 'same-key' });
    const a = await client.createProduct(tea, { headers: keyed });
    const b = await client.createProduct(tea, { headers: keyed });
    expect(b).toEqual(a);
    const sentinel = await client.createProduct(tea, { headers });
    await svc.h.events.waitFor((e) => e.data.value?.id === sentinel.id);
    expect(svc.h.events.about(a.id)).toHaveLength(1);
  });

  it('lists with the active filter, per account and mode', async () => {
    const client = svc.client(commerce.ProductService);
    const mine = as('acct_catalog');
    const a = await client.createProduct(tea, { headers: mine });
    const b = await client.createProduct(tea, { headers: mine });
    await client.archiveProduct({ id: a.id }, { headers: mine });
    const ids = async (active?: boolean) =>
      (await client.listProducts({ active }, { headers: mine })).data.map((p) => p.id).sort();
    // Order within a list is the domain tests' business (two creates may share a millisecond).
    expect(await ids()).toEqual([a.id, b.id].sort());
    expect(await ids(true)).toEqual([b.id]);
    expect(await ids(false)).toEqual([a.id]);
    expect((await client.listProducts({}, { headers: as('acct_catalog', { livemode: true }) })).data).toEqual(
      [],
    );
  });

  it('validates in the service, since gRPC callers skip the gateway', async () => {
    const client = svc.client(commerce.ProductService);
    const cases: Array<[object, string, string]> = [
      [{ name: 'x', currency: 'EUR' }, 'price', 'missing_required_field'],
      [{ price: 1n, currency: 'EUR' }, 'name', 'missing_required_field'],
      [{ name: 'x', price: 1n, currency: 'eur' }, 'currency', 'invalid_currency'],
      [{ name: 'x', price: -1n, currency: 'EUR' }, 'price', 'invalid_value'],
    ];
    for (const [req, param, code] of cases) {
      const e = await apiErrorOf(client.createProduct(req, { headers }));
      expect([e.param, e.code]).toEqual([param, code]);
    }
    const other = await apiErrorOf(client.getProduct({ id: 'prod_nope' }, { headers }));
    expect([other.code, other.err.code]).toEqual(['resource_missing', 5]);
  });

  it('answers a stock gRPC client', async () => {
    const grpc = svc.grpc();
    try {
      const M = commerce.ProductService.method;
      const p = await grpc.call(M.createProduct, tea, headers);
      expect(p.id).toMatch(/^prod_/);
      expect((await grpc.call(M.updateProduct, { id: p.id, name: 'Black tea' }, headers)).name).toBe(
        'Black tea',
      );
      expect((await grpc.call(M.archiveProduct, { id: p.id }, headers)).active).toBe(false);
      expect((await grpc.call(M.listProducts, { active: false }, headers)).data.map((x) => x.id)).toContain(
        p.id,
      );
      await expect(grpc.call(M.getProduct, { id: p.id }, as('acct_stranger'))).rejects.toMatchObject({
        code: 5,
      });
    } finally {
      grpc.close();
    }
  });
});
