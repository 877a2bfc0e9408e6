// The messaging schema: its tables and nobody else's. Migrations:
// `pnpm --filter @mcs/messaging exec drizzle-kit generate`.
// Every row carries account_id and livemode, and every query filters on both (tenant isolation).
// Each keyed write's answer goes to kit's idempotency.keys (kit/idempotency), in the write's own
// statement or transaction; migration 0006 creates that table when missing.

import { outboxTable } from '@mcs/kit/outbox';
import { sql } from 'drizzle-orm';
import { boolean, index, pgSchema, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';

export const messaging = pgSchema('messaging');

export const conversations = messaging.table(
  'conversations',
  {
    id: text('id').primaryKey(),
    accountId: text('account_id').notNull(),
    livemode: boolean('livemode').notNull(),
    customerName: text('customer_name').notNull(),
    customerPhone: text('customer_phone').notNull(),
    status: text('status').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull(),
    updatedAt: timestamp('updated_at', { withTimezone: true, mode: 'date' }).notNull(),
    closedAt: timestamp('closed_at', { withTimezone: true, mode: 'date' }),
  },
  (t) => [
    index('conversations_account_idx').on(t.accountId, t.livemode, t.id),
    index('conversations_status_idx').on(t.accountId, t.livemode, t.status, t.id),
    // One open conversation per customer phone per account and mode, held by the database.
    uniqueIndex('conversations_open_phone_idx')
      .on(t.accountId, t.livemode, t.customerPhone)
      .where(sql`${t.status} = 'open'`),
  ],
);

export const messages = messaging.table(
  'messages',
  {
    id: text('id').primaryKey(),
    accountId: text('account_id').notNull(),
    livemode: boolean('livemode').notNull(),
    conversationId: text('conversation_id')
      .notNull()
      .references(() => conversations.id),
    direction: text('direction').notNull(),
    status: text('status').notNull(),
    text: text('text').notNull(),
    /** The channel that carried it (`sandbox`) and the channel's own id for it. */
    channel: text('channel').notNull(),
    channelMessageId: text('channel_message_id'),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull(),
  },
  (t) => [
    index('messages_conversation_idx').on(t.accountId, t.livemode, t.conversationId, t.id),
    // A channel that delivers the same inbound message twice (webhook retries) records it once.
    uniqueIndex('messages_channel_idx')
      .on(t.accountId, t.livemode, t.channel, t.channelMessageId)
      .where(sql`${t.channelMessageId} is not null`),
  ],
);

export const outbox = outboxTable(messaging);
