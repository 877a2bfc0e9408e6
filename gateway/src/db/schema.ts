// The gateway's own schema: idempotency keys and dashboard sessions. Nothing else of the gateway
// is stored.
import { bytea } from '@mcs/kit/db';
import { boolean, index, integer, pgSchema, primaryKey, text, timestamp } from 'drizzle-orm/pg-core';

export const gateway = pgSchema('gateway');

export const idempotencyKeys = gateway.table(
  'idempotency_keys',
  {
    accountId: text('account_id').notNull(),
    livemode: boolean('livemode').notNull(),
    /** SHA-256 of the client's key: the key itself is never stored (it unlocks `body`). */
    keyHash: text('key_hash').notNull(),
    /** SHA-256 of method, path and the canonical JSON body of the first request. */
    fingerprint: text('fingerprint').notNull(),
    state: text('state').$type<'in_flight' | 'done'>().notNull(),
    /** While in flight: after this, a crashed request's key may be taken over by a retry. */
    lockedUntil: timestamp('locked_until', { withTimezone: true, mode: 'date' }).notNull(),
    status: integer('status'),
    /**
     * The answer, sealed with AES-256-GCM under a key derived from the client's Idempotency-Key
     * (answers can hold secrets, e.g. a webhook endpoint's signing secret).
     */
    body: bytea('body'),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.accountId, t.livemode, t.keyHash] }),
    index('idempotency_created_idx').on(t.createdAt),
  ],
);

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
