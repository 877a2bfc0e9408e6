// The OrderService through an in-memory Connect transport and through a stock gRPC client on a
// real port; each write's event goes through the outbox to a real JetStream stream.
import { commerce, events } from '@mcs/proto';
import { apiErrorOf } from '@mcs/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { as, type CommerceUnderTest, startCommerce } from '../testing.ts';

let svc: CommerceUnderTest;
beforeAll(async () => {
  svc = await startCommerce();
});
afterAll(() => svc?.close());

const headers = as('acct_h');
const input = {
  customer: { name: 'Ada', phone: '+4915112345678' },
  currency: 'EUR',
  items: [{ name: 'Tea', unitAmount: 450n, quantity: 2n }],
};
const T = events.EventType;

describe('OrderService', () => {
  it('creates an order and publishes order.created through the outbox', async () => {
    const client = svc.client(commerce.OrderService);
    const order = await client.createOrder(input, { headers });
    expect(order.status).toBe(commerce.OrderStatus.PENDING);
    expect(order.total).toBe(900n);

    const event = await svc.h.events.waitFor((e) => e.data.value?.id === order.id);
    expect(event.type).toBe(T.ORDER_CREATED);
    expect(event.data.case).toBe('order');
    expect(event.data.value).toEqual(order);
    expect(event.accountId).toBe('acct_h');
    expect(event.livemode).toBe(false);
    expect(event.createdAt).toEqual(order.createdAt);
    // The relay deletes what it published (in its own transaction, just after publishing).
    await expect.poll(() => svc.h.outboxSize()).toBe(0);
  });

  it('answers a reused key with the first answer, replayed, even when the retry would now be refused', async () => {
    const orders = svc.client(commerce.OrderService);
    const products = svc.client(commerce.ProductService);
    const shop = as('acct_keys');
    const tea = await products.createProduct(
      { name: 'Tea', price: 100n, currency: 'EUR' },
      { headers: shop },
    );
    const body = { ...input, items: [{ product: tea.id, quantity: 1n }] };
    const keyed = as('acct_keys', { idempotencyKey: 'order-after-archive', fingerprint: 'fp-a' });
    const first = await orders.createOrder(body, { headers: keyed });
    await products.archiveProduct({ id: tea.id }, { headers: shop });
    let replayed: string | null = null;
    const retry = await orders.createOrder(body, {
      headers: keyed,
      onHeader: (h) => {
        replayed = h.get('mcs-idempotent-replayed');
      },
    });
    expect(retry).toEqual(first);
    expect(replayed).toBe('true');
    // Without the key the same request is refused now; with the key and another request, 422.
    expect((await apiErrorOf(orders.createOrder(body, { headers: shop }))).param).toBe('items[0].product');
    const reused = as('acct_keys', { idempotencyKey: 'order-after-archive', fingerprint: 'fp-b' });
    expect((await apiErrorOf(orders.createOrder(input, { headers: reused }))).code).toBe(
      'idempotency_key_reused',
    );
    // A transition answers its first outcome too: the retried cancel does not fail as "already cancelled".
    const cancelKey = as('acct_keys', { idempotencyKey: 'cancel-once', fingerprint: 'fp-c' });
    const cancelled = await orders.cancelOrder({ id: first.id }, { headers: cancelKey });
    expect(await orders.cancelOrder({ id: first.id }, { headers: cancelKey })).toEqual(cancelled);
    expect(svc.h.events.about(first.id).length).toBeLessThanOrEqual(2);
  });

  it('prices lines from products and checks their currency', async () => {
    const products = svc.client(commerce.ProductService);
    const orders = svc.client(commerce.OrderService);
    const tea = await products.createProduct({ name: 'Tea', price: 450n, currency: 'EUR' }, { headers });
    const order = await orders.createOrder(
      { ...input, items: [{ product: tea.id, quantity: 3n }] },
      { headers },
    );
    expect(order.items).toMatchObject([{ product: tea.id, name: 'Tea', unitAmount: 450n, amount: 1350n }]);
    expect(order.total).toBe(1350n);
    const e = await apiErrorOf(
      orders.createOrder(
        { ...input, currency: 'USD', items: [{ product: tea.id, quantity: 1n }] },
        { headers },
      ),
    );
    expect([e.code, e.param]).toEqual(['invalid_value', 'items[0].product']);
  });

  it('cancels with order.updated, and refuses illegal transitions without an event', async () => {
    const client = svc.client(commerce.OrderService);
    const order = await client.createOrder(input, { headers });
    const fulfil = await apiErrorOf(client.fulfillOrder({ id: order.id }, { headers }));
    expect(fulfil.code).toBe('invalid_state_transition');
    expect(fulfil.err.rawMessage).toMatch(/from pending to fulfilled/);
    const refund = await apiErrorOf(client.refundOrder({ id: order.id }, { headers }));
    expect(refund.code).toBe('invalid_state_transition');

    const cancelled = await client.cancelOrder({ id: order.id }, { headers });
    expect(cancelled.status).toBe(commerce.OrderStatus.CANCELLED);
    const updated = await svc.h.events.waitFor(
      (e) => e.type === T.ORDER_UPDATED && e.data.value?.id === order.id,
    );
    expect(updated.data.value).toEqual(cancelled);
    expect(updated.data.value).toEqual(await client.getOrder({ id: order.id }, { headers }));
    expect((await apiErrorOf(client.cancelOrder({ id: order.id }, { headers }))).code).toBe(
      'invalid_state_transition',
    );
    // A later write's event arrives after any the refused calls could have made.
    const later = await client.createOrder(input, { headers });
    await svc.h.events.waitFor((e) => e.data.value?.id === later.id);
    expect(svc.h.events.about(order.id).map((e) => e.type)).toEqual([T.ORDER_CREATED, T.ORDER_UPDATED]);
  });

  it('lists by status, and only the caller’s orders', async () => {
    const client = svc.client(commerce.OrderService);
    const mine = as('acct_list');
    const a = await client.createOrder(input, { headers: mine });
    const b = await client.createOrder(input, { headers: mine });
    await client.cancelOrder({ id: a.id }, { headers: mine });
    const ids = async (status?: commerce.OrderStatus) =>
      (await client.listOrders({ status }, { headers: mine })).data.map((o) => o.id).sort();
    // Order within a list is the domain tests' business (two creates may share a millisecond).
    expect(await ids()).toEqual([a.id, b.id].sort());
    expect(await ids(commerce.OrderStatus.CANCELLED)).toEqual([a.id]);
    expect(await ids(commerce.OrderStatus.PENDING)).toEqual([b.id]);
    expect((await client.listOrders({}, { headers: as('acct_nobody') })).data).toEqual([]);
    expect((await apiErrorOf(client.getOrder({ id: a.id }, { headers: as('acct_nobody') }))).code).toBe(
      'resource_missing',
    );
  });

  it('refuses calls without the caller metadata', async () => {
    const client = svc.client(commerce.OrderService);
    const { err } = await apiErrorOf(client.createOrder(input));
    expect(err.code).toBe(16); // Unauthenticated
  });

  it('answers a stock gRPC client with errors carrying the catalog detail', async () => {
    const grpc = svc.grpc();
    try {
      const M = commerce.OrderService.method;
      const order = await grpc.call(M.createOrder, input, headers);
      expect(order.id).toMatch(/^ord_/);
      const read = await grpc.call(M.getOrder, { id: order.id }, headers);
      expect(read.total).toBe(900n);
      await expect(grpc.call(M.getOrder, { id: 'ord_nope' }, headers)).rejects.toMatchObject({
        code: 5, // NOT_FOUND
      });
      const cancelled = await grpc.call(M.cancelOrder, { id: order.id }, headers);
      expect(cancelled.status).toBe(commerce.OrderStatus.CANCELLED);
      await expect(grpc.call(M.fulfillOrder, { id: order.id }, headers)).rejects.toMatchObject({
        code: 3, // INVALID_ARGUMENT
      });
      const page = await grpc.call(M.listOrders, { status: commerce.OrderStatus.CANCELLED }, headers);
      expect(page.data.map((o) => o.id)).toContain(order.id);
    } finally {
      grpc.close();
    }
  });
});
