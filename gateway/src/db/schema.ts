// The gateway's own schema: dashboard sessions and the shared rate-limit buckets. Nothing else of
// the gateway is stored (idempotency keys live with the resources, in each service: kit/idempotency).
import { boolean, doublePrecision, index, integer, pgSchema, text, timestamp } from 'drizzle-orm/pg-core';

export const gateway = pgSchema('gateway');

/**
 * Dashboard sessions (Settings → API): one row per sign-in (owner password or secret API key). The browser
 * holds a random token; only its SHA-256 is stored, so a copy of this table signs nobody in.
 */
export const sessions = gateway.table(
  'sessions',
  {
    /** SHA-256 (hex) of the session token in the `mcs_session` cookie. */
    id: text('id').primaryKey(),
    accountId: text('account_id').notNull(),
    livemode: boolean('livemode').notNull(),
    /**
     * The API key signed in with: its revocation ends the session. Null for an owner who signed
     * in with e-mail and password (such a session may switch between test and live mode).
     */
    keyId: text('key_id'),
    /**
     * An owner's session: the owner's password stamp at sign-in (accounts' OwnerPasswordStamp);
     * once the account's differs, the password was set again and the session is over. Null for
     * a key's session (and for owner sessions from before the column: they sign in again).
     */
    passwordStamp: text('password_stamp'),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull(),
    expiresAt: timestamp('expires_at', { withTimezone: true, mode: 'date' }).notNull(),
  },
  (t) => [index('sessions_key_idx').on(t.keyId), index('sessions_expires_idx').on(t.expiresAt)],
);

/**
 * Rate-limit buckets shared by every gateway replica (rate-limit.ts): one row per account.
 * UNLOGGED (set in the migration): no WAL per request, and a crash or fail-over only refills
 * every bucket.
 */
export const rateLimits = gateway.table('rate_limits', {
  accountId: text('account_id').primaryKey(),
  /** GCRA: when the bucket's next token is due, ms since the epoch (the server's clock). */
  tat: doublePrecision('tat').notNull(),
  /** Tokens the last reservation got, and when it ran (returned to the reserving replica). */
  granted: integer('granted').notNull(),
  at: doublePrecision('at').notNull(),
});
