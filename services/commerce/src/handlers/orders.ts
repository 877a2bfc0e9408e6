// OrderService over Connect: decode, call the domain in a transaction, encode. Nothing else.
import { create } from '@bufbuild/protobuf';
import type { HandlerContext, ServiceImpl } from '@connectrpc/connect';
import { type Caller, callerOf } from '@mcs/kit/caller';
import { commerce, events } from '@mcs/proto';
import type { Deps } from '../deps.ts';
import {
  createOrder,
  getOrder,
  listOrders,
  type Order,
  type OrderTransition,
  transitionOrder,
} from '../domain/orders.ts';
import { cancelOrder } from '../domain/payments.ts';
import { createOnce, emit, eventOf, orderStatusOf, toProtoOrder, write } from './proto.ts';

export function orderHandlers(deps: Deps): ServiceImpl<typeof commerce.OrderService> {
  /** One step of the life cycle, with its order.updated. */
  const transition = (ctx: HandlerContext, caller: Caller, id: string, step: OrderTransition) =>
    write(deps, ctx, caller, async (tx) => {
      const order = await transitionOrder(tx, caller, id, step);
      await emit(tx, caller, { type: events.EventType.ORDER_UPDATED, order });
      return toProtoOrder(order);
    });

  return {
    async createOrder(req, ctx) {
      const caller = callerOf(ctx);
      // No transaction: the order, its order.created and its idempotency key in one statement.
      return createOnce(
        deps,
        ctx,
        caller,
        toProtoOrder,
        (order: Order) => eventOf(caller, { type: events.EventType.ORDER_CREATED, order }),
        async (sidecar) => {
          const input = {
            customer: req.customer,
            currency: req.currency,
            items: req.items.map((it) => ({
              product: it.product,
              name: it.name,
              unitAmount: it.unitAmount === undefined ? undefined : Number(it.unitAmount),
              quantity: Number(it.quantity),
            })),
          };
          return (await createOrder(deps.db, caller, input, new Date(), sidecar)).order;
        },
      );
    },
    async getOrder(req, ctx) {
      return toProtoOrder(await getOrder(deps.db, callerOf(ctx), req.id));
    },
    async listOrders(req, ctx) {
      const page = await listOrders(deps.db, callerOf(ctx), {
        limit: req.limit,
        startingAfter: req.startingAfter || undefined,
        status: orderStatusOf(req.status),
      });
      return create(commerce.ListOrdersResponseSchema, {
        data: page.data.map(toProtoOrder),
        hasMore: page.hasMore,
      });
    },
    async cancelOrder(req, ctx) {
      const caller = callerOf(ctx);
      return write(deps, ctx, caller, async (tx) => {
        const { order, voided } = await cancelOrder(tx, caller, req.id);
        await emit(tx, caller, { type: events.EventType.ORDER_UPDATED, order });
        for (const payment of voided)
          await emit(tx, caller, { type: events.EventType.PAYMENT_FAILED, payment });
        return toProtoOrder(order);
      });
    },
    async fulfillOrder(req, ctx) {
      return transition(ctx, callerOf(ctx), req.id, 'fulfill');
    },
    async refundOrder(req, ctx) {
      return transition(ctx, callerOf(ctx), req.id, 'refund');
    },
  };
}
