// The ConversationService through an in-memory Connect transport and a stock gRPC client, with
// the events it publishes read back from JetStream.
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
const headers = as('acct_conversations');
const ada = { customer: { name: 'Ada', phone: '+4915112345678' } };

describe('ConversationService', () => {
  it('creates a conversation with conversation.created, and returns it again for the same phone', async () => {
    const client = svc.client(messaging.ConversationService);
    const conv = await client.createConversation(ada, { headers });
    expect(conv).toMatchObject({ ...ada, status: messaging.ConversationStatus.OPEN, livemode: false });
    expect(conv.id).toMatch(/^conv_/);
    expect(conv.closedAt).toBeUndefined();
    const again = await client.createConversation(
      { customer: { name: 'Someone else', phone: ada.customer.phone } },
      { headers },
    );
    expect(again).toEqual(conv);

    const event = await svc.h.events.waitFor((e) => e.data.value?.id === conv.id);
    expect(event.type).toBe(T.CONVERSATION_CREATED);
    expect(event.data.case).toBe('conversation');
    expect(event.data.value).toEqual(conv);
    expect(event.createdAt).toEqual(conv.createdAt);
    expect(event.accountId).toBe('acct_conversations');

    // Closing emits nothing (the spec has no such event); the next create starts anew.
    const closed = await client.closeConversation({ id: conv.id }, { headers });
    expect(closed.status).toBe(messaging.ConversationStatus.CLOSED);
    expect(closed.closedAt).toBeDefined();
    const next = await client.createConversation(ada, { headers });
    expect(next.id).not.toBe(conv.id);
    await svc.h.events.waitFor((e) => e.data.value?.id === next.id);
    expect(svc.h.events.about(conv.id).map((e) => e.type)).toEqual([T.CONVERSATION_CREATED]);
    expect(await client.getConversation({ id: conv.id }, { headers })).toEqual(closed);
  });

  it('lists by status and keeps accounts and modes apart', async () => {
    const client = svc.client(messaging.ConversationService);
    const mine = as('acct_conv_list');
    const a = await client.createConversation(ada, { headers: mine });
    const b = await client.createConversation(
      { customer: { name: 'Bo', phone: '+4915100000000' } },
      { headers: mine },
    );
    await client.closeConversation({ id: a.id }, { headers: mine });
    const ids = async (status?: messaging.ConversationStatus) =>
      (await client.listConversations({ status }, { headers: mine })).data.map((c) => c.id).sort();
    // Order within a list is the domain tests' business (two creates may share a millisecond).
    expect(await ids()).toEqual([a.id, b.id].sort());
    expect(await ids(messaging.ConversationStatus.OPEN)).toEqual([b.id]);
    expect(await ids(messaging.ConversationStatus.CLOSED)).toEqual([a.id]);
    const live = as('acct_conv_list', { livemode: true });
    expect((await client.listConversations({}, { headers: live })).data).toEqual([]);
    expect((await apiErrorOf(client.getConversation({ id: b.id }, { headers: live }))).code).toBe(
      'resource_missing',
    );
  });

  it('validates in the service, since gRPC callers skip the gateway', async () => {
    const client = svc.client(messaging.ConversationService);
    const e = await apiErrorOf(
      client.createConversation({ customer: { name: 'Ada', phone: '12' } }, { headers }),
    );
    expect([e.code, e.param]).toEqual(['invalid_phone', 'customer.phone']);
    const m = await apiErrorOf(client.createConversation({}, { headers }));
    expect([m.code, m.param]).toEqual(['missing_required_field', 'customer']);
  });

  it('answers a stock gRPC client', async () => {
    const grpc = svc.grpc();
    try {
      const M = messaging.ConversationService.method;
      const who = as('acct_grpc_conv');
      const conv = await grpc.call(M.createConversation, ada, who);
      expect((await grpc.call(M.getConversation, { id: conv.id }, who)).customer?.phone).toBe(
        ada.customer.phone,
      );
      expect((await grpc.call(M.listConversations, {}, who)).data.map((c) => c.id)).toEqual([conv.id]);
      expect((await grpc.call(M.closeConversation, { id: conv.id }, who)).status).toBe(
        messaging.ConversationStatus.CLOSED,
      );
      await expect(grpc.call(M.closeConversation, { id: conv.id }, who)).rejects.toMatchObject({ code: 3 });
      await expect(grpc.call(M.getConversation, { id: conv.id }, headers)).rejects.toMatchObject({ code: 5 });
    } finally {
      grpc.close();
    }
  });
});
