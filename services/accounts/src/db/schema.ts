// The accounts schema: its tables and nobody else's. Migrations: `pnpm --filter @mcs/accounts db:generate`.
import { sql } from 'drizzle-orm';
import { boolean, check, index, integer, pgSchema, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';

export const accountsSchema = pgSchema('accounts');

export const accounts = accountsSchema.table('accounts', {
  id: text('id').primaryKey(),
  email: text('email').notNull(),
  name: text('name').notNull(),
  /** Requests per second the gateway allows this account. */
  rateLimit: integer('rate_limit').notNull(),
  createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull(),
});

/**
 * API keys, stored only as a hash of the whole key (see domain/keys.ts); `prefix` and `last4`
 * are kept so people can tell their keys apart. Nothing here can give a key back.
 */
export const apiKeys = accountsSchema.table(
  'api_keys',
  {
    id: text('id').primaryKey(),
    accountId: text('account_id')
      .notNull()
      .references(() => accounts.id),
    kind: text('kind').notNull(),
    livemode: boolean('livemode').notNull(),
    prefix: text('prefix').notNull(),
    last4: text('last4').notNull(),
    keyHash: text('key_hash').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull(),
    revokedAt: timestamp('revoked_at', { withTimezone: true, mode: 'date' }),
  },
  (t) => [
    // Authentication looks keys up by hash equality through this index.
    uniqueIndex('api_keys_key_hash_idx').on(t.keyHash),
    index('api_keys_account_idx').on(t.accountId, t.id),
    check('api_keys_kind_check', sql`${t.kind} in ('secret', 'publishable')`),
  ],
);
