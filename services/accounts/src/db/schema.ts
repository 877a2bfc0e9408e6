// The accounts schema: its tables and nobody else's. Migrations: `pnpm --filter @mcs/accounts db:generate`.
import { sql } from 'drizzle-orm';
import { boolean, check, index, integer, pgSchema, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';

export const accountsSchema = pgSchema('accounts');

export const accounts = accountsSchema.table(
  'accounts',
  {
    id: text('id').primaryKey(),
    email: text('email').notNull(),
    name: text('name').notNull(),
    /** Requests per second the gateway allows this account. */
    rateLimit: integer('rate_limit').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull(),
    /** The owner's dashboard password as a scrypt hash (domain/passwords.ts); null: none set. */
    passwordHash: text('password_hash'),
    /** Failed password sign-ins in a row; reset by a successful one. */
    failedLogins: integer('failed_logins').notNull().default(0),
    /** Password sign-in refused until then (throttling after repeated failures). */
    loginBlockedUntil: timestamp('login_blocked_until', { withTimezone: true, mode: 'date' }),
  },
  (t) => [
    // Sign-in looks an owner up by e-mail: one account per address may have a password.
    uniqueIndex('accounts_owner_email_idx')
      .on(sql`lower(${t.email})`)
      .where(sql`${t.passwordHash} is not null`),
  ],
);

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
    /** Last authentication, written at most once a minute per key. */
    lastUsedAt: timestamp('last_used_at', { withTimezone: true, mode: 'date' }),
  },
  (t) => [
    // Authentication looks keys up by hash equality through this index.
    uniqueIndex('api_keys_key_hash_idx').on(t.keyHash),
    index('api_keys_account_idx').on(t.accountId, t.id),
    check('api_keys_kind_check', sql`${t.kind} in ('secret', 'publishable')`),
  ],
);
