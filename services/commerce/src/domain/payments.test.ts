import type { Caller } from '@mcs/kit/caller';
import { apiErrorOf, freshDatabase, type MigratedDatabase, secondWaitsForFirst } from '@mcs/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateCommerce } from '../db/migrate.ts';
import { createSandboxPaymentProvider, SANDBOX_DECLINE } from '../providers/sandbox.ts';
import { createOrder, getOrder, transitionOrder } from './orders.ts';
import {
  cancelOrder,
  completeTestPayment,
  createPayment,
  failTestPayment,
  getPayment,
  listPayments,
  orderCancelledMessage,
  paidByAnotherMessage,
} from './payments.ts';

let db: MigratedDatabase;
beforeAll(async () => {
  db = await freshDatabase(migrateCommerce);
});
afterAll(() => db?.close());

/** Strictly increasing times: ids order by their millisecond, and lists by id. */
const clock = (() => {
  let t = Date.now();
  return () => new Date(++t);
})();
const sandbox = createSandboxPaymentProvider();
const caller: Caller = { accountId: 'acct_pay', livemode: false };
const orderInput = {
  customer: { name: 'Ada', phone: '+4915112345678' },
  currency: 'EUR',
  items: [{ name: 'Tea', unitAmount: 450, quantity: 2 }],
};
const newOrder = async (c: Caller = caller) =>
  (await db.db.transaction((tx) => createOrder(tx, c, orderInput))).order;
const pay = (orderId: string, c: Caller = caller, amount?: number) =>
  db.db.transaction((tx) => createPayment(tx, c, { order: orderId, amount }, sandbox, clock()));
const complete = (id: string, c: Caller = caller) =>
  db.db.transaction((tx) => completeTestPayment(tx, c, id, sandbox));
const fail = (id: string, message?: string, c: Caller = caller) =>
  db.db.transaction((tx) => failTestPayment(tx, c, id, sandbox, message));
const cancel = (orderId: string, c: Caller = caller) =>
  db.db.transaction((tx) => cancelOrder(tx, c, orderId));

describe('creating payments', () => {
  it("opens a pending payment for the order's total at the sandbox", async () => {
    const o = await newOrder();
    const payment = await pay(o.id);
    expect(payment).toMatchObject({
      orderId: o.id,
      amount: 900,
      currency: 'EUR',
      status: 'pending',
      failureMessage: null,
      provider: 'sandbox',
      providerReference: `sandbox_${payment.id}`,
      livemode: false,
    });
    expect(payment.id).toMatch(/^pay_/);
    expect((await pay(o.id, caller, 900)).amount).toBe(900);
  });

  it('names the offending parameter', async () => {
    const o = await newOrder();
    const cases: Array<[() => Promise<unknown>, string, string]> = [
      [() => pay(''), 'order', 'missing_required_field'],
      [() => pay('ord_nope'), 'order', 'invalid_value'],
      [() => pay(o.id, caller, 899), 'amount', 'invalid_value'],
      [() => pay(o.id, caller, -1), 'amount', 'invalid_value'],
      [() => pay(o.id, { ...caller, accountId: 'acct_other' }), 'order', 'invalid_value'],
      [() => pay(o.id, { ...caller, livemode: true }), 'order', 'invalid_value'],
    ];
    for (const [p, param, code] of cases) {
      const e = await apiErrorOf(p());
      expect([e.param, e.code]).toEqual([param, code]);
    }
  });

  it('takes payments only for pending orders', async () => {
    const o = await newOrder();
    await cancel(o.id);
    const e = await apiErrorOf(pay(o.id));
    expect([e.code, e.param]).toEqual(['invalid_state_transition', 'order']);
    expect(e.err.rawMessage).toMatch(/is cancelled/);
  });
});

describe('settling payments', () => {
  it('completes: the payment succeeds and the order becomes paid in the same step', async () => {
    const o = await newOrder();
    const payment = await pay(o.id);
    const done = await complete(payment.id);
    expect(done.payment).toMatchObject({ id: payment.id, status: 'succeeded', failureMessage: null });
    expect(done.order).toMatchObject({ id: o.id, status: 'paid' });
    expect(done.order!.updatedAt).toEqual(done.payment.updatedAt);
    expect((await getOrder(db.db, caller, o.id)).status).toBe('paid');
    const again = await apiErrorOf(complete(payment.id));
    expect(again.code).toBe('invalid_state_transition');
    expect(again.err.rawMessage).toMatch(/from succeeded to succeeded/);
    expect((await apiErrorOf(fail(payment.id))).code).toBe('invalid_state_transition');
  });

  it('fails with the default or the given message and leaves the order payable', async () => {
    const o = await newOrder();
    const first = await pay(o.id);
    const failed = await fail(first.id);
    expect(failed).toMatchObject({
      order: undefined,
      payment: { status: 'failed', failureMessage: SANDBOX_DECLINE },
    });
    const second = await pay(o.id);
    expect((await fail(second.id, 'Card expired')).payment.failureMessage).toBe('Card expired');
    expect((await getOrder(db.db, caller, o.id)).status).toBe('pending');
    const third = await pay(o.id);
    expect((await complete(third.id)).order?.status).toBe('paid');
    expect((await apiErrorOf(complete(first.id))).code).toBe('invalid_state_transition');
    expect((await apiErrorOf(fail(third.id, 'x'.repeat(501)))).param).toBe('failure_message');
  });

  it('lets at most one payment of an order succeed, even concurrently; the others fail', async () => {
    const o = await newOrder();
    const ps = [await pay(o.id), await pay(o.id), await pay(o.id)];
    const results = await Promise.allSettled(ps.map((p) => complete(p.id)));
    const won = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    expect(won).toHaveLength(1);
    for (const r of results) {
      if (r.status === 'rejected')
        expect((await apiErrorOf(Promise.reject(r.reason))).code).toBe('invalid_state_transition');
    }
    const winner = won[0]!.payment.id;
    expect(won[0]!.voided.map((p) => p.id).sort()).toEqual(
      ps
        .map((p) => p.id)
        .filter((id) => id !== winner)
        .sort(),
    );
    const all = (await listPayments(db.db, caller, { order: o.id })).data;
    expect(all.filter((p) => p.status === 'succeeded').map((p) => p.id)).toEqual([winner]);
    const losers = all.filter((p) => p.status === 'failed');
    expect(losers).toHaveLength(2);
    for (const p of losers) {
      expect(p.failureMessage).toBe(paidByAnotherMessage(o.id, winner));
      expect(p.version).toBe(1); // its payment.failed
      expect(p.updatedAt.getTime()).toBeGreaterThanOrEqual(p.createdAt.getTime());
    }
    // The database holds the invariant even against a write that skips the rules.
    const loser = losers[0]!;
    await expect(
      db.pool.query(`update commerce.payments set status = 'succeeded' where id = $1`, [loser.id]),
    ).rejects.toThrow(/payments_one_success_idx/);
  });

  it("fails an order's pending payments when it is cancelled, and settles none of them after", async () => {
    const o = await newOrder();
    const declined = await pay(o.id);
    await fail(declined.id);
    const [a, b] = [await pay(o.id), await pay(o.id)];
    const { order, voided } = await cancel(o.id);
    expect(order.status).toBe('cancelled');
    expect(voided.map((p) => p.id).sort()).toEqual([a.id, b.id].sort());
    for (const p of voided) {
      expect(p).toMatchObject({ status: 'failed', failureMessage: orderCancelledMessage(o.id), version: 1 });
    }
    // The payment that had failed before keeps its own outcome.
    expect(await getPayment(db.db, caller, declined.id)).toMatchObject({
      failureMessage: SANDBOX_DECLINE,
      version: 1,
    });
    const e = await apiErrorOf(complete(a.id));
    expect(e.code).toBe('invalid_state_transition');
    expect(e.err.rawMessage).toMatch(/from failed to succeeded/);
    expect((await getOrder(db.db, caller, o.id)).status).toBe('cancelled');
    // Cancelling twice changes nothing.
    expect((await apiErrorOf(cancel(o.id))).code).toBe('invalid_state_transition');
  });

  it('fails a payment opened while the cancel waited for the order', async () => {
    const o = await newOrder();
    const [opened, { voided }] = await secondWaitsForFirst(
      db,
      (tx) => createPayment(tx, caller, { order: o.id }, sandbox, clock()),
      (tx) => cancelOrder(tx, caller, o.id),
    );
    expect(voided.map((p) => p.id)).toEqual([opened.id]);
    expect((await getPayment(db.db, caller, opened.id)).status).toBe('failed');
  });

  it('fails a payment opened while the completion of another waited for the order', async () => {
    const o = await newOrder();
    const first = await pay(o.id);
    const [opened, { voided, order }] = await secondWaitsForFirst(
      db,
      (tx) => createPayment(tx, caller, { order: o.id }, sandbox, clock()),
      (tx) => completeTestPayment(tx, caller, first.id, sandbox),
    );
    expect(order?.status).toBe('paid');
    expect(voided.map((p) => p.id)).toEqual([opened.id]);
    expect(await getPayment(db.db, caller, opened.id)).toMatchObject({
      status: 'failed',
      failureMessage: paidByAnotherMessage(o.id, first.id),
    });
  });

  it('leaves no payment pending on a settled order, whatever runs at once', async () => {
    // Cancels, completions, declines and new payments of one order, all at once, several times:
    // each ends in an answer or a refusal (never a deadlock), and once the order left pending
    // none of its payments is pending.
    for (let round = 0; round < 8; round++) {
      const o = await newOrder();
      const ps = [await pay(o.id), await pay(o.id), await pay(o.id)];
      const racers: Array<Promise<unknown>> = [
        complete(ps[0]!.id),
        cancel(o.id),
        complete(ps[1]!.id),
        fail(ps[2]!.id),
        pay(o.id),
        pay(o.id),
      ];
      for (const r of await Promise.allSettled(racers)) {
        if (r.status === 'rejected') {
          expect((await apiErrorOf(Promise.reject(r.reason))).code).toBe('invalid_state_transition');
        }
      }
      const status = (await getOrder(db.db, caller, o.id)).status;
      expect(['paid', 'cancelled']).toContain(status);
      const all = (await listPayments(db.db, caller, { order: o.id, limit: 100 })).data;
      expect(all.filter((p) => p.status === 'pending')).toEqual([]);
      expect(all.filter((p) => p.status === 'succeeded')).toHaveLength(status === 'paid' ? 1 : 0);
    }
  });

  it('serves test helpers to test mode only, and to the owner only', async () => {
    const o = await newOrder();
    const payment = await pay(o.id);
    expect((await apiErrorOf(complete(payment.id, { ...caller, livemode: true }))).code).toBe(
      'test_mode_only',
    );
    expect((await apiErrorOf(fail(payment.id, undefined, { ...caller, livemode: true }))).code).toBe(
      'test_mode_only',
    );
    const other = { ...caller, accountId: 'acct_intruder' };
    expect((await apiErrorOf(complete(payment.id, other))).code).toBe('resource_missing');
    expect((await apiErrorOf(getPayment(db.db, other, payment.id))).code).toBe('resource_missing');
    expect((await listPayments(db.db, other, {})).data).toEqual([]);
  });

  it('lists newest first, by order if asked', async () => {
    const c: Caller = { accountId: 'acct_plist', livemode: false };
    const a = await newOrder(c);
    const b = await newOrder(c);
    const p1 = await pay(a.id, c);
    const p2 = await pay(b.id, c);
    const p3 = await pay(a.id, c);
    const ids = async (opts: Parameters<typeof listPayments>[2]) =>
      (await listPayments(db.db, c, opts)).data.map((p) => p.id);
    expect(await ids({})).toEqual([p3.id, p2.id, p1.id]);
    expect(await ids({ order: a.id })).toEqual([p3.id, p1.id]);
    expect(await ids({ order: a.id, startingAfter: p3.id })).toEqual([p1.id]);
  });
});

describe('resource versions (per_resource ordering)', () => {
  it('counts each resource’s events: an order from 1, a payment from its first event, no gap', async () => {
    const o = await newOrder();
    expect(o.version).toBe(1); // order.created
    const p = await pay(o.id);
    expect(p.version).toBe(0); // a new payment emits no event
    const { payment, order } = await complete(p.id);
    expect(payment.version).toBe(1); // payment.completed
    expect(order!.version).toBe(2); // order.updated (paid)
    const fulfilled = await db.db.transaction((tx) => transitionOrder(tx, caller, o.id, 'fulfill'));
    expect(fulfilled.version).toBe(3);
    expect((await getOrder(db.db, caller, o.id)).version).toBe(3);
    // A refused change draws no version.
    await expect(cancel(o.id)).rejects.toThrow();
    expect((await getOrder(db.db, caller, o.id)).version).toBe(3);
    const failed = await fail((await pay((await newOrder()).id)).id);
    expect(failed.payment.version).toBe(1); // payment.failed
  });
});
