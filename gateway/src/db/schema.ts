// The gateway's own schema: idempotency keys. Nothing else of the gateway is stored.
import { boolean, index, integer, pgSchema, primaryKey, text, timestamp } from 'drizzle-orm/pg-core';

export const gateway = pgSchema('gateway');

export const idempotencyKeys = gateway.table(
  'idempotency_keys',
  {
    accountId: text('account_id').notNull(),
    livemode: boolean('livemode').notNull(),
    key: text('key').notNull(),
    /** SHA-256 of method, path and the canonical JSON body of the first request. */
    fingerprint: text('fingerprint').notNull(),
    state: text('state').$type<'in_flight' | 'done'>().notNull(),
    /** While in flight: after this, a crashed request's key may be taken over by a retry. */
    lockedUntil: timestamp('locked_until', { withTimezone: true, mode: 'date' }).notNull(),
    status: integer('status'),
    body: text('body'),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.accountId, t.livemode, t.key] }),
    index('idempotency_created_idx').on(t.createdAt),
  ],
);
