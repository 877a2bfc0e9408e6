// Domain rows → proto messages, and the events that carry them. Proto types stop here: the
// domain never sees them. Every event's data is the resource exactly as the API returns it.
import { create, type Message } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { HandlerContext } from '@connectrpc/connect';
import type { Caller } from '@mcs/kit/caller';
import type { Tx } from '@mcs/kit/db';
import { answerBytes, answerOnce, holdsSecret, writeKeyed } from '@mcs/kit/idempotency';
import type { CreateSidecar } from '@mcs/kit/insert-once';
import { appendEvent, type NewEvent } from '@mcs/kit/outbox';
import { commerce, type events } from '@mcs/proto';
import { outbox } from '../db/schema.ts';
import type { Deps } from '../deps.ts';
import type { Order, OrderStatus } from '../domain/orders.ts';
import type { Payment, PaymentStatus } from '../domain/payments.ts';
import type { Product } from '../domain/products.ts';

export const ORDER_STATUS: Record<OrderStatus, commerce.OrderStatus> = {
  pending: commerce.OrderStatus.PENDING,
  paid: commerce.OrderStatus.PAID,
  fulfilled: commerce.OrderStatus.FULFILLED,
  cancelled: commerce.OrderStatus.CANCELLED,
  refunded: commerce.OrderStatus.REFUNDED,
};

const PAYMENT_STATUS: Record<PaymentStatus, commerce.PaymentStatus> = {
  pending: commerce.PaymentStatus.PENDING,
  succeeded: commerce.PaymentStatus.SUCCEEDED,
  failed: commerce.PaymentStatus.FAILED,
};

/** The domain status of a proto status filter; UNSPECIFIED (or absent) means no filter. */
export function orderStatusOf(status: commerce.OrderStatus | undefined): OrderStatus | undefined {
  if (status === undefined) return undefined;
  return (Object.keys(ORDER_STATUS) as OrderStatus[]).find((s) => ORDER_STATUS[s] === status);
}

export function toProtoProduct(p: Product): commerce.Product {
  return create(commerce.ProductSchema, {
    id: p.id,
    name: p.name,
    ...(p.description === null ? {} : { description: p.description }),
    price: BigInt(p.price),
    currency: p.currency,
    active: p.active,
    livemode: p.livemode,
    createdAt: timestampFromDate(p.createdAt),
    updatedAt: timestampFromDate(p.updatedAt),
  });
}

export function toProtoOrder(o: Order): commerce.Order {
  return create(commerce.OrderSchema, {
    id: o.id,
    status: ORDER_STATUS[o.status],
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

export function toProtoPayment(p: Payment): commerce.Payment {
  return create(commerce.PaymentSchema, {
    id: p.id,
    order: p.orderId,
    amount: BigInt(p.amount),
    currency: p.currency,
    status: PAYMENT_STATUS[p.status],
    ...(p.failureMessage === null ? {} : { failureMessage: p.failureMessage }),
    livemode: p.livemode,
    createdAt: timestampFromDate(p.createdAt),
    updatedAt: timestampFromDate(p.updatedAt),
  });
}

type Emitted =
  | { type: events.EventType.PRODUCT_CREATED | events.EventType.PRODUCT_UPDATED; product: Product }
  | { type: events.EventType.ORDER_CREATED | events.EventType.ORDER_UPDATED; order: Order }
  | { type: events.EventType.PAYMENT_COMPLETED | events.EventType.PAYMENT_FAILED; payment: Payment };

/**
 * The event of a change. Its time is the resource's own `updated_at`, so event and resource
 * agree on when it happened.
 */
export function eventOf(caller: Caller, e: Emitted): NewEvent {
  const { data, at, version } =
    'product' in e
      ? {
          data: { case: 'product' as const, value: toProtoProduct(e.product) },
          at: e.product.updatedAt,
          version: e.product.version,
        }
      : 'order' in e
        ? {
            data: { case: 'order' as const, value: toProtoOrder(e.order) },
            at: e.order.updatedAt,
            version: e.order.version,
          }
        : {
            data: { case: 'payment' as const, value: toProtoPayment(e.payment) },
            at: e.payment.updatedAt,
            version: e.payment.version,
          };
  return {
    type: e.type,
    accountId: caller.accountId,
    livemode: caller.livemode,
    data,
    createdAtMs: at.getTime(),
    // The resource's version after this change (schema.ts `version`), for per_resource ordering.
    resourceVersion: version,
  };
}

/** Appends the event of a change in the change's own transaction (the outbox). */
export async function emit(tx: Tx, caller: Caller, e: Emitted): Promise<void> {
  await appendEvent(tx, outbox, eventOf(caller, e));
}

/**
 * Runs a write in one transaction, once per idempotency key (kit/idempotency writeKeyed: the
 * key and the answer commit with the write); once it committed, the relay publishes its events
 * from memory (kit/relay publishAfter).
 */
export async function write<T extends Message>(
  deps: Deps,
  ctx: HandlerContext,
  caller: Caller,
  fn: (tx: Tx) => Promise<T>,
): Promise<T> {
  return deps.relay.publishAfter(() => writeKeyed(deps.db, deps.keys, ctx, caller, fn));
}

/**
 * A one-statement create (insertOnce): `run` gets the sidecar that makes the same statement
 * store the caller's key with the answer `toProto(row)`, and the event `event(row)`. Answers a
 * reused key with the stored answer. The relay publishes the event from memory once written.
 */
export async function createOnce<R, T extends Message>(
  deps: Deps,
  ctx: HandlerContext,
  caller: Caller,
  toProto: (row: R) => T,
  event: (row: R) => NewEvent,
  run: (sidecar: CreateSidecar<R>) => Promise<R>,
): Promise<T> {
  return deps.relay.publishAfter(() =>
    answerOnce(
      deps.keys,
      ctx,
      caller,
      async () => {
        let proto: T | undefined;
        const protoOf = (row: R) => {
          proto ??= toProto(row);
          return proto;
        };
        const row = await run({
          event,
          key: caller.idempotency && {
            keys: deps.keys,
            answer: (r) => answerBytes(ctx, protoOf(r)),
            sealed: holdsSecret(ctx.method.output),
          },
        });
        return protoOf(row);
      },
      { lookupFirst: false },
    ),
  );
}
