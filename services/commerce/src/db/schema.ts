// The commerce schema: its tables and nobody else's. Migrations: `pnpm --filter @mcs/commerce db:generate`.
import { outboxTable } from '@mcs/kit/outbox';
import { sql } from 'drizzle-orm';
import { bigint, boolean, index, jsonb, pgSchema, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';

export const commerce = pgSchema('commerce');

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
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull(),
    updatedAt: timestamp('updated_at', { withTimezone: true, mode: 'date' }).notNull(),
  },
  (t) => [
    index('orders_account_idx').on(t.accountId, t.livemode, t.id),
    uniqueIndex('orders_idempotency_idx')
      .on(t.accountId, t.livemode, t.idempotencyKey)
      .where(sql`${t.idempotencyKey} is not null`),
  ],
);

export const outbox = outboxTable(commerce);
