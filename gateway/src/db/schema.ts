// The gateway's own schema: dashboard sessions. Nothing else of the gateway is stored
// (idempotency keys live with the resources, in each service: kit/idempotency).
import { boolean, index, pgSchema, text, timestamp } from 'drizzle-orm/pg-core';

export const gateway = pgSchema('gateway');

/**
 * Dashboard sessions (Settings → API): one row per sign-in with a secret API key. The browser
 * holds a random token; only its SHA-256 is stored, so a copy of this table signs nobody in.
 */
export const sessions = gateway.table(
  'sessions',
  {
    /** SHA-256 (hex) of the session token in the `mcs_session` cookie. */
    id: text('id').primaryKey(),
    accountId: text('account_id').notNull(),
    livemode: boolean('livemode').notNull(),
    /** The API key signed in with: its revocation ends the session. */
    keyId: text('key_id').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull(),
    expiresAt: timestamp('expires_at', { withTimezone: true, mode: 'date' }).notNull(),
  },
  (t) => [index('sessions_key_idx').on(t.keyId), index('sessions_expires_idx').on(t.expiresAt)],
);
