// What every public resource table shares: tenant scoping and paging. Tables carry accountId and
// livemode; idempotency keys live in their own table (kit/idempotency).
import { apiError } from '@mcs/errors';
import { and, eq, type SQL } from 'drizzle-orm';
import type { PgColumn } from 'drizzle-orm/pg-core';
import type { Caller } from './caller.ts';
import { isId } from './ids.ts';

interface Owned {
  accountId: PgColumn;
  livemode: PgColumn;
}

/**
 * The time of a change to a row whose last change was at `previous`, taken once the row is
 * locked: now, or a millisecond after `previous` should the clock say otherwise. Read before the
 * lock, a change that waited for it could carry an earlier time than the change it waited for,
 * and `updated_at` (and the event that copies it) would not follow the order of commits.
 */
export function changedAt(previous: Date, now: Date = new Date()): Date {
  return now.getTime() > previous.getTime() ? now : new Date(previous.getTime() + 1);
}

/** Rows of the caller's account and mode: every query of a service goes through here. */
export function ownedBy(t: Owned, caller: Caller, ...more: Array<SQL | undefined>): SQL {
  return and(eq(t.accountId, caller.accountId), eq(t.livemode, caller.livemode), ...more)!;
}

/** The caller's row `id` (ids of other accounts or modes name nothing). */
export function ownedRow(t: Owned & { id: PgColumn }, caller: Caller, id: string): SQL {
  return ownedBy(t, caller, eq(t.id, id));
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
      message: `starting_after must be an id starting ${prefix}_, the last of the previous page.`,
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
