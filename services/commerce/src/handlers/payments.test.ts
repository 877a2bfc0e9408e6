// PaymentService and its test helpers through an in-memory Connect transport and a stock gRPC
// client; the events of a settlement (payment and order, one transaction) read back from JetStream.
import { commerce, events } from '@mcs/proto';
import { apiErrorOf } from '@mcs/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { as, type CommerceUnderTest, startCommerce } from '../testing.ts';

let svc: CommerceUnderTest;
beforeAll(async () => {
  svc = await startCommerce();
});
afterAll(() => svc?.close());

const headers = as('acct_payments');
const T = events.EventType;
const orderInput = {
  customer: { name: 'Ada', phone: '+4915112345678' },
  currency: 'EUR',
  items: [{ name: 'Tea', unitAmount: 450n, quantity: 2n }],
};

describe('PaymentService', () => {
  it('pays an order: payment.completed and order.updated (paid), then fulfilment', async () => {
    const orders = svc.client(commerce.OrderService);
    const payments = svc.client(commerce.PaymentService);
    const helpers = svc.client(commerce.PaymentTestHelperService);
    const order = await orders.createOrder(orderInput, { headers });
    const payment = await payments.createPayment({ order: order.id }, { headers });
    expect(payment).toMatchObject({
      order: order.id,
      amount: 900n,
      currency: 'EUR',
      status: commerce.PaymentStatus.PENDING,
    });
    expect(payment.id).toMatch(/^pay_/);
    expect(payment.failureMessage).toBeUndefined();

    const completed = await helpers.completePayment({ id: payment.id }, { headers });
    expect(completed.status).toBe(commerce.PaymentStatus.SUCCEEDED);
    const paid = await orders.getOrder({ id: order.id }, { headers });
    expect(paid.status).toBe(commerce.OrderStatus.PAID);
    const fulfilled = await orders.fulfillOrder({ id: order.id }, { headers });
    expect(fulfilled.status).toBe(commerce.OrderStatus.FULFILLED);

    const last = await svc.h.events.waitFor(
      (e) =>
        e.type === T.ORDER_UPDATED &&
        (e.data.value as commerce.Order).status === commerce.OrderStatus.FULFILLED,
    );
    expect(last.data.value).toEqual(fulfilled);
    // Creating the payment emitted nothing; completing it emitted exactly one event.
    expect(svc.h.events.about(payment.id).map((e) => e.type)).toEqual([T.PAYMENT_COMPLETED]);
    expect(svc.h.events.about(payment.id)[0]!.data.value).toEqual(completed);
    const orderEvents = svc.h.events.about(order.id);
    expect(orderEvents.map((e) => e.type)).toEqual([T.ORDER_CREATED, T.ORDER_UPDATED, T.ORDER_UPDATED]);
    expect(orderEvents[1]!.data.value).toEqual(paid);
    expect(orderEvents[1]!.createdAt).toEqual(svc.h.events.about(payment.id)[0]!.createdAt);
    expect(await payments.getPayment({ id: payment.id }, { headers })).toEqual(completed);
  });

  it('fails a payment with payment.failed and leaves the order pending', async () => {
    const orders = svc.client(commerce.OrderService);
    const payments = svc.client(commerce.PaymentService);
    const helpers = svc.client(commerce.PaymentTestHelperService);
    const order = await orders.createOrder(orderInput, { headers });
    const payment = await payments.createPayment({ order: order.id, amount: 900n }, { headers });
    const failed = await helpers.failPayment(
      { id: payment.id, failureMessage: 'Card declined' },
      { headers },
    );
    expect(failed).toMatchObject({ status: commerce.PaymentStatus.FAILED, failureMessage: 'Card declined' });
    const event = await svc.h.events.waitFor((e) => e.data.value?.id === payment.id);
    expect(event.type).toBe(T.PAYMENT_FAILED);
    expect(event.data.value).toEqual(failed);
    expect((await orders.getOrder({ id: order.id }, { headers })).status).toBe(commerce.OrderStatus.PENDING);
    const again = await apiErrorOf(helpers.completePayment({ id: payment.id }, { headers }));
    expect(again.code).toBe('invalid_state_transition');
    const list = await payments.listPayments({ order: order.id }, { headers });
    expect(list.data.map((p) => p.id)).toEqual([payment.id]);
  });

  it('fails the pending payments an order can no longer take: payment.failed for each', async () => {
    const orders = svc.client(commerce.OrderService);
    const payments = svc.client(commerce.PaymentService);
    const helpers = svc.client(commerce.PaymentTestHelperService);
    // Cancelled: its one pending payment fails with the order's updated event.
    const cancelledOrder = await orders.createOrder(orderInput, { headers });
    const open = await payments.createPayment({ order: cancelledOrder.id }, { headers });
    const cancelled = await orders.cancelOrder({ id: cancelledOrder.id }, { headers });
    const voided = await svc.h.events.waitFor((e) => e.data.value?.id === open.id);
    expect(voided.type).toBe(T.PAYMENT_FAILED);
    const failed = voided.data.value as commerce.Payment;
    expect(failed).toMatchObject({ status: commerce.PaymentStatus.FAILED });
    expect(failed.failureMessage).toMatch(/was cancelled/);
    expect(await payments.getPayment({ id: open.id }, { headers })).toEqual(failed);
    expect(svc.h.events.about(cancelledOrder.id).at(-1)?.data.value).toEqual(cancelled);
    // Paid by one of two: the other fails, naming the one that paid.
    const order = await orders.createOrder(orderInput, { headers });
    const first = await payments.createPayment({ order: order.id }, { headers });
    const second = await payments.createPayment({ order: order.id }, { headers });
    await helpers.completePayment({ id: second.id }, { headers });
    const lost = await svc.h.events.waitFor((e) => e.data.value?.id === first.id);
    expect(lost.type).toBe(T.PAYMENT_FAILED);
    expect((lost.data.value as commerce.Payment).failureMessage).toContain(second.id);
    expect(svc.h.events.about(first.id)).toHaveLength(1);
  });

  it('answers test helpers in test mode only, and payments to their account only', async () => {
    const orders = svc.client(commerce.OrderService);
    const payments = svc.client(commerce.PaymentService);
    const helpers = svc.client(commerce.PaymentTestHelperService);
    const live = as('acct_payments', { livemode: true });
    const order = await orders.createOrder(orderInput, { headers: live });
    const payment = await payments.createPayment({ order: order.id }, { headers: live });
    expect(payment.livemode).toBe(true);
    const e = await apiErrorOf(helpers.completePayment({ id: payment.id }, { headers: live }));
    expect([e.code, e.err.code]).toEqual(['test_mode_only', 7]);
    expect((await apiErrorOf(payments.getPayment({ id: payment.id }, { headers }))).code).toBe(
      'resource_missing',
    );
    const wrongAmount = await apiErrorOf(
      payments.createPayment({ order: order.id, amount: 1n }, { headers: live }),
    );
    expect([wrongAmount.code, wrongAmount.param]).toEqual(['invalid_value', 'amount']);
  });

  it('answers a stock gRPC client', async () => {
    const grpc = svc.grpc();
    try {
      const order = await grpc.call(commerce.OrderService.method.createOrder, orderInput, headers);
      const P = commerce.PaymentService.method;
      const payment = await grpc.call(P.createPayment, { order: order.id }, headers);
      const done = await grpc.call(
        commerce.PaymentTestHelperService.method.completePayment,
        { id: payment.id },
        headers,
      );
      expect(done.status).toBe(commerce.PaymentStatus.SUCCEEDED);
      expect((await grpc.call(P.getPayment, { id: payment.id }, headers)).status).toBe(
        commerce.PaymentStatus.SUCCEEDED,
      );
      await expect(grpc.call(P.createPayment, { order: order.id }, headers)).rejects.toMatchObject({
        code: 3,
      });
      const page = await grpc.call(P.listPayments, { order: order.id }, headers);
      expect(page.data.map((p) => p.id)).toEqual([payment.id]);
    } finally {
      grpc.close();
    }
  });
});
