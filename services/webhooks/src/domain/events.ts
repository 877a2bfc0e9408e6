// The event log as the account reads it (GET /v1/events): each event as it was published and
// delivered, for the caller's account and mode only. Test events are not part of it.
import { apiError } from '@mcs/errors';
import type { Caller } from '@mcs/kit/caller';
import type { Tx } from '@mcs/kit/db';
import { pageLimit, pageStart } from '@mcs/kit/resources';
import { and, desc, eq, lt } from 'drizzle-orm';
import { events } from '../db/schema.ts';

export interface StoredEvent {
  id: string;
  /** The event exactly as published (binary proto); deliveries send its rendering. */
  payload: Uint8Array;
}

const ofCaller = (caller: Caller) =>
  and(eq(events.accountId, caller.accountId), eq(events.livemode, caller.livemode), eq(events.test, false));

export async function getEvent(tx: Tx, caller: Caller, id: string): Promise<StoredEvent> {
  const [row] = await tx
    .select({ id: events.id, payload: events.payload })
    .from(events)
    .where(and(ofCaller(caller), eq(events.id, id)));
  if (!row) throw apiError('resource_missing', { param: 'id', message: `No such event: ${id}.` });
  return row;
}

/** Newest first (event ids sort by creation time), optionally of one type. */
export async function listEvents(
  tx: Tx,
  caller: Caller,
  opts: { limit?: number; startingAfter?: string | undefined; type?: string | undefined },
): Promise<{ data: StoredEvent[]; hasMore: boolean }> {
  const limit = pageLimit(opts.limit);
  const after = pageStart('evt', opts.startingAfter);
  const rows = await tx
    .select({ id: events.id, payload: events.payload })
    .from(events)
    .where(
      and(
        ofCaller(caller),
        opts.type ? eq(events.type, opts.type) : undefined,
        after ? lt(events.id, after) : undefined,
      ),
    )
    .orderBy(desc(events.id))
    .limit(limit + 1);
  return { data: rows.slice(0, limit), hasMore: rows.length > limit };
}
