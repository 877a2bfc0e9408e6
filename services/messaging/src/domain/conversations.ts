// Conversation rules: one open conversation per customer phone per account and mode; creating
// one for a phone that has an open conversation returns that conversation (idempotent, no event),
// so integrations can "start or continue" without a lookup first. Closing is final; the
// customer's next conversation is a new one.
import { apiError } from '@mcs/errors';
import type { Caller } from '@mcs/kit/caller';
import type { Tx } from '@mcs/kit/db';
import { isId, newId } from '@mcs/kit/ids';
import { changedAt, ownedBy, ownedRow, pageLimit, pageStart } from '@mcs/kit/resources';
import { requirePhone, requireText } from '@mcs/kit/validate';
import { desc, eq, lt } from 'drizzle-orm';
import { conversations } from '../db/schema.ts';

export const CONVERSATION_STATUSES = ['open', 'closed'] as const;
export type ConversationStatus = (typeof CONVERSATION_STATUSES)[number];
export type Conversation = typeof conversations.$inferSelect & { status: ConversationStatus };

export interface CreateConversationInput {
  customer?: { name?: string; phone?: string } | undefined;
}

export function validateConversation(input: CreateConversationInput): {
  customerName: string;
  customerPhone: string;
} {
  if (!input.customer)
    throw apiError('missing_required_field', {
      param: 'customer',
      message: 'Missing required parameter: customer.',
    });
  return {
    customerName: requireText(input.customer.name, 'customer.name', 200),
    customerPhone: requirePhone(input.customer.phone, 'customer.phone'),
  };
}

async function openFor(tx: Tx, caller: Caller, phone: string): Promise<Conversation | undefined> {
  const [row] = await tx
    .select()
    .from(conversations)
    .where(
      ownedBy(
        conversations,
        caller,
        eq(conversations.customerPhone, phone),
        eq(conversations.status, 'open'),
      ),
    );
  return row as Conversation | undefined;
}

/**
 * Starts a conversation with the customer, or returns their open one (created: false). The
 * partial unique index on open phones decides races: of two concurrent creates for one phone,
 * one inserts and the other finds its row. A stored customer name is kept as it is.
 */
export async function createConversation(
  tx: Tx,
  caller: Caller,
  input: CreateConversationInput,
  now = new Date(),
): Promise<{ conversation: Conversation; created: boolean }> {
  const v = validateConversation(input);
  // Each lap either inserts or finds the conversation in the way; a lap finds nothing only if
  // that conversation was closed in between, and the next insert then succeeds.
  for (let lap = 0; lap < 3; lap++) {
    const [row] = await tx
      .insert(conversations)
      .values({
        id: newId('conv', now.getTime()),
        accountId: caller.accountId,
        livemode: caller.livemode,
        ...v,
        status: 'open',
        createdAt: now,
        updatedAt: now,
        closedAt: null,
      })
      .onConflictDoNothing()
      .returning();
    if (row) return { conversation: row as Conversation, created: true };
    const existing = await openFor(tx, caller, v.customerPhone);
    if (existing) return { conversation: existing, created: false };
  }
  throw new Error('conversation insert kept conflicting without a conflicting row');
}

function missing(id: string, param = 'id') {
  return apiError('resource_missing', { param, message: `No such conversation: ${id}.` });
}

/** `param` names where the id came from (`conversation` in a message route's path). */
export async function getConversation(
  tx: Tx,
  caller: Caller,
  id: string,
  param = 'id',
): Promise<Conversation> {
  if (!isId('conv', id)) throw missing(id, param);
  const [row] = await tx
    .select()
    .from(conversations)
    .where(ownedRow(conversations, caller, id));
  if (!row) throw missing(id, param);
  return row as Conversation;
}

/**
 * The open conversation `id`, locked against closing until `tx` ends: what a new message needs.
 * `param` names where the id came from.
 */
export async function openConversation(
  tx: Tx,
  caller: Caller,
  id: string,
  param: string,
): Promise<Conversation> {
  if (!isId('conv', id)) throw missing(id, param);
  const [row] = (await tx
    .select()
    .from(conversations)
    .where(ownedRow(conversations, caller, id))
    .for('share')) as Conversation[];
  if (!row) throw missing(id, param);
  if (row.status !== 'open') {
    throw apiError('invalid_state_transition', {
      param,
      message: `Conversation ${id} is closed and takes no more messages; start a new conversation.`,
    });
  }
  return row;
}

export async function listConversations(
  tx: Tx,
  caller: Caller,
  opts: { limit?: number; startingAfter?: string; status?: ConversationStatus },
): Promise<{ data: Conversation[]; hasMore: boolean }> {
  const limit = pageLimit(opts.limit);
  const after = pageStart('conv', opts.startingAfter);
  const rows = await tx
    .select()
    .from(conversations)
    .where(
      ownedBy(
        conversations,
        caller,
        opts.status ? eq(conversations.status, opts.status) : undefined,
        after ? lt(conversations.id, after) : undefined,
      ),
    )
    .orderBy(desc(conversations.id))
    .limit(limit + 1);
  return { data: rows.slice(0, limit) as Conversation[], hasMore: rows.length > limit };
}

/** open → closed, under the row lock; closing a closed conversation is refused. */
export async function closeConversation(
  tx: Tx,
  caller: Caller,
  id: string,
  now?: Date,
): Promise<Conversation> {
  if (!isId('conv', id)) throw missing(id);
  const [current] = (await tx
    .select()
    .from(conversations)
    .where(ownedRow(conversations, caller, id))
    .for('update')) as Conversation[];
  if (!current) throw missing(id);
  if (current.status !== 'open') {
    throw apiError('invalid_state_transition', {
      message: `Conversation ${id} cannot go from ${current.status} to closed: only open conversations close.`,
    });
  }
  const at = changedAt(current.updatedAt, now);
  const [row] = await tx
    .update(conversations)
    .set({ status: 'closed', updatedAt: at, closedAt: at })
    .where(eq(conversations.id, current.id))
    .returning();
  return row as Conversation;
}
