// Order rules: validation, pricing and totals, creation with its event in one transaction.
// Speaks its own types; the handler maps them to and from proto.
import { apiError } from '@mcs/errors';
import type { Caller } from '@mcs/kit/caller';
import type { Tx } from '@mcs/kit/db';
import { newId } from '@mcs/kit/ids';
import { listLimit, requireCurrency, requireInteger, requirePhone, requireText } from '@mcs/kit/validate';
import { and, desc, eq, lt } from 'drizzle-orm';
import { type OrderItemRow, orders } from '../db/schema.ts';

export type OrderStatus = 'pending' | 'paid' | 'fulfilled' | 'cancelled' | 'refunded';

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
const MAX_AMOUNT = 99_999_999_999; // a total above this is a mistake, not an order
const MAX_QUANTITY = 1_000_000;

/** Checks and prices the input; throws the catalog error naming the first bad param. */
export function validateOrder(input: CreateOrderInput): {
  customerName: string;
  customerPhone: string;
  currency: string;
  items: OrderItemRow[];
  total: number;
} {
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
    if (item.product !== undefined) {
      // Catalog products arrive with the products resource; until then a product id names nothing.
      throw apiError('resource_missing', {
        param: `${p}.product`,
        message: `No such product: ${item.product}.`,
      });
    }
    const name = requireText(item.name, `${p}.name`, 200);
    const unitAmount = requireInteger(item.unitAmount, `${p}.unit_amount`, { min: 0, max: MAX_AMOUNT });
    return { product: null, name, unitAmount, quantity, amount: unitAmount * quantity };
  });
  const total = items.reduce((sum, it) => sum + it.amount, 0);
  if (total > MAX_AMOUNT)
    throw apiError('invalid_value', { param: 'items', message: 'The order total is too large.' });
  return { customerName, customerPhone, currency, items, total };
}

/**
 * Creates a pending order in `tx`. With an idempotency key already used by this account and
 * mode, returns the order it created then (created: false) and writes nothing.
 */
export async function createOrder(
  tx: Tx,
  caller: Caller,
  input: CreateOrderInput,
  now = new Date(),
): Promise<{ order: Order; created: boolean }> {
  const v = validateOrder(input);
  const [row] = await tx
    .insert(orders)
    .values({
      id: newId('ord', now.getTime()),
      accountId: caller.accountId,
      livemode: caller.livemode,
      status: 'pending',
      customerName: v.customerName,
      customerPhone: v.customerPhone,
      currency: v.currency,
      total: v.total,
      items: v.items,
      idempotencyKey: caller.idempotencyKey ?? null,
      createdAt: now,
      updatedAt: now,
    })
    .onConflictDoNothing()
    .returning();
  if (row) return { order: row as Order, created: true };
  const [existing] = await tx
    .select()
    .from(orders)
    .where(
      and(
        eq(orders.accountId, caller.accountId),
        eq(orders.livemode, caller.livemode),
        eq(orders.idempotencyKey, caller.idempotencyKey ?? ''),
      ),
    );
  if (!existing) throw new Error('order insert conflicted but no order holds the idempotency key');
  return { order: existing as Order, created: false };
}

export async function getOrder(tx: Tx, caller: Caller, id: string): Promise<Order> {
  const [row] = await tx
    .select()
    .from(orders)
    .where(
      and(eq(orders.id, id), eq(orders.accountId, caller.accountId), eq(orders.livemode, caller.livemode)),
    );
  if (!row) throw apiError('resource_missing', { param: 'id', message: `No such order: ${id}.` });
  return row as Order;
}

export async function listOrders(
  tx: Tx,
  caller: Caller,
  opts: { limit?: number; startingAfter?: string },
): Promise<{ data: Order[]; hasMore: boolean }> {
  const limit = listLimit(opts.limit);
  const rows = await tx
    .select()
    .from(orders)
    .where(
      and(
        eq(orders.accountId, caller.accountId),
        eq(orders.livemode, caller.livemode),
        opts.startingAfter ? lt(orders.id, opts.startingAfter) : undefined,
      ),
    )
    .orderBy(desc(orders.id))
    .limit(limit + 1);
  return { data: rows.slice(0, limit) as Order[], hasMore: rows.length > limit };
}
