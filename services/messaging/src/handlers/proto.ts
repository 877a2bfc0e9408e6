// Domain rows → proto messages, and the events that carry them. Proto types stop here: the
// domain never sees them. Every event's data is the resource exactly as the API returns it.
import { create, type Message as ProtoMessage } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { HandlerContext } from '@connectrpc/connect';
import type { Caller } from '@mcs/kit/caller';
import type { Tx } from '@mcs/kit/db';
import { writeKeyed } from '@mcs/kit/idempotency';
import { appendEvent } from '@mcs/kit/outbox';
import { type events, messaging } from '@mcs/proto';
import { outbox } from '../db/schema.ts';
import type { Deps } from '../deps.ts';
import type { Conversation, ConversationStatus } from '../domain/conversations.ts';
import type { Message, MessageDirection, MessageStatus } from '../domain/messages.ts';

const CONVERSATION_STATUS: Record<ConversationStatus, messaging.ConversationStatus> = {
  open: messaging.ConversationStatus.OPEN,
  closed: messaging.ConversationStatus.CLOSED,
};

const DIRECTION: Record<MessageDirection, messaging.MessageDirection> = {
  inbound: messaging.MessageDirection.INBOUND,
  outbound: messaging.MessageDirection.OUTBOUND,
};

const MESSAGE_STATUS: Record<MessageStatus, messaging.MessageStatus> = {
  sent: messaging.MessageStatus.SENT,
  received: messaging.MessageStatus.RECEIVED,
};

/** The domain status of a proto status filter; UNSPECIFIED (or absent) means no filter. */
export function conversationStatusOf(
  status: messaging.ConversationStatus | undefined,
): ConversationStatus | undefined {
  if (status === undefined) return undefined;
  return (Object.keys(CONVERSATION_STATUS) as ConversationStatus[]).find(
    (s) => CONVERSATION_STATUS[s] === status,
  );
}

export function toProtoConversation(c: Conversation): messaging.Conversation {
  return create(messaging.ConversationSchema, {
    id: c.id,
    customer: { name: c.customerName, phone: c.customerPhone },
    status: CONVERSATION_STATUS[c.status],
    livemode: c.livemode,
    createdAt: timestampFromDate(c.createdAt),
    updatedAt: timestampFromDate(c.updatedAt),
    ...(c.closedAt ? { closedAt: timestampFromDate(c.closedAt) } : {}),
  });
}

export function toProtoMessage(m: Message): messaging.Message {
  return create(messaging.MessageSchema, {
    id: m.id,
    conversation: m.conversationId,
    direction: DIRECTION[m.direction],
    status: MESSAGE_STATUS[m.status],
    text: m.text,
    livemode: m.livemode,
    createdAt: timestampFromDate(m.createdAt),
  });
}

type Emitted =
  | { type: events.EventType.CONVERSATION_CREATED; conversation: Conversation }
  | { type: events.EventType.MESSAGE_SENT | events.EventType.MESSAGE_RECEIVED; message: Message };

/** Appends the event of a change in the change's own transaction (the outbox). */
export async function emit(tx: Tx, caller: Caller, e: Emitted): Promise<void> {
  const { data, at } =
    'conversation' in e
      ? {
          data: { case: 'conversation' as const, value: toProtoConversation(e.conversation) },
          at: e.conversation.updatedAt,
        }
      : { data: { case: 'message' as const, value: toProtoMessage(e.message) }, at: e.message.createdAt };
  await appendEvent(tx, outbox, {
    type: e.type,
    accountId: caller.accountId,
    livemode: caller.livemode,
    data,
    createdAtMs: at.getTime(),
    // A conversation's and a message's only event is their created one (closing a conversation,
    // a message's status emit none): always their version 1 (kit/outbox NewEvent.resourceVersion).
    resourceVersion: 1,
  });
}

/**
 * Runs a write in one transaction, once per idempotency key (kit/idempotency writeKeyed: the
 * key and the answer commit with the write); once it committed, the relay publishes its events
 * from memory (kit/relay publishAfter).
 */
export async function write<T extends ProtoMessage>(
  deps: Deps,
  ctx: HandlerContext,
  caller: Caller,
  fn: (tx: Tx) => Promise<T>,
): Promise<T> {
  return deps.relay.publishAfter(() => writeKeyed(deps.db, deps.keys, ctx, caller, fn));
}
