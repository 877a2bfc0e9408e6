// The commerce schema: its tables and nobody else's. Migrations: `pnpm --filter @mcs/commerce db:generate`.
// Every row carries account_id and livemode, and every query filters on both (tenant isolation).
// idempotency_key holds the client's Idempotency-Key of the create that made the row: unique per
// account and mode, so a retried create finds the row instead of making another.
import { outboxTable } from '@mcs/kit/outbox';
import { sql } from 'drizzle-orm';
import { bigint, boolean, index, jsonb, pgSchema, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';

export const commerce = pgSchema('commerce');

const createdAt = () => timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull();
const updatedAt = () => timestamp('updated_at', { withTimezone: true, mode: 'date' }).notNull();

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
    idempotencyKey: text('idempotency_key'),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [
    index('products_account_idx').on(t.accountId, t.livemode, t.id),
    uniqueIndex('products_idempotency_idx')
      .on(t.accountId, t.livemode, t.idempotencyKey)
      .where(sql`${t.idempotencyKey} is not null`),
    // The key janitor (kit/resources) frees keys older than 24 hours through this index.
    index('products_key_expiry_idx').on(t.createdAt).where(sql`${t.idempotencyKey} is not null`),
  ],
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
    idempotencyKey: text('idempotency_key'),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [
    index('orders_account_idx').on(t.accountId, t.livemode, t.id),
    index('orders_status_idx').on(t.accountId, t.livemode, t.status, t.id),
    uniqueIndex('orders_idempotency_idx')
      .on(t.accountId, t.livemode, t.idempotencyKey)
      .where(sql`${t.idempotencyKey} is not null`),
    // The key janitor (kit/resources) frees keys older than 24 hours through this index.
    index('orders_key_expiry_idx').on(t.createdAt).where(sql`${t.idempotencyKey} is not null`),
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
    idempotencyKey: text('idempotency_key'),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [
    index('payments_account_idx').on(t.accountId, t.livemode, t.id),
    index('payments_order_idx').on(t.accountId, t.livemode, t.orderId, t.id),
    uniqueIndex('payments_idempotency_idx')
      .on(t.accountId, t.livemode, t.idempotencyKey)
      .where(sql`${t.idempotencyKey} is not null`),
    // The key janitor (kit/resources) frees keys older than 24 hours through this index.
    index('payments_key_expiry_idx').on(t.createdAt).where(sql`${t.idempotencyKey} is not null`),
    // The invariant "at most one successful payment per order", held by the database itself.
    uniqueIndex('payments_one_success_idx').on(t.orderId).where(sql`${t.status} = 'succeeded'`),
  ],
);

export const outbox = outboxTable(commerce);
