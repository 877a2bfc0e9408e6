// Pieces every commerce resource shares: tenant scoping and idempotent creation.
import { ConnectError } from '@connectrpc/connect';
import { apiError } from '@mcs/errors';
import type { Caller } from '@mcs/kit/caller';
import { isId } from '@mcs/kit/ids';
import { listLimit } from '@mcs/kit/validate';
import { and, eq, type SQL } from 'drizzle-orm';
import type { PgColumn } from 'drizzle-orm/pg-core';

interface Owned {
  id: PgColumn;
  accountId: PgColumn;
  livemode: PgColumn;
}

/** Rows of the caller's account and mode: every query of this service goes through here. */
export function ownedBy(t: Omit<Owned, 'id'>, caller: Caller, ...more: Array<SQL | undefined>): SQL {
  return and(eq(t.accountId, caller.accountId), eq(t.livemode, caller.livemode), ...more)!;
}

/** The caller's row `id` (resource ids of other accounts or modes name nothing). */
export function ownedRow(t: Owned, caller: Caller, id: string): SQL {
  return ownedBy(t, caller, eq(t.id, id));
}

/** The row this account and mode created with the caller's idempotency key, if any. */
export function byIdempotencyKey(
  t: Omit<Owned, 'id'> & { idempotencyKey: PgColumn },
  caller: Caller & { idempotencyKey: string },
): SQL {
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
  find: (caller: Caller & { idempotencyKey: string }) => Promise<T | undefined>,
  make: () => Promise<T | undefined>,
  opts: { findFirst?: boolean } = {},
): Promise<{ row: T; created: boolean }> {
  const key =
    caller.idempotencyKey === undefined ? undefined : { ...caller, idempotencyKey: caller.idempotencyKey };
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

/**
 * The `limit` of a list: 1 to 100, 10 when absent. List requests carry `optional int32 limit`,
 * so a 0 here is a client's 0, which kit's listLimit would take for "absent".
 */
export function pageLimit(limit: number | undefined): number {
  if (limit === 0) {
    throw apiError('invalid_value', { param: 'limit', message: 'limit must be an integer from 1 to 100.' });
  }
  return listLimit(limit);
}
