// Message rules: text of 1 to 4096 characters, into an open conversation of the caller; outbound
// messages go through a channel, inbound ones come from a channel's inbound path.
import { apiError } from '@mcs/errors';
import type { Caller } from '@mcs/kit/caller';
import type { Tx } from '@mcs/kit/db';
import { isId, newId } from '@mcs/kit/ids';
import { ownedBy, ownedRow, pageLimit, pageStart } from '@mcs/kit/resources';
import { optionalText, requireText } from '@mcs/kit/validate';
import { and, desc, eq, lt } from 'drizzle-orm';
import { type Channel, ChannelError, type InboundMessage, type SandboxChannel } from '../channels/channel.ts';
import { messages } from '../db/schema.ts';
import { type Conversation, getConversation, openConversation } from './conversations.ts';

export type MessageDirection = 'inbound' | 'outbound';
/** sent: an outbound message the channel accepted; received: an inbound one. */
export type MessageStatus = 'sent' | 'received';
export type Message = typeof messages.$inferSelect & { direction: MessageDirection; status: MessageStatus };

export const MAX_TEXT = 4096;

/** 1 to 4096 characters (code points), not only white space; kept exactly as given. */
export function validateText(text: string | undefined, param = 'text'): string {
  // Not only white space, yet kept exactly as given (not trimmed): its whole length counts.
  requireText(text, param, MAX_TEXT);
  optionalText(text, param, MAX_TEXT);
  return text as string;
}

/**
 * Sends `text` to the conversation's customer through `channel`. The row is written first and
 * the channel called after, in the same transaction: a channel that refuses leaves nothing
 * behind (the transaction rolls back), and a keyed send that loses a race to its own key rolls
 * back the same way (kit/idempotency). The conversation is share-locked, so it cannot close
 * halfway.
 *
 * The channel call holds the transaction open: fine for the in-process sandbox; a channel with
 * real network latency should instead get a `queued` row and a dispatcher after commit.
 */
export async function sendMessage(
  tx: Tx,
  caller: Caller,
  input: { conversation?: string | undefined; text?: string | undefined },
  channel: Channel,
  at?: Date,
): Promise<Message> {
  // The conversation before the text: a conversation that is not the caller's is 404 whatever the body.
  const conversation = await openConversation(tx, caller, input.conversation ?? '', 'conversation');
  const text = validateText(input.text);
  // Read once the conversation is share-locked: a close waiting for this message takes a later time.
  const now = at ?? new Date();
  const id = newId('msg', now.getTime());
  const [row] = await tx
    .insert(messages)
    .values({
      id,
      accountId: caller.accountId,
      livemode: caller.livemode,
      conversationId: conversation.id,
      direction: 'outbound',
      status: 'sent',
      text,
      channel: channel.name,
      channelMessageId: null,
      createdAt: now,
    })
    .returning();
  if (!row) throw new Error('message insert returned no row');
  let accepted: { channelMessageId: string };
  try {
    accepted = await channel.send({
      messageId: id,
      to: conversation.customerPhone,
      text,
      livemode: caller.livemode,
    });
  } catch (err) {
    if (!(err instanceof ChannelError)) throw err;
    throw apiError('service_unavailable', {
      message: `The ${channel.name} channel did not take the message (${err.message}). Nothing was sent; retry later.`,
    });
  }
  const [sent] = await tx
    .update(messages)
    .set({ channelMessageId: accepted.channelMessageId })
    .where(eq(messages.id, id))
    .returning();
  return sent as Message;
}

/**
 * The inbound path of every channel: records what the channel received in the conversation
 * `conversationId`, which must be open and have the sender as its customer. The same channel
 * message delivered again is recorded once (created: false).
 */
export async function receiveMessage(
  tx: Tx,
  caller: Caller,
  conversationId: string,
  inbound: InboundMessage,
  channel: Channel,
  now?: Date,
): Promise<{ message: Message; created: boolean }> {
  const conversation = await openConversation(tx, caller, conversationId, 'conversation');
  validateText(inbound.text);
  return recordInbound(tx, caller, conversation, inbound, channel, now ?? new Date());
}

/** Test helper: the conversation's customer writes `text` through the sandbox channel. */
export async function receiveTestMessage(
  tx: Tx,
  caller: Caller,
  input: { conversation?: string | undefined; text?: string | undefined },
  sandbox: SandboxChannel,
  now?: Date,
): Promise<{ message: Message; created: boolean }> {
  if (caller.livemode) throw apiError('test_mode_only');
  const conversation = await openConversation(tx, caller, input.conversation ?? '', 'conversation');
  const text = validateText(input.text);
  return recordInbound(
    tx,
    caller,
    conversation,
    sandbox.receive(conversation.customerPhone, text),
    sandbox,
    now ?? new Date(),
  );
}

/** Inserts an inbound message into `conversation` (open, share-locked by the caller). */
async function recordInbound(
  tx: Tx,
  caller: Caller,
  conversation: Conversation,
  inbound: InboundMessage,
  channel: Channel,
  now: Date,
): Promise<{ message: Message; created: boolean }> {
  if (inbound.from !== conversation.customerPhone) {
    throw apiError('invalid_value', {
      param: 'conversation',
      message: `The message is from ${inbound.from}, not from the customer of ${conversation.id}.`,
    });
  }
  const [row] = await tx
    .insert(messages)
    .values({
      id: newId('msg', now.getTime()),
      accountId: caller.accountId,
      livemode: caller.livemode,
      conversationId: conversation.id,
      direction: 'inbound',
      status: 'received',
      text: inbound.text,
      channel: channel.name,
      channelMessageId: inbound.channelMessageId,
      createdAt: now,
    })
    .onConflictDoNothing()
    .returning();
  if (row) return { message: row as Message, created: true };
  const [duplicate] = await tx
    .select()
    .from(messages)
    .where(
      ownedBy(
        messages,
        caller,
        eq(messages.channel, channel.name),
        eq(messages.channelMessageId, inbound.channelMessageId),
      ),
    );
  if (!duplicate) throw new Error('inbound message insert conflicted but no message holds its channel id');
  return { message: duplicate as Message, created: false };
}

function missing(id: string) {
  return apiError('resource_missing', { param: 'id', message: `No such message: ${id}.` });
}

export async function getMessage(tx: Tx, caller: Caller, id: string): Promise<Message> {
  if (!isId('msg', id)) throw missing(id);
  const [row] = await tx
    .select()
    .from(messages)
    .where(ownedRow(messages, caller, id));
  if (!row) throw missing(id);
  return row as Message;
}

/** A conversation's messages, newest first; the conversation must be the caller's. */
export async function listMessages(
  tx: Tx,
  caller: Caller,
  conversationId: string,
  opts: { limit?: number; startingAfter?: string },
): Promise<{ data: Message[]; hasMore: boolean }> {
  const limit = pageLimit(opts.limit);
  const after = pageStart('msg', opts.startingAfter);
  const conversation = await getConversation(tx, caller, conversationId, 'conversation');
  const rows = await tx
    .select()
    .from(messages)
    .where(
      and(
        ownedBy(messages, caller, eq(messages.conversationId, conversation.id)),
        after ? lt(messages.id, after) : undefined,
      ),
    )
    .orderBy(desc(messages.id))
    .limit(limit + 1);
  return { data: rows.slice(0, limit) as Message[], hasMore: rows.length > limit };
}
