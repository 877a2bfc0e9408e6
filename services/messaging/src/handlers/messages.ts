// MessageService and its test helper over Connect: decode, call the domain in a transaction,
// encode. Nothing else.
import { create } from '@bufbuild/protobuf';
import type { ServiceImpl } from '@connectrpc/connect';
import { callerOf } from '@mcs/kit/caller';
import { events, messaging } from '@mcs/proto';
import type { Deps } from '../deps.ts';
import { getMessage, listMessages, receiveTestMessage, sendMessage } from '../domain/messages.ts';
import { emit, toProtoMessage, write } from './proto.ts';

export function messageHandlers(deps: Deps): ServiceImpl<typeof messaging.MessageService> {
  return {
    async sendMessage(req, ctx) {
      const caller = callerOf(ctx);
      const channel = caller.livemode ? deps.channels.live : deps.channels.test;
      return write(deps, ctx, caller, async (tx) => {
        const message = await sendMessage(
          tx,
          caller,
          { conversation: req.conversation, text: req.text },
          channel,
        );
        await emit(tx, caller, { type: events.EventType.MESSAGE_SENT, message });
        return toProtoMessage(message);
      });
    },
    async listMessages(req, ctx) {
      const page = await listMessages(deps.db, callerOf(ctx), req.conversation, {
        limit: req.limit,
        startingAfter: req.startingAfter || undefined,
      });
      return create(messaging.ListMessagesResponseSchema, {
        data: page.data.map(toProtoMessage),
        hasMore: page.hasMore,
      });
    },
    async getMessage(req, ctx) {
      return toProtoMessage(await getMessage(deps.db, callerOf(ctx), req.id));
    },
  };
}

export function messageTestHelperHandlers(
  deps: Deps,
): ServiceImpl<typeof messaging.MessageTestHelperService> {
  return {
    async createInboundMessage(req, ctx) {
      const caller = callerOf(ctx);
      return write(deps, ctx, caller, async (tx) => {
        const { message, created } = await receiveTestMessage(
          tx,
          caller,
          { conversation: req.conversation, text: req.text },
          deps.channels.test,
        );
        if (created) await emit(tx, caller, { type: events.EventType.MESSAGE_RECEIVED, message });
        return toProtoMessage(message);
      });
    },
  };
}
