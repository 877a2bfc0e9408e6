import type { Caller } from '@mcs/kit/caller';
import { apiErrorOf, freshDatabase, type MigratedDatabase } from '@mcs/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateMessaging } from '../db/migrate.ts';
import {
  closeConversation,
  createConversation,
  getConversation,
  listConversations,
  validateConversation,
} from './conversations.ts';

let db: MigratedDatabase;
beforeAll(async () => {
  db = await freshDatabase(migrateMessaging);
});
afterAll(() => db?.close());

const caller: Caller = { accountId: 'acct_conv', livemode: false };
const ada = { customer: { name: 'Ada', phone: '+4915112345678' } };
const start = (c: Caller, input: Parameters<typeof createConversation>[2] = ada) =>
  db.db.transaction((tx) => createConversation(tx, c, input, clock()));
const close = (c: Caller, id: string) => db.db.transaction((tx) => closeConversation(tx, c, id));
/** Strictly increasing times: ids order by their millisecond, and lists by id. */
const clock = (() => {
  let t = Date.now();
  return () => new Date(++t);
})();
const errorOf = (fn: () => unknown) => apiErrorOf(Promise.resolve().then(fn));

describe('validateConversation', () => {
  it('needs a customer with a name and an E.164 phone', async () => {
    expect(validateConversation(ada)).toEqual({ customerName: 'Ada', customerPhone: '+4915112345678' });
    const cases: Array<[object, string, string]> = [
      [{}, 'customer', 'missing_required_field'],
      [{ customer: { phone: '+4915112345678' } }, 'customer.name', 'missing_required_field'],
      [{ customer: { name: 'Ada' } }, 'customer.phone', 'missing_required_field'],
      [{ customer: { name: 'Ada', phone: '015112345678' } }, 'customer.phone', 'invalid_phone'],
      [{ customer: { name: 'Ada', phone: '+49 151 1234' } }, 'customer.phone', 'invalid_phone'],
    ];
    for (const [input, param, code] of cases) {
      const e = await errorOf(() => validateConversation(input));
      expect([e.param, e.code], JSON.stringify(input)).toEqual([param, code]);
    }
  });
});

describe('one open conversation per customer phone', () => {
  it('returns the open conversation again instead of a second one', async () => {
    const first = await start(caller);
    expect(first.created).toBe(true);
    expect(first.conversation).toMatchObject({
      status: 'open',
      customerName: 'Ada',
      customerPhone: '+4915112345678',
      closedAt: null,
      livemode: false,
    });
    expect(first.conversation.id).toMatch(/^conv_[0-9a-z]{26}$/);
    const again = await start(caller, { customer: { name: 'Ada L.', phone: '+4915112345678' } });
    expect(again).toEqual({ created: false, conversation: first.conversation });
    // Other phones, accounts and modes are other customers.
    expect((await start(caller, { customer: { name: 'Bo', phone: '+4915100000000' } })).created).toBe(true);
    expect((await start({ ...caller, accountId: 'acct_conv_2' })).created).toBe(true);
    expect((await start({ ...caller, livemode: true })).created).toBe(true);
  });

  it('holds under concurrent creates', async () => {
    const c: Caller = { accountId: 'acct_race', livemode: false };
    const results = await Promise.all([start(c), start(c), start(c), start(c)]);
    expect(results.filter((r) => r.created)).toHaveLength(1);
    expect(new Set(results.map((r) => r.conversation.id)).size).toBe(1);
  });

  it('starts a new conversation once the open one is closed', async () => {
    const c: Caller = { accountId: 'acct_close', livemode: false };
    const first = (await start(c)).conversation;
    const closed = await close(c, first.id);
    expect(closed).toMatchObject({ id: first.id, status: 'closed' });
    expect(closed.closedAt).toBeInstanceOf(Date);
    expect(closed.updatedAt).toEqual(closed.closedAt);
    const e = await apiErrorOf(close(c, first.id));
    expect([e.code, e.param]).toEqual(['invalid_state_transition', '']);
    const second = await start(c);
    expect(second.created).toBe(true);
    expect(second.conversation.id).not.toBe(first.id);
  });
});

describe('reading conversations', () => {
  it('reads and closes only the caller’s conversations', async () => {
    const { conversation } = await start({ ...caller, accountId: 'acct_owner' });
    for (const other of [caller, { ...caller, accountId: 'acct_owner', livemode: true }]) {
      for (const e of [
        await apiErrorOf(getConversation(db.db, other, conversation.id)),
        await apiErrorOf(close(other, conversation.id)),
      ]) {
        expect([e.code, e.param]).toEqual(['resource_missing', 'id']);
      }
    }
    expect((await apiErrorOf(getConversation(db.db, caller, 'conv_\u0000'))).code).toBe('resource_missing');
  });

  it('lists newest first, by status, with paging', async () => {
    const c: Caller = { accountId: 'acct_list', livemode: false };
    const ids: string[] = [];
    for (const phone of ['+4915100000001', '+4915100000002', '+4915100000003']) {
      ids.push((await start(c, { customer: { name: 'X', phone } })).conversation.id);
    }
    await close(c, ids[0]!);
    const list = async (opts: Parameters<typeof listConversations>[2]) =>
      (await listConversations(db.db, c, opts)).data.map((x) => x.id);
    expect(await list({})).toEqual([ids[2], ids[1], ids[0]]);
    expect(await list({ status: 'open' })).toEqual([ids[2], ids[1]]);
    expect(await list({ status: 'closed' })).toEqual([ids[0]]);
    expect(await listConversations(db.db, c, { limit: 2 })).toMatchObject({ hasMore: true });
    expect(await list({ startingAfter: ids[1] })).toEqual([ids[0]]);
    expect((await apiErrorOf(listConversations(db.db, c, { startingAfter: 'nope' }))).param).toBe(
      'starting_after',
    );
    expect((await apiErrorOf(listConversations(db.db, c, { limit: 0.5 }))).param).toBe('limit');
  });
});
