// The gateway's own schema: idempotency keys. Nothing else of the gateway is stored.
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
