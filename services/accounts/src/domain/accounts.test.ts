import { apiErrorOf, freshDatabase, type MigratedDatabase } from '@mcs/testkit';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateAccounts } from '../db/migrate.ts';
import { accounts, apiKeys } from '../db/schema.ts';
import {
  authenticateKey,
  createAccount,
  createApiKey,
  getAccount,
  listApiKeys,
  MAX_RATE_LIMIT,
  PLAN_DEFAULT_RATE_LIMIT,
  revokeApiKey,
} from './accounts.ts';

let database: MigratedDatabase;
beforeAll(async () => {
  database = await freshDatabase(migrateAccounts);
});
afterAll(async () => {
  await database?.close();
});

const create = (input: Parameters<typeof createAccount>[1]) =>
  database.db.transaction((tx) => createAccount(tx, input));

describe('createAccount', () => {
  it('creates the account and its four keys', async () => {
    const made = await create({ email: 'ada@example.com', name: 'Ada', rateLimit: 25 });
    expect(made.account).toMatchObject({ email: 'ada@example.com', name: 'Ada', rateLimit: 25 });
    expect(made.account.id).toMatch(/^acct_[0-9a-z]{26}$/);
    expect(made.secretTest.secret).toMatch(/^sk_test_[0-9A-Za-z]{32,}$/);
    expect(made.secretLive.secret).toMatch(/^sk_live_[0-9A-Za-z]{32,}$/);
    expect(made.publishableTest.secret).toMatch(/^pk_test_[0-9A-Za-z]{32,}$/);
    expect(made.publishableLive.secret).toMatch(/^pk_live_[0-9A-Za-z]{32,}$/);
    for (const k of [made.secretTest, made.secretLive, made.publishableTest, made.publishableLive]) {
      expect(k.key.id).toMatch(/^key_/);
      expect(k.key.accountId).toBe(made.account.id);
      expect(k.key.last4).toBe(k.secret.slice(-4));
      expect(k.secret.startsWith(k.key.prefix)).toBe(true);
      expect(k.key.revokedAt).toBeNull();
      expect(k.key).not.toHaveProperty('keyHash');
    }
    expect(await getAccount(database.db, made.account.id)).toEqual(made.account);
    expect(await listApiKeys(database.db, made.account.id)).toHaveLength(4);
  });

  it('defaults the name to the e-mail local part and the rate limit to the plan', async () => {
    const { account } = await create({ email: '  grace.hopper@navy.example.org ', name: '', rateLimit: 0 });
    expect(account).toMatchObject({
      email: 'grace.hopper@navy.example.org',
      name: 'grace.hopper',
      rateLimit: PLAN_DEFAULT_RATE_LIMIT,
    });
    expect(PLAN_DEFAULT_RATE_LIMIT).toBe(100);
  });

  it('accepts the rate limit bounds', async () => {
    expect((await create({ email: 'a@b.co', rateLimit: 1 })).account.rateLimit).toBe(1);
    expect((await create({ email: 'a@b.co', rateLimit: MAX_RATE_LIMIT })).account.rateLimit).toBe(100_000);
  });

  it.each([
    [{}, 'missing_required_field', 'email'],
    [{ email: '   ' }, 'missing_required_field', 'email'],
    [{ email: 'no-at-sign' }, 'invalid_value', 'email'],
    [{ email: 'two@@example.com' }, 'invalid_value', 'email'],
    [{ email: 'space in@example.com' }, 'invalid_value', 'email'],
    [{ email: 'nodot@localhost' }, 'invalid_value', 'email'],
    [{ email: 'trailing@example.' }, 'invalid_value', 'email'],
    [{ email: `${'a'.repeat(243)}@example.com` }, 'invalid_value', 'email'],
    [{ email: 'a@b.co', name: 'n'.repeat(201) }, 'invalid_value', 'name'],
    [{ email: 'a@b.co', rateLimit: -1 }, 'invalid_value', 'rate_limit'],
    [{ email: 'a@b.co', rateLimit: MAX_RATE_LIMIT + 1 }, 'invalid_value', 'rate_limit'],
    [{ email: 'a@b.co', rateLimit: 1.5 }, 'invalid_value', 'rate_limit'],
  ])('rejects %j with %s on %s', async (input, code, param) => {
    const before = await database.db.$count(accounts);
    expect(await apiErrorOf(create(input))).toMatchObject({ code, param });
    expect(await database.db.$count(accounts)).toBe(before);
  });

  it('accepts an e-mail of exactly 254 characters', async () => {
    const email = `${'a'.repeat(242)}@example.com`;
    expect(email).toHaveLength(254);
    expect((await create({ email })).account.email).toBe(email);
  });

  it('creates nothing when the transaction fails', async () => {
    const before = [await database.db.$count(accounts), await database.db.$count(apiKeys)];
    await expect(
      database.db.transaction(async (tx) => {
        await createAccount(tx, { email: 'rollback@example.com' });
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect([await database.db.$count(accounts), await database.db.$count(apiKeys)]).toEqual(before);
  });

  it('stores no key in plain text, only its SHA-256', async () => {
    const made = await create({ email: 'secret@example.com' });
    const { rows } = await database.pool.query(`select * from accounts.api_keys where account_id = $1`, [
      made.account.id,
    ]);
    expect(rows).toHaveLength(4);
    const dump = JSON.stringify(rows);
    for (const k of [made.secretTest, made.secretLive, made.publishableTest, made.publishableLive]) {
      expect(dump).not.toContain(k.secret);
      expect(dump).not.toContain(k.secret.slice(8, 30));
    }
    for (const row of rows) expect(row.key_hash).toMatch(/^[0-9a-f]{64}$/);
  });
});

describe('getAccount', () => {
  it('is resource_missing for an unknown id, missing_required_field for none', async () => {
    expect(await apiErrorOf(getAccount(database.db, 'acct_nope'))).toMatchObject({
      code: 'resource_missing',
      param: 'id',
    });
    expect(await apiErrorOf(getAccount(database.db, ''))).toMatchObject({
      code: 'missing_required_field',
      param: 'id',
    });
  });
});

describe('authenticateKey', () => {
  it('names the account, mode, kind, limit and key of each key', async () => {
    const made = await create({ email: 'auth@example.com', rateLimit: 7 });
    const cases = [
      [made.secretTest, 'secret', false],
      [made.secretLive, 'secret', true],
      [made.publishableTest, 'publishable', false],
      [made.publishableLive, 'publishable', true],
    ] as const;
    for (const [issued, kind, livemode] of cases) {
      expect(await authenticateKey(database.db, issued.secret)).toEqual({
        accountId: made.account.id,
        keyId: issued.key.id,
        kind,
        livemode,
        rateLimit: 7,
      });
    }
  });

  it('rejects malformed, unknown and revoked keys alike', async () => {
    const made = await create({ email: 'revoked@example.com' });
    const key = made.secretTest.secret;
    const lastChar = key.at(-1) === 'a' ? 'b' : 'a';
    const bad = [
      '',
      'sk_test_short',
      key.replace('sk_test_', 'sk_prod_'),
      key.replace('sk_test_', 'pk_test_'), // a real key's body under another prefix
      `${key.slice(0, -1)}${lastChar}`,
      `${key} `,
      key.toUpperCase(),
    ];
    for (const k of bad) {
      expect(await apiErrorOf(authenticateKey(database.db, k)), k).toMatchObject({ code: 'api_key_invalid' });
    }
    await authenticateKey(database.db, key);
    await revokeApiKey(database.db, { accountId: made.account.id, keyId: made.secretTest.key.id });
    expect(await apiErrorOf(authenticateKey(database.db, key))).toMatchObject({ code: 'api_key_invalid' });
    // The account's other keys still work.
    expect((await authenticateKey(database.db, made.secretLive.secret)).accountId).toBe(made.account.id);
  });
});

describe('API keys', () => {
  it('creates a key that authenticates and shows up in the list', async () => {
    const made = await create({ email: 'keys@example.com' });
    const issued = await database.db.transaction((tx) =>
      createApiKey(tx, { accountId: made.account.id, kind: 'publishable', livemode: true }),
    );
    expect(issued.secret).toMatch(/^pk_live_[0-9A-Za-z]{32,}$/);
    expect(issued.key).toMatchObject({
      kind: 'publishable',
      livemode: true,
      prefix: 'pk_live_',
      revokedAt: null,
    });
    expect(await authenticateKey(database.db, issued.secret)).toMatchObject({
      keyId: issued.key.id,
      livemode: true,
    });
    const list = await listApiKeys(database.db, made.account.id);
    expect(list).toHaveLength(5);
    expect(list[0]).toEqual({ ...issued.key, lastUsedAt: expect.any(Date) });
    for (const k of list) expect(k).not.toHaveProperty('keyHash');
  });

  it('revokes once; revoking again keeps the first time', async () => {
    const made = await create({ email: 'revoke@example.com' });
    const keyId = made.publishableTest.key.id;
    const t1 = new Date('2030-01-01T00:00:00Z');
    const first = await revokeApiKey(database.db, { accountId: made.account.id, keyId }, t1);
    expect(first.revokedAt).toEqual(t1);
    const again = await revokeApiKey(
      database.db,
      { accountId: made.account.id, keyId },
      new Date('2031-01-01T00:00:00Z'),
    );
    expect(again.revokedAt).toEqual(t1);
    const listed = (await listApiKeys(database.db, made.account.id)).find((k) => k.id === keyId);
    expect(listed?.revokedAt).toEqual(t1);
  });

  it("does not touch another account's keys", async () => {
    const a = await create({ email: 'a@example.com' });
    const b = await create({ email: 'b@example.com' });
    expect(
      await apiErrorOf(revokeApiKey(database.db, { accountId: a.account.id, keyId: b.secretTest.key.id })),
    ).toMatchObject({ code: 'resource_missing', param: 'key_id' });
    expect((await authenticateKey(database.db, b.secretTest.secret)).accountId).toBe(b.account.id);
  });

  it('needs an existing account', async () => {
    for (const call of [
      () => listApiKeys(database.db, 'acct_missing'),
      () => createApiKey(database.db, { accountId: 'acct_missing', kind: 'secret', livemode: false }),
      () => revokeApiKey(database.db, { accountId: 'acct_missing', keyId: 'key_x' }),
    ]) {
      expect(await apiErrorOf(call())).toMatchObject({ code: 'resource_missing', param: 'account_id' });
    }
    expect(await apiErrorOf(listApiKeys(database.db, ''))).toMatchObject({
      code: 'missing_required_field',
      param: 'account_id',
    });
    const made = await create({ email: 'c@example.com' });
    expect(
      await apiErrorOf(revokeApiKey(database.db, { accountId: made.account.id, keyId: '' })),
    ).toMatchObject({
      code: 'missing_required_field',
      param: 'key_id',
    });
  });
});

describe('schema', () => {
  it('enforces one row per key hash', async () => {
    const made = await create({ email: 'unique@example.com' });
    const err = await database.db
      .execute(
        sql`insert into accounts.api_keys (id, account_id, kind, livemode, prefix, last4, key_hash, created_at)
            select 'key_dup', account_id, kind, livemode, prefix, last4, key_hash, now()
            from accounts.api_keys where id = ${made.secretTest.key.id}`,
      )
      .then(
        () => undefined,
        (e: Error) => e,
      );
    expect(String((err?.cause as { code?: string } | undefined)?.code ?? err)).toContain('23505');
  });
});
