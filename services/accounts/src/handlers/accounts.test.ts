// AccountService through Connect, in memory: the wire types, error codes and details.
import { timestampDate } from '@bufbuild/protobuf/wkt';
import { Code, createClient, createRouterTransport } from '@connectrpc/connect';
import { accounts } from '@mcs/proto';
import { apiErrorOf, freshDatabase, type MigratedDatabase } from '@mcs/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateAccounts } from '../db/migrate.ts';
import { routes } from '../routes.ts';

let database: MigratedDatabase;
let client: ReturnType<typeof createClient<typeof accounts.AccountService>>;
beforeAll(async () => {
  database = await freshDatabase(migrateAccounts);
  client = createClient(accounts.AccountService, createRouterTransport(routes({ db: database.db })));
});
afterAll(async () => {
  await database?.close();
});

describe('CreateAccount', () => {
  it('answers the account and four keys', async () => {
    const res = await client.createAccount({ email: 'ada@example.com', name: 'Ada Lovelace', rateLimit: 50 });
    expect(res.account).toMatchObject({ email: 'ada@example.com', name: 'Ada Lovelace', rateLimit: 50 });
    expect(res.account?.id).toMatch(/^acct_/);
    expect(Math.abs(timestampDate(res.account!.createdAt!).getTime() - Date.now())).toBeLessThan(60_000);
    expect(res.secretKey).toMatch(/^sk_test_[0-9A-Za-z]{32,}$/);
    expect(res.liveSecretKey).toMatch(/^sk_live_[0-9A-Za-z]{32,}$/);
    expect(res.publishableKey).toMatch(/^pk_test_[0-9A-Za-z]{32,}$/);
    expect(res.livePublishableKey).toMatch(/^pk_live_[0-9A-Za-z]{32,}$/);
    expect(await client.getAccount({ id: res.account!.id })).toEqual(res.account);
  });

  it('fails with InvalidArgument and the param', async () => {
    const bad = await apiErrorOf(client.createAccount({ email: 'nope' }));
    expect(bad).toMatchObject({ code: 'invalid_value', param: 'email' });
    expect(bad.err.code).toBe(Code.InvalidArgument);
    expect(await apiErrorOf(client.createAccount({}))).toMatchObject({
      code: 'missing_required_field',
      param: 'email',
    });
    expect(await apiErrorOf(client.createAccount({ email: 'a@b.co', rateLimit: 100_001 }))).toMatchObject({
      code: 'invalid_value',
      param: 'rate_limit',
    });
  });
});

describe('GetAccount', () => {
  it('is NotFound for an unknown account', async () => {
    const e = await apiErrorOf(client.getAccount({ id: 'acct_0000000000000000000000000' }));
    expect(e).toMatchObject({ code: 'resource_missing', param: 'id' });
    expect(e.err.code).toBe(Code.NotFound);
  });
});

describe('AuthenticateKey', () => {
  it('answers who holds a key', async () => {
    const res = await client.createAccount({ email: 'auth@example.com' });
    const who = await client.authenticateKey({ key: res.livePublishableKey });
    expect(who).toMatchObject({
      accountId: res.account!.id,
      livemode: true,
      kind: accounts.KeyKind.PUBLISHABLE,
      rateLimit: 100,
    });
    expect(who.keyId).toMatch(/^key_/);
    expect((await client.authenticateKey({ key: res.secretKey })).kind).toBe(accounts.KeyKind.SECRET);
  });

  it('is Unauthenticated with api_key_invalid for malformed, unknown or revoked keys', async () => {
    const res = await client.createAccount({ email: 'bad@example.com' });
    const who = await client.authenticateKey({ key: res.secretKey });
    await client.revokeApiKey({ accountId: res.account!.id, keyId: who.keyId });
    for (const key of ['', 'garbage', `sk_test_${'0'.repeat(40)}`, res.secretKey]) {
      const e = await apiErrorOf(client.authenticateKey({ key }));
      expect(e.code, key).toBe('api_key_invalid');
      expect(e.err.code).toBe(Code.Unauthenticated);
      // The error never echoes the key back.
      if (key) expect(e.err.message).not.toContain(key);
    }
  });
});

describe('API keys', () => {
  it('lists, creates and revokes keys without ever showing a key again', async () => {
    const res = await client.createAccount({ email: 'keys@example.com' });
    const accountId = res.account!.id;
    const listed = await client.listApiKeys({ accountId });
    expect(listed.data).toHaveLength(4);
    const plain = [res.secretKey, res.liveSecretKey, res.publishableKey, res.livePublishableKey];
    expect(listed.data.map((k) => `${k.prefix}…${k.last4}`).sort()).toEqual(
      plain.map((k) => `${k.slice(0, 8)}…${k.slice(-4)}`).sort(),
    );
    const wire = JSON.stringify(listed, (_, v) => (typeof v === 'bigint' ? String(v) : v));
    for (const k of plain) expect(wire).not.toContain(k.slice(8));

    const made = await client.createApiKey({ accountId, kind: accounts.KeyKind.SECRET, livemode: true });
    expect(made.secret).toMatch(/^sk_live_/);
    expect(made.key).toMatchObject({ kind: accounts.KeyKind.SECRET, livemode: true, prefix: 'sk_live_' });
    expect(made.key?.revokedAt).toBeUndefined();
    expect((await client.authenticateKey({ key: made.secret })).keyId).toBe(made.key!.id);

    const revoked = await client.revokeApiKey({ accountId, keyId: made.key!.id });
    expect(revoked.revokedAt).toBeDefined();
    expect(await apiErrorOf(client.authenticateKey({ key: made.secret }))).toMatchObject({
      code: 'api_key_invalid',
    });
    const after = await client.listApiKeys({ accountId });
    expect(after.data).toHaveLength(5);
    expect(after.data.find((k) => k.id === made.key!.id)?.revokedAt).toEqual(revoked.revokedAt);
  });

  it('checks kind, account and key', async () => {
    const res = await client.createAccount({ email: 'checks@example.com' });
    const accountId = res.account!.id;
    expect(await apiErrorOf(client.createApiKey({ accountId, livemode: false }))).toMatchObject({
      code: 'missing_required_field',
      param: 'kind',
    });
    expect(await apiErrorOf(client.createApiKey({ accountId, kind: 7 as accounts.KeyKind }))).toMatchObject({
      code: 'invalid_value',
      param: 'kind',
    });
    expect(
      await apiErrorOf(client.createApiKey({ accountId: 'acct_missing', kind: accounts.KeyKind.SECRET })),
    ).toMatchObject({ code: 'resource_missing', param: 'account_id' });
    expect(await apiErrorOf(client.revokeApiKey({ accountId, keyId: 'key_missing' }))).toMatchObject({
      code: 'resource_missing',
      param: 'key_id',
    });
  });
});

describe('owner password stamps', () => {
  it('answers the stamp at sign-in and a new one after SetOwnerPassword; the account never shows it', async () => {
    const made = await client.createAccount({ email: 'stamps@example.com', password: 'a long pass phrase' });
    const id = made.account!.id;
    const who = await client.authenticateOwner({
      email: 'stamps@example.com',
      password: 'a long pass phrase',
    });
    expect(who.accountId).toBe(id);
    expect(who.passwordStamp).toMatch(/^[\w-]{22}$/);
    expect((await client.getOwnerPasswordStamp({ id })).stamp).toBe(who.passwordStamp);
    const account = await client.setOwnerPassword({ accountId: id, password: 'another pass phrase' });
    expect(Object.values(account)).not.toContain(who.passwordStamp);
    const now = (await client.getOwnerPasswordStamp({ id })).stamp;
    expect(now).toMatch(/^[\w-]{22}$/);
    expect(now).not.toBe(who.passwordStamp);
    const e = await apiErrorOf(client.getOwnerPasswordStamp({ id: 'acct_0000000000000000000000000' }));
    expect(e).toMatchObject({ code: 'resource_missing', param: 'id' });
    expect(e.err.code).toBe(Code.NotFound);
  });
});
