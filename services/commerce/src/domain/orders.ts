// Order rules: validation, pricing from products and totals, creation, and the status life cycle.
// Speaks its own types; the handler maps them to and from proto and appends the events.
import { apiError } from '@mcs/errors';
import type { Caller } from '@mcs/kit/caller';
import type { Tx } from '@mcs/kit/db';
import { isId, newId } from '@mcs/kit/ids';
import { type CreateSidecar, insertOnce, type WrittenEvent } from '@mcs/kit/insert-once';
import { changedAt, ownedBy, ownedRow, pageLimit, pageStart } from '@mcs/kit/resources';
import { requireCurrency, requireInteger, requirePhone, requireText } from '@mcs/kit/validate';
import { desc, eq, lt, sql } from 'drizzle-orm';
import { type OrderItemRow, orders, outbox } from '../db/schema.ts';
import { MAX_AMOUNT, type Product, productsById } from './products.ts';

export const ORDER_STATUSES = ['pending', 'paid', 'fulfilled', 'cancelled', 'refunded'] as const;
export type OrderStatus = (typeof ORDER_STATUSES)[number];

export type Order = typeof orders.$inferSelect & { status: OrderStatus };

export interface OrderItemInput {
  product?: string | undefined;
  name?: string | undefined;
  unitAmount?: number | undefined;
  quantity?: number | undefined;
}

export interface CreateOrderInput {
  customer?: { name?: string; phone?: string } | undefined;
  currency?: string | undefined;
  items: OrderItemInput[];
}

export const MAX_ITEMS = 100;
const MAX_QUANTITY = 1_000_000;

export interface ValidOrder {
  customerName: string;
  customerPhone: string;
  currency: string;
  items: OrderItemRow[];
  total: number;
}

function invalidProduct(param: string, message: string) {
  return apiError('invalid_value', { param, message });
}

/**
 * Checks and prices the input; throws the catalog error naming the first bad param. A line
 * with `product` takes that product's name and price: the product must be one of `catalog`
 * (the caller's products, see productsById), active, and priced in the order's currency. A
 * line without one gives its own name and unit_amount.
 */
export function validateOrder(
  input: CreateOrderInput,
  catalog: ReadonlyMap<string, Product> = new Map(),
): ValidOrder {
  if (!input.customer)
    throw apiError('missing_required_field', {
      param: 'customer',
      message: 'Missing required parameter: customer.',
    });
  const customerName = requireText(input.customer.name, 'customer.name', 200);
  const customerPhone = requirePhone(input.customer.phone, 'customer.phone');
  const currency = requireCurrency(input.currency, 'currency');
  if (input.items.length === 0) {
    throw apiError('missing_required_field', {
      param: 'items',
      message: 'An order needs at least one item.',
    });
  }
  if (input.items.length > MAX_ITEMS) {
    throw apiError('invalid_value', { param: 'items', message: `An order has at most ${MAX_ITEMS} items.` });
  }
  const items = input.items.map((item, i): OrderItemRow => {
    const p = `items[${i}]`;
    const quantity = requireInteger(item.quantity, `${p}.quantity`, { min: 1, max: MAX_QUANTITY });
    let line: Omit<OrderItemRow, 'quantity' | 'amount'>;
    if (item.product !== undefined) {
      // The product prices the line; a second price or name would leave it ambiguous.
      for (const [given, param] of [
        [item.name, 'name'],
        [item.unitAmount, 'unit_amount'],
      ] as const) {
        if (given !== undefined)
          throw apiError('invalid_value', {
            param: `${p}.${param}`,
            message: `${p}.${param} cannot be given with ${p}.product: the product sets it.`,
          });
      }
      const product = catalog.get(item.product);
      if (!product) throw invalidProduct(`${p}.product`, `No such product: ${item.product}.`);
      if (!product.active)
        throw invalidProduct(`${p}.product`, `Product ${product.id} is archived and cannot be ordered.`);
      if (product.currency !== currency)
        throw invalidProduct(
          `${p}.product`,
          `Product ${product.id} is priced in ${product.currency}, but the order is in ${currency}.`,
        );
      line = { product: product.id, name: product.name, unitAmount: product.price };
    } else {
      line = {
        product: null,
        name: requireText(item.name, `${p}.name`, 200),
        unitAmount: requireInteger(item.unitAmount, `${p}.unit_amount`, { min: 0, max: MAX_AMOUNT }),
      };
    }
    const amount = line.unitAmount * quantity;
    if (amount > MAX_AMOUNT)
      throw apiError('invalid_value', { param: p, message: `The amount of ${p} is too large.` });
    return { ...line, quantity, amount };
  });
  const total = items.reduce((sum, it) => sum + it.amount, 0);
  if (total > MAX_AMOUNT)
    throw apiError('invalid_value', { param: 'items', message: 'The order total is too large.' });
  return { customerName, customerPhone, currency, items, total };
}

/**
 * Creates a pending order: the order, its event and (for a keyed caller) its idempotency key
 * and answer are written by ONE statement (insertOnce), so `tx` may be the pool itself: a create
 * is one round trip, plus one read of the products its lines name. Validation runs before any
 * write. Throws KeyTaken when the caller's idempotency key was used already (kit/idempotency
 * answers it). Products are read without locks, as in a read-committed transaction: a price or
 * archive committed after that read does not change this order (it keeps the price it was made
 * with, as it would if the change came a moment later).
 */
export async function createOrder(
  tx: Tx,
  caller: Caller,
  input: CreateOrderInput,
  now = new Date(),
  sidecar: CreateSidecar<Order> = {},
): Promise<{ order: Order; event: WrittenEvent | undefined }> {
  const ids = input.items.flatMap((it) => (it.product === undefined ? [] : [it.product]));
  const v = validateOrder(input, ids.length > 0 ? await productsById(tx, caller, ids) : undefined);
  const order: Order = {
    id: newId('ord', now.getTime()),
    accountId: caller.accountId,
    livemode: caller.livemode,
    status: 'pending',
    ...v,
    version: 1, // order.created
    createdAt: now,
    updatedAt: now,
  };
  const { event } = await insertOnce(tx, orders, order, {
    event: sidecar.event && { outbox, of: sidecar.event },
    key: sidecar.key && { ...sidecar.key, caller },
    now,
  });
  return { order, event };
}

function missing(id: string) {
  return apiError('resource_missing', { param: 'id', message: `No such order: ${id}.` });
}

export async function getOrder(tx: Tx, caller: Caller, id: string): Promise<Order> {
  if (!isId('ord', id)) throw missing(id);
  const [row] = await tx
    .select()
    .from(orders)
    .where(ownedRow(orders, caller, id));
  if (!row) throw missing(id);
  return row as Order;
}

/** Reads the order and locks it until `tx` ends: the way to read an order about to change. */
export async function lockOrder(
  tx: Tx,
  caller: Caller,
  id: string,
  strength: 'update' | 'share' = 'update',
): Promise<Order | undefined> {
  if (!isId('ord', id)) return undefined;
  const [row] = await tx
    .select()
    .from(orders)
    .where(ownedRow(orders, caller, id))
    .for(strength);
  return row as Order | undefined;
}

export async function listOrders(
  tx: Tx,
  caller: Caller,
  opts: { limit?: number; startingAfter?: string; status?: OrderStatus },
): Promise<{ data: Order[]; hasMore: boolean }> {
  const limit = pageLimit(opts.limit);
  const after = pageStart('ord', opts.startingAfter);
  const rows = await tx
    .select()
    .from(orders)
    .where(
      ownedBy(
        orders,
        caller,
        opts.status ? eq(orders.status, opts.status) : undefined,
        after ? lt(orders.id, after) : undefined,
      ),
    )
    .orderBy(desc(orders.id))
    .limit(limit + 1);
  return { data: rows.slice(0, limit) as Order[], hasMore: rows.length > limit };
}

// ---------------------------------------------------------------------------------------------
// The life cycle: pending → paid → fulfilled, pending → cancelled, paid → refunded. Nothing else.

/** Each way an order's status changes: `pay` comes from a completed payment, the rest from the API. */
export const ORDER_TRANSITIONS = {
  pay: { from: 'pending', to: 'paid' },
  cancel: { from: 'pending', to: 'cancelled' },
  fulfill: { from: 'paid', to: 'fulfilled' },
  refund: { from: 'paid', to: 'refunded' },
} as const satisfies Record<string, { from: OrderStatus; to: OrderStatus }>;
export type OrderTransition = keyof typeof ORDER_TRANSITIONS;

/** The error for an order that cannot make `transition` from `status`. */
export function illegalTransition(id: string, status: OrderStatus, transition: OrderTransition) {
  const { from, to } = ORDER_TRANSITIONS[transition];
  return apiError('invalid_state_transition', {
    message: `Order ${id} cannot go from ${status} to ${to}: only ${from} orders can become ${to}.`,
  });
}

/**
 * Moves the order along one transition. The row is locked (SELECT … FOR UPDATE) before its
 * status is checked, so of two concurrent transitions from one status exactly one succeeds and
 * the other sees the new status and fails.
 */
export async function transitionOrder(
  tx: Tx,
  caller: Caller,
  id: string,
  transition: OrderTransition,
  now?: Date,
): Promise<Order> {
  const current = await lockOrder(tx, caller, id);
  if (!current) throw missing(id);
  const { from, to } = ORDER_TRANSITIONS[transition];
  if (current.status !== from) throw illegalTransition(id, current.status, transition);
  const [row] = await tx
    .update(orders)
    // Its order.updated is the order's next version (schema.ts `version`).
    .set({ status: to, updatedAt: changedAt(current.updatedAt, now), version: sql`${orders.version} + 1` })
    .where(eq(orders.id, current.id))
    .returning();
  return row as Order;
}
