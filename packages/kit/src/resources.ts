// What every public resource table shares: tenant scoping, idempotent creation, paging, and the
// 24-hour life of idempotency keys. Tables carry accountId, livemode, idempotencyKey, createdAt.
import { ConnectError } from '@connectrpc/connect';
import { apiError } from '@mcs/errors';
import { and, eq, isNotNull, lt, type SQL } from 'drizzle-orm';
import type { PgColumn, PgTable } from 'drizzle-orm/pg-core';
import type { Caller } from './caller.ts';
import type { Db } from './db.ts';
import { isId } from './ids.ts';
import type { Logger } from './log.ts';

/** Idempotency keys live 24 hours (spec 7.4), in the gateway and with the resources alike. */
export const IDEMPOTENCY_WINDOW_MS = 24 * 3600 * 1000;

interface Owned {
  accountId: PgColumn;
  livemode: PgColumn;
}

/** Rows of the caller's account and mode: every query of a service goes through here. */
export function ownedBy(t: Owned, caller: Caller, ...more: Array<SQL | undefined>): SQL {
  return and(eq(t.accountId, caller.accountId), eq(t.livemode, caller.livemode), ...more)!;
}

/** The caller's row `id` (ids of other accounts or modes name nothing). */
export function ownedRow(t: Owned & { id: PgColumn }, caller: Caller, id: string): SQL {
  return ownedBy(t, caller, eq(t.id, id));
}

export type KeyedCaller = Caller & { idempotencyKey: string };

/** The caller with its idempotency key, or undefined when the call has none. */
export function keyed(caller: Caller): KeyedCaller | undefined {
  return caller.idempotencyKey === undefined
    ? undefined
    : { ...caller, idempotencyKey: caller.idempotencyKey };
}

/** The row this account and mode created with the caller's idempotency key. */
export function byIdempotencyKey(t: Owned & { idempotencyKey: PgColumn }, caller: KeyedCaller): SQL {
  return ownedBy(t, caller, eq(t.idempotencyKey, caller.idempotencyKey));
}

/**
 * Creates once per idempotency key. `make` validates and inserts with ON CONFLICT DO NOTHING,
 * resolving no row when the key is taken (by an earlier create, or a concurrent one that won
 * the race); `find` then looks up the row that holds the key.
 *
 * A retry must answer the first outcome even when the world changed since (the order got paid,
 * the product archived) and validation would now fail: a catalog error from `make` is answered
 * with the keyed row when there is one. Catalog errors are raised before any statement fails,
 * so the transaction is still usable for that lookup. With `findFirst`, the key is looked up
 * before `make` runs at all, for creates whose `make` has effects outside the database (a
 * payment provider) that a retry must not repeat; the common path saves that round trip.
 */
export async function createOnce<T>(
  caller: Caller,
  find: (caller: KeyedCaller) => Promise<T | undefined>,
  make: () => Promise<T | undefined>,
  opts: { findFirst?: boolean } = {},
): Promise<{ row: T; created: boolean }> {
  const key = keyed(caller);
  if (key && opts.findFirst) {
    const existing = await find(key);
    if (existing) return { row: existing, created: false };
  }
  let row: T | undefined;
  try {
    row = await make();
  } catch (err) {
    const existing = key && err instanceof ConnectError ? await find(key) : undefined;
    if (existing) return { row: existing, created: false };
    throw err;
  }
  if (row) return { row, created: true };
  const existing = key ? await find(key) : undefined;
  if (!existing) throw new Error('insert conflicted but no row holds the idempotency key');
  return { row: existing, created: false };
}

/**
 * The `starting_after` of a list: an id of the listed kind. Only its shape is checked; lists
 * page by id order, so an id that names nothing still marks a position.
 */
export function pageStart(prefix: string, startingAfter: string | undefined): string | undefined {
  if (!startingAfter) return undefined;
  if (!isId(prefix, startingAfter)) {
    throw apiError('invalid_value', {
      param: 'starting_after',
      message: `starting_after must be the id of a ${prefix}_ object.`,
    });
  }
  return startingAfter;
}

/** The `limit` of a list (`optional int32 limit` in every List request): 1 to 100, 10 when absent. */
export function pageLimit(limit: number | undefined): number {
  if (limit === undefined) return 10;
  if (!Number.isInteger(limit) || limit < 1 || limit > 100) {
    throw apiError('invalid_value', { param: 'limit', message: 'limit must be an integer from 1 to 100.' });
  }
  return limit;
}

type KeyedTable = PgTable & { idempotencyKey: PgColumn; createdAt: PgColumn };

/** One pass of the janitor below. */
export async function sweepExpiredKeys(db: Db, tables: KeyedTable[], now = new Date()): Promise<void> {
  const before = new Date(now.getTime() - IDEMPOTENCY_WINDOW_MS);
  for (const t of tables) {
    await db
      .update(t)
      .set({ idempotencyKey: null } as never)
      .where(and(isNotNull(t.idempotencyKey), lt(t.createdAt, before)));
  }
}

/**
 * Frees idempotency keys older than 24 hours, so a key reused after that starts a new
 * operation (the gateway already treats it as new). Runs every minute; each table needs an
 * index on created_at where idempotency_key is not null.
 */
export function startKeyJanitor(
  db: Db,
  tables: KeyedTable[],
  log: Logger,
  everyMs = 60_000,
): { stop(): void } {
  const sweep = async () => {
    const before = new Date(Date.now() - IDEMPOTENCY_WINDOW_MS);
    for (const t of tables) {
      await db
        .update(t)
        .set({ idempotencyKey: null } as never)
        .where(and(isNotNull(t.idempotencyKey), lt(t.createdAt, before)));
    }
  };
  const run = () =>
    void sweep().catch((err) => log.warn({ err: (err as Error).message }, 'key janitor failed'));
  run();
  const timer = setInterval(run, everyMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
