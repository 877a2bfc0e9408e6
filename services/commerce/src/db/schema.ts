// The commerce schema: its tables and nobody else's. Migrations: `pnpm --filter @mcs/commerce db:generate`.
// Every row carries account_id and livemode, and every query filters on both (tenant isolation).
// Each keyed write's answer goes to kit's idempotency.keys (kit/idempotency), in the write's own
// statement or transaction; migration 0006 creates that table when missing.

import { outboxTable } from '@mcs/kit/outbox';
import { sql } from 'drizzle-orm';
import {
  bigint,
  boolean,
  index,
  integer,
  jsonb,
  pgSchema,
  text,
  timestamp,
  uniqueIndex,
} from 'drizzle-orm/pg-core';

export const commerce = pgSchema('commerce');

const createdAt = () => timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull();
const updatedAt = () => timestamp('updated_at', { withTimezone: true, mode: 'date' }).notNull();
/**
 * The resource's version: how many events it has had (kit/outbox NewEvent.resourceVersion).
 * Every write that emits an event of the resource sets `version = version + 1` in the statement
 * that changes the row (under its row lock) and the event carries the result, so the versions
 * of one resource's events are 1, 2, 3, … in commit order, without a gap. Internal: not in the
 * API.
 */
const version = (initial: number) => integer('version').notNull().default(initial);

export const products = commerce.table(
  'products',
  {
    id: text('id').primaryKey(),
    accountId: text('account_id').notNull(),
    livemode: boolean('livemode').notNull(),
    name: text('name').notNull(),
    description: text('description'),
    price: bigint('price', { mode: 'number' }).notNull(),
    currency: text('currency').notNull(),
    active: boolean('active').notNull(),
    /** product.created is 1. */
    version: version(1),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [index('products_account_idx').on(t.accountId, t.livemode, t.id)],
);

export interface OrderItemRow {
  product: string | null;
  name: string;
  unitAmount: number;
  quantity: number;
  amount: number;
}

export const orders = commerce.table(
  'orders',
  {
    id: text('id').primaryKey(),
    accountId: text('account_id').notNull(),
    livemode: boolean('livemode').notNull(),
    status: text('status').notNull(),
    customerName: text('customer_name').notNull(),
    customerPhone: text('customer_phone').notNull(),
    currency: text('currency').notNull(),
    total: bigint('total', { mode: 'number' }).notNull(),
    items: jsonb('items').$type<OrderItemRow[]>().notNull(),
    /** order.created is 1. */
    version: version(1),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [
    index('orders_account_idx').on(t.accountId, t.livemode, t.id),
    index('orders_status_idx').on(t.accountId, t.livemode, t.status, t.id),
  ],
);

export const payments = commerce.table(
  'payments',
  {
    id: text('id').primaryKey(),
    accountId: text('account_id').notNull(),
    livemode: boolean('livemode').notNull(),
    orderId: text('order_id')
      .notNull()
      .references(() => orders.id),
    amount: bigint('amount', { mode: 'number' }).notNull(),
    currency: text('currency').notNull(),
    status: text('status').notNull(),
    failureMessage: text('failure_message'),
    /** Which payment provider holds it (`sandbox`), and its reference there. */
    provider: text('provider').notNull(),
    providerReference: text('provider_reference').notNull(),
    /** Creating a payment emits no event: its first event (completed or failed) is 1. */
    version: version(0),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [
    index('payments_account_idx').on(t.accountId, t.livemode, t.id),
    index('payments_order_idx').on(t.accountId, t.livemode, t.orderId, t.id),
    // The invariant "at most one successful payment per order", held by the database itself.
    uniqueIndex('payments_one_success_idx').on(t.orderId).where(sql`${t.status} = 'succeeded'`),
  ],
);

export const outbox = outboxTable(commerce);
