// Pieces every messaging resource shares: tenant scoping, paging and idempotent creation.
// (commerce has the same few lines; they move to @mcs/kit if a third service needs them.)
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

/** The row this account and mode created with the caller's idempotency key. */
export function byIdempotencyKey(
  t: Omit<Owned, 'id'> & { idempotencyKey: PgColumn },
  caller: Caller & { idempotencyKey: string },
): SQL {
  return ownedBy(t, caller, eq(t.idempotencyKey, caller.idempotencyKey));
}

/** The caller with its idempotency key, or undefined when the call has none. */
export function keyed(caller: Caller): (Caller & { idempotencyKey: string }) | undefined {
  return caller.idempotencyKey === undefined
    ? undefined
    : { ...caller, idempotencyKey: caller.idempotencyKey };
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
