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

/**
 * Password sign-in throttling per e-mail address (domain/owners.ts), kept for any address tried,
 * whether an owner has it or not: the throttle answers alike for both, so it tells nobody which
 * addresses have owners. A row goes with a successful sign-in; rows idle a day are swept.
 */
export const signInFailures = accountsSchema.table(
  'sign_in_failures',
  {
    /** The address as tried, trimmed and lower-cased. */
    email: text('email').primaryKey(),
    /** Attempts in a row not (yet) known to have succeeded: counted when each starts. */
    failures: integer('failures').notNull(),
    /** Sign-in with this address refused until then. */
    blockedUntil: timestamp('blocked_until', { withTimezone: true, mode: 'date' }),
    lastAt: timestamp('last_at', { withTimezone: true, mode: 'date' }).notNull(),
  },
  (t) => [index('sign_in_failures_last_at_idx').on(t.lastAt)],
);
