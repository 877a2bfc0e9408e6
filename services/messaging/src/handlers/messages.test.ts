// The MessageService and its test helper through an in-memory Connect transport and a stock
// gRPC client, with the events they publish read back from JetStream.
import { events, messaging } from '@mcs/proto';
import { apiErrorOf } from '@mcs/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { as, type MessagingUnderTest, startMessaging } from '../testing.ts';

let svc: MessagingUnderTest;
beforeAll(async () => {
  svc = await startMessaging();
});
afterAll(() => svc?.close());

const T = events.EventType;
const headers = as('acct_messages');
let phones = 0;
const openConversation = (h: Record<string, string> = headers) =>
  svc
    .client(messaging.ConversationService)
    .createConversation(
      { customer: { name: 'Ada', phone: `+49151${String(++phones).padStart(8, '0')}` } },
      { headers: h },
    );

describe('MessageService', () => {
  it('sends (message.sent) and receives (message.received), each event carrying the message', async () => {
    const messages = svc.client(messaging.MessageService);
    const helpers = svc.client(messaging.MessageTestHelperService);
    const conv = await openConversation();
    const out = await messages.sendMessage(
      { conversation: conv.id, text: 'Your order is ready' },
      { headers },
    );
    expect(out).toMatchObject({
      conversation: conv.id,
      direction: messaging.MessageDirection.OUTBOUND,
      status: messaging.MessageStatus.SENT,
      text: 'Your order is ready',
      livemode: false,
    });
    const inn = await helpers.createInboundMessage({ conversation: conv.id, text: 'Thanks!' }, { headers });
    expect(inn).toMatchObject({
      conversation: conv.id,
      direction: messaging.MessageDirection.INBOUND,
      status: messaging.MessageStatus.RECEIVED,
      text: 'Thanks!',
    });

    const sent = await svc.h.events.waitFor((e) => e.data.value?.id === out.id);
    expect([sent.type, sent.data.case]).toEqual([T.MESSAGE_SENT, 'message']);
    expect(sent.data.value).toEqual(out);
    expect(sent.createdAt).toEqual(out.createdAt);
    const received = await svc.h.events.waitFor((e) => e.data.value?.id === inn.id);
    expect(received.type).toBe(T.MESSAGE_RECEIVED);
    expect(received.data.value).toEqual(inn);

    expect(await messages.getMessage({ id: out.id }, { headers })).toEqual(out);
    const list = await messages.listMessages({ conversation: conv.id }, { headers });
    expect(list.data).toHaveLength(2);
    expect(list.data).toEqual(expect.arrayContaining([inn, out]));
  });

  it('sends once per idempotency key, with one event', async () => {
    const messages = svc.client(messaging.MessageService);
    const conv = await openConversation();
    const keyed = as('acct_messages', { idempotencyKey: 'msg-key' });
    const a = await messages.sendMessage({ conversation: conv.id, text: 'Hi' }, { headers: keyed });
    const b = await messages.sendMessage({ conversation: conv.id, text: 'Hi' }, { headers: keyed });
    expect(b).toEqual(a);
    const sentinel = await messages.sendMessage({ conversation: conv.id, text: 'later' }, { headers });
    await svc.h.events.waitFor((e) => e.data.value?.id === sentinel.id);
    expect(svc.h.events.about(a.id)).toHaveLength(1);
    expect((await messages.listMessages({ conversation: conv.id }, { headers })).data).toHaveLength(2);
  });

  it('refuses closed conversations, strangers, live-mode test helpers and bad text', async () => {
    const conversations = svc.client(messaging.ConversationService);
    const messages = svc.client(messaging.MessageService);
    const helpers = svc.client(messaging.MessageTestHelperService);
    const conv = await openConversation();
    const stranger = await apiErrorOf(
      messages.sendMessage({ conversation: conv.id, text: 'Hi' }, { headers: as('acct_stranger') }),
    );
    expect([stranger.code, stranger.param, stranger.err.code]).toEqual([
      'resource_missing',
      'conversation',
      5,
    ]);
    const long = await apiErrorOf(
      messages.sendMessage({ conversation: conv.id, text: 'x'.repeat(4097) }, { headers }),
    );
    expect([long.code, long.param]).toEqual(['invalid_value', 'text']);
    const liveConv = await openConversation(as('acct_messages', { livemode: true }));
    const live = await apiErrorOf(
      helpers.createInboundMessage(
        { conversation: liveConv.id, text: 'Hi' },
        { headers: as('acct_messages', { livemode: true }) },
      ),
    );
    expect([live.code, live.err.code]).toEqual(['test_mode_only', 7]);
    await conversations.closeConversation({ id: conv.id }, { headers });
    const closed = await apiErrorOf(messages.sendMessage({ conversation: conv.id, text: 'Hi' }, { headers }));
    expect([closed.code, closed.param]).toEqual(['invalid_state_transition', 'conversation']);
    const closedIn = await apiErrorOf(
      helpers.createInboundMessage({ conversation: conv.id, text: 'Hi' }, { headers }),
    );
    expect(closedIn.code).toBe('invalid_state_transition');
  });

  it('answers a stock gRPC client', async () => {
    const grpc = svc.grpc();
    try {
      const conv = await openConversation();
      const M = messaging.MessageService.method;
      const out = await grpc.call(M.sendMessage, { conversation: conv.id, text: 'Hello over gRPC' }, headers);
      expect(out.direction).toBe(messaging.MessageDirection.OUTBOUND);
      const inn = await grpc.call(
        messaging.MessageTestHelperService.method.createInboundMessage,
        { conversation: conv.id, text: 'Hello back' },
        headers,
      );
      expect(inn.direction).toBe(messaging.MessageDirection.INBOUND);
      expect(
        (await grpc.call(M.listMessages, { conversation: conv.id }, headers)).data.map((m) => m.id).sort(),
      ).toEqual([inn.id, out.id].sort());
      expect((await grpc.call(M.getMessage, { id: out.id }, headers)).text).toBe('Hello over gRPC');
      await expect(grpc.call(M.getMessage, { id: out.id }, as('acct_other'))).rejects.toMatchObject({
        code: 5,
      });
    } finally {
      grpc.close();
    }
  });
});
