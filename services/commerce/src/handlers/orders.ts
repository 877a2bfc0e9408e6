// OrderService over Connect: decode, call the domain in a transaction, encode. Nothing else.
import { create } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { HandlerContext, ServiceImpl } from '@connectrpc/connect';
import { callerOf } from '@mcs/kit/caller';
import { appendEvent } from '@mcs/kit/outbox';
import { commerce, events } from '@mcs/proto';
import { outbox } from '../db/schema.ts';
import type { Deps } from '../deps.ts';
import { createOrder, getOrder, listOrders, type Order, type OrderStatus } from '../domain/orders.ts';

const STATUS: Record<OrderStatus, commerce.OrderStatus> = {
  pending: commerce.OrderStatus.PENDING,
  paid: commerce.OrderStatus.PAID,
  fulfilled: commerce.OrderStatus.FULFILLED,
  cancelled: commerce.OrderStatus.CANCELLED,
  refunded: commerce.OrderStatus.REFUNDED,
};

export function toProtoOrder(o: Order): commerce.Order {
  return create(commerce.OrderSchema, {
    id: o.id,
    status: STATUS[o.status],
    customer: { name: o.customerName, phone: o.customerPhone },
    total: BigInt(o.total),
    currency: o.currency,
    items: o.items.map((it) => ({
      ...(it.product ? { product: it.product } : {}),
      name: it.name,
      unitAmount: BigInt(it.unitAmount),
      quantity: BigInt(it.quantity),
      amount: BigInt(it.amount),
    })),
    livemode: o.livemode,
    createdAt: timestampFromDate(o.createdAt),
    updatedAt: timestampFromDate(o.updatedAt),
  });
}

export function orderHandlers(deps: Deps): ServiceImpl<typeof commerce.OrderService> {
  return {
    async createOrder(req, ctx: HandlerContext) {
      const caller = callerOf(ctx);
      const order = await deps.db.transaction(async (tx) => {
        const { order, created } = await createOrder(tx, caller, {
          customer: req.customer,
          currency: req.currency,
          items: req.items.map((it) => ({
            product: it.product,
            name: it.name,
            unitAmount: it.unitAmount === undefined ? undefined : Number(it.unitAmount),
            quantity: Number(it.quantity),
          })),
        });
        if (created) {
          await appendEvent(tx, outbox, {
            type: events.EventType.ORDER_CREATED,
            accountId: caller.accountId,
            livemode: caller.livemode,
            data: { case: 'order', value: toProtoOrder(order) },
            createdAtMs: order.createdAt.getTime(),
          });
        }
        return order;
      });
      deps.relay.wake();
      return toProtoOrder(order);
    },
    async getOrder(req, ctx) {
      return toProtoOrder(await getOrder(deps.db, callerOf(ctx), req.id));
    },
    async listOrders(req, ctx) {
      const page = await listOrders(deps.db, callerOf(ctx), {
        limit: req.limit,
        startingAfter: req.startingAfter || undefined,
      });
      return create(commerce.ListOrdersResponseSchema, {
        data: page.data.map(toProtoOrder),
        hasMore: page.hasMore,
      });
    },
  };
}
