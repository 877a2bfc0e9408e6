import type { Caller } from '@mcs/kit/caller';
import { apiErrorOf, freshDatabase, type MigratedDatabase } from '@mcs/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Channel, ChannelError } from '../channels/channel.ts';
import { createSandboxChannel } from '../channels/sandbox.ts';
import { migrateMessaging } from '../db/migrate.ts';
import { closeConversation, createConversation } from './conversations.ts';
import {
  getMessage,
  listMessages,
  MAX_TEXT,
  receiveMessage,
  receiveTestMessage,
  sendMessage,
  validateText,
} from './messages.ts';

let db: MigratedDatabase;
beforeAll(async () => {
  db = await freshDatabase(migrateMessaging);
});
afterAll(() => db?.close());

const sandbox = createSandboxChannel();
const caller: Caller = { accountId: 'acct_msg', livemode: false };
let phones = 0;
/** A fresh open conversation (each with its own customer phone). */
const conversation = async (c: Caller = caller) => {
  const phone = `+49151${String(++phones).padStart(8, '0')}`;
  return (await db.db.transaction((tx) => createConversation(tx, c, { customer: { name: 'Ada', phone } })))
    .conversation;
};
const send = (conv: string, text: string, c: Caller = caller, channel: Channel = sandbox) =>
  db.db.transaction((tx) => sendMessage(tx, c, { conversation: conv, text }, channel, clock()));
const inbound = (conv: string, text: string, c: Caller = caller) =>
  db.db.transaction((tx) => receiveTestMessage(tx, c, { conversation: conv, text }, sandbox, clock()));
/** Strictly increasing times: ids order by their millisecond, and lists by id. */
const clock = (() => {
  let t = Date.now();
  return () => new Date(++t);
})();
const errorOf = (fn: () => unknown) => apiErrorOf(Promise.resolve().then(fn));

describe('validateText', () => {
  it('takes 1 to 4096 characters, counted as code points, kept as given', async () => {
    expect(validateText('  hi  ')).toBe('  hi  ');
    expect(validateText('x'.repeat(MAX_TEXT))).toHaveLength(MAX_TEXT);
    expect(validateText('😀'.repeat(MAX_TEXT))).toHaveLength(2 * MAX_TEXT);
    for (const [text, code] of [
      [undefined, 'missing_required_field'],
      ['', 'missing_required_field'],
      [' \n\t', 'missing_required_field'],
      ['x'.repeat(MAX_TEXT + 1), 'invalid_value'],
      ['😀'.repeat(MAX_TEXT + 1), 'invalid_value'],
    ] as const) {
      const e = await errorOf(() => validateText(text));
      expect([e.param, e.code]).toEqual(['text', code]);
    }
  });
});

describe('sending', () => {
  it('sends through the channel and records an outbound, sent message', async () => {
    const conv = await conversation();
    const message = await send(conv.id, 'Your order is ready');
    expect(message).toMatchObject({
      conversationId: conv.id,
      direction: 'outbound',
      status: 'sent',
      text: 'Your order is ready',
      channel: 'sandbox',
      channelMessageId: `sandbox_${message.id}`,
      livemode: false,
    });
    expect(message.id).toMatch(/^msg_[0-9a-z]{26}$/);
    expect(await getMessage(db.db, caller, message.id)).toEqual(message);
  });

  it('records nothing when the channel refuses', async () => {
    const conv = await conversation();
    const refusing: Channel = {
      name: 'sandbox',
      send: async () => {
        throw new ChannelError('carrier unreachable');
      },
    };
    const e = await apiErrorOf(send(conv.id, 'Hello', caller, refusing));
    expect(e.code).toBe('service_unavailable');
    expect(e.err.rawMessage).toMatch(/carrier unreachable/);
    expect((await listMessages(db.db, caller, conv.id, {})).data).toEqual([]);
  });

  it('needs an open conversation of the caller', async () => {
    const conv = await conversation();
    for (const [id, c, code] of [
      ['conv_doesnotexist', caller, 'resource_missing'],
      ['not an id', caller, 'resource_missing'],
      [conv.id, { ...caller, accountId: 'acct_else' }, 'resource_missing'],
      [conv.id, { ...caller, livemode: true }, 'resource_missing'],
    ] as const) {
      const e = await apiErrorOf(send(id, 'Hello', c));
      expect([e.code, e.param]).toEqual([code, 'conversation']);
    }
    await db.db.transaction((tx) => closeConversation(tx, caller, conv.id));
    const closed = await apiErrorOf(send(conv.id, 'Hello'));
    expect([closed.code, closed.param]).toEqual(['invalid_state_transition', 'conversation']);
    // The conversation is checked before the text: a stranger learns nothing from the body.
    const open = await conversation();
    expect((await apiErrorOf(send(open.id, ''))).param).toBe('text');
    expect((await apiErrorOf(send(open.id, '', { ...caller, accountId: 'acct_else' }))).code).toBe(
      'resource_missing',
    );
  });
});

describe('receiving', () => {
  it('records what the sandbox customer writes as an inbound, received message', async () => {
    const conv = await conversation();
    const { message, created } = await inbound(conv.id, 'Is it ready?');
    expect(created).toBe(true);
    expect(message).toMatchObject({
      conversationId: conv.id,
      direction: 'inbound',
      status: 'received',
      text: 'Is it ready?',
      channel: 'sandbox',
    });
    expect(message.channelMessageId).toMatch(/^sandbox_in_/);
  });

  it('answers test mode only, in open conversations of the caller', async () => {
    const conv = await conversation();
    expect((await apiErrorOf(inbound(conv.id, 'Hi', { ...caller, livemode: true }))).code).toBe(
      'test_mode_only',
    );
    expect((await apiErrorOf(inbound(conv.id, 'Hi', { ...caller, accountId: 'acct_else' }))).code).toBe(
      'resource_missing',
    );
    expect((await apiErrorOf(inbound(conv.id, ' '))).param).toBe('text');
    await db.db.transaction((tx) => closeConversation(tx, caller, conv.id));
    expect((await apiErrorOf(inbound(conv.id, 'Hi'))).code).toBe('invalid_state_transition');
  });

  it('records a message the channel delivers twice once, and only from the customer', async () => {
    const conv = await conversation();
    const delivery = { channelMessageId: 'wamid.1', from: conv.customerPhone, text: 'Hello?' };
    const receive = (m: typeof delivery) =>
      db.db.transaction((tx) => receiveMessage(tx, caller, conv.id, m, sandbox));
    const first = await receive(delivery);
    const second = await receive(delivery);
    expect(first.created).toBe(true);
    expect(second).toEqual({ created: false, message: first.message });
    const stranger = await apiErrorOf(
      receive({ ...delivery, channelMessageId: 'wamid.2', from: '+10000000000' }),
    );
    expect([stranger.code, stranger.param]).toEqual(['invalid_value', 'conversation']);
  });
});

describe('reading messages', () => {
  it("lists a conversation's messages newest first, for its owner only", async () => {
    const conv = await conversation();
    const ids: string[] = [];
    ids.push((await send(conv.id, 'one')).id);
    ids.push((await inbound(conv.id, 'two')).message.id);
    ids.push((await send(conv.id, 'three')).id);
    const other = await conversation();
    await send(other.id, 'elsewhere');
    const page = await listMessages(db.db, caller, conv.id, { limit: 2 });
    expect(page.data.map((m) => m.id)).toEqual([ids[2], ids[1]]);
    expect(page.hasMore).toBe(true);
    const rest = await listMessages(db.db, caller, conv.id, { startingAfter: ids[1] });
    expect(rest.data.map((m) => m.text)).toEqual(['one']);
    const stranger = { ...caller, accountId: 'acct_stranger' };
    const e = await apiErrorOf(listMessages(db.db, stranger, conv.id, {}));
    expect([e.code, e.param]).toEqual(['resource_missing', 'conversation']);
    expect((await apiErrorOf(getMessage(db.db, stranger, ids[0]!))).code).toBe('resource_missing');
    expect((await apiErrorOf(getMessage(db.db, { ...caller, livemode: true }, ids[0]!))).code).toBe(
      'resource_missing',
    );
  });
});
