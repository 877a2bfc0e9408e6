// PaymentService and its test helpers over Connect: decode, call the domain in a transaction,
// encode. Nothing else.
import { create } from '@bufbuild/protobuf';
import type { HandlerContext, ServiceImpl } from '@connectrpc/connect';
import { type Caller, callerOf } from '@mcs/kit/caller';
import type { Tx } from '@mcs/kit/db';
import { commerce, events } from '@mcs/proto';
import type { Deps } from '../deps.ts';
import type { Order } from '../domain/orders.ts';
import {
  completeTestPayment,
  createPayment,
  failTestPayment,
  getPayment,
  listPayments,
  type Payment,
} from '../domain/payments.ts';
import { emit, toProtoPayment, write } from './proto.ts';

export function paymentHandlers(deps: Deps): ServiceImpl<typeof commerce.PaymentService> {
  return {
    async createPayment(req, ctx) {
      const caller = callerOf(ctx);
      const provider = caller.livemode ? deps.payments.live : deps.payments.test;
      // No event: a payment is news when it completes or fails. A keyed retry is answered
      // before the provider is asked again (writeKeyed looks the key up first).
      return write(deps, ctx, caller, async (tx) =>
        toProtoPayment(
          await createPayment(
            tx,
            caller,
            { order: req.order, amount: req.amount === undefined ? undefined : Number(req.amount) },
            provider,
          ),
        ),
      );
    },
    async getPayment(req, ctx) {
      return toProtoPayment(await getPayment(deps.db, callerOf(ctx), req.id));
    },
    async listPayments(req, ctx) {
      const page = await listPayments(deps.db, callerOf(ctx), {
        limit: req.limit,
        startingAfter: req.startingAfter || undefined,
        order: req.order || undefined,
      });
      return create(commerce.ListPaymentsResponseSchema, {
        data: page.data.map(toProtoPayment),
        hasMore: page.hasMore,
      });
    },
  };
}

export function paymentTestHelperHandlers(deps: Deps): ServiceImpl<typeof commerce.PaymentTestHelperService> {
  /**
   * A settled payment's events: its own, order.updated when the order became paid, and
   * payment.failed for each other pending payment of the order, which can no longer settle.
   */
  const settled = (
    ctx: HandlerContext,
    caller: Caller,
    settle: (tx: Tx) => Promise<{ payment: Payment; order: Order | undefined; voided: Payment[] }>,
  ) =>
    write(deps, ctx, caller, async (tx) => {
      const { payment, order, voided } = await settle(tx);
      await emit(tx, caller, {
        type:
          payment.status === 'succeeded'
            ? events.EventType.PAYMENT_COMPLETED
            : events.EventType.PAYMENT_FAILED,
        payment,
      });
      if (order) await emit(tx, caller, { type: events.EventType.ORDER_UPDATED, order });
      for (const other of voided) {
        await emit(tx, caller, { type: events.EventType.PAYMENT_FAILED, payment: other });
      }
      return toProtoPayment(payment);
    });

  return {
    async completePayment(req, ctx) {
      const caller = callerOf(ctx);
      return settled(ctx, caller, (tx) => completeTestPayment(tx, caller, req.id, deps.payments.test));
    },
    async failPayment(req, ctx) {
      const caller = callerOf(ctx);
      return settled(ctx, caller, (tx) =>
        failTestPayment(tx, caller, req.id, deps.payments.test, req.failureMessage),
      );
    },
  };
}
