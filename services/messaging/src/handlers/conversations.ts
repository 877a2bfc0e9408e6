// ConversationService over Connect: decode, call the domain in a transaction, encode. Nothing else.
import { create } from '@bufbuild/protobuf';
import type { ServiceImpl } from '@connectrpc/connect';
import { callerOf } from '@mcs/kit/caller';
import { events, messaging } from '@mcs/proto';
import type { Deps } from '../deps.ts';
import {
  closeConversation,
  createConversation,
  getConversation,
  listConversations,
} from '../domain/conversations.ts';
import { conversationStatusOf, emit, toProtoConversation, write } from './proto.ts';

export function conversationHandlers(deps: Deps): ServiceImpl<typeof messaging.ConversationService> {
  return {
    async createConversation(req, ctx) {
      const caller = callerOf(ctx);
      return write(deps, ctx, caller, async (tx) => {
        const { conversation, created } = await createConversation(tx, caller, { customer: req.customer });
        // The customer's open conversation, returned again, is not news.
        if (created) await emit(tx, caller, { type: events.EventType.CONVERSATION_CREATED, conversation });
        return toProtoConversation(conversation);
      });
    },
    async getConversation(req, ctx) {
      return toProtoConversation(await getConversation(deps.db, callerOf(ctx), req.id));
    },
    async listConversations(req, ctx) {
      const page = await listConversations(deps.db, callerOf(ctx), {
        limit: req.limit,
        startingAfter: req.startingAfter || undefined,
        status: conversationStatusOf(req.status),
      });
      return create(messaging.ListConversationsResponseSchema, {
        data: page.data.map(toProtoConversation),
        hasMore: page.hasMore,
      });
    },
    async closeConversation(req, ctx) {
      const caller = callerOf(ctx);
      // The spec has no event for a closed conversation (6.1), so closing emits none.
      return write(deps, ctx, caller, async (tx) =>
        toProtoConversation(await closeConversation(tx, caller, req.id)),
      );
    },
  };
}
