import { apiErrorOf, freshDatabase, type MigratedDatabase } from '@mcs/testkit';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateAccounts } from '../db/migrate.ts';
import { accounts, signInFailures } from '../db/schema.ts';
import { authenticateKey, createAccount, listApiKeys } from './accounts.ts';
import {
  authenticateOwner,
  blockAfter,
  FREE_FAILURES,
  ownerPasswordStamp,
  setOwnerPassword,
  sweepSignInFailures,
} from './owners.ts';
import { hashPassword, verifyPassword } from './passwords.ts';

let database: MigratedDatabase;
beforeAll(async () => {
  database = await freshDatabase(migrateAccounts);
});
afterAll(async () => {
  await database?.close();
});

const create = (input: Parameters<typeof createAccount>[1]) =>
  database.db.transaction((tx) => createAccount(tx, input));
const PASSWORD = 'correct horse battery';

describe('passwords', () => {
  it('hashes with scrypt and a salt of its own, and verifies in both directions', async () => {
    const a = await hashPassword(PASSWORD);
    const b = await hashPassword(PASSWORD);
    expect(a).toMatch(/^scrypt\$15\$8\$1\$[\w-]{22}\$[\w-]{43}$/);
    expect(a).not.toBe(b);
    expect(await verifyPassword(PASSWORD, a)).toBe(true);
    expect(await verifyPassword(`${PASSWORD}!`, a)).toBe(false);
    expect(await verifyPassword(PASSWORD, 'scrypt$99$8$1$x$y')).toBe(false);
    expect(await verifyPassword(PASSWORD, '')).toBe(false);
  });
});

describe('owner sign-in', () => {
  it('creates an account with a password that signs in by e-mail (any case), never stored in clear', async () => {
    const made = await create({ email: 'Owner@Example.com', password: PASSWORD });
    const [row] = await database.db.select().from(accounts).where(eq(accounts.id, made.account.id));
    expect(row!.passwordHash).toMatch(/^scrypt\$/);
    expect(JSON.stringify(row)).not.toContain(PASSWORD);
    expect(made.account).not.toHaveProperty('passwordHash');
    const who = await authenticateOwner(database.db, { email: 'owner@example.COM', password: PASSWORD });
    expect(who.accountId).toBe(made.account.id);
  });

  it('answers a wrong password and an unknown e-mail alike', async () => {
    await create({ email: 'alike@example.com', password: PASSWORD });
    const wrong = await apiErrorOf(
      authenticateOwner(database.db, { email: 'alike@example.com', password: 'not the password' }),
    );
    const unknown = await apiErrorOf(
      authenticateOwner(database.db, { email: 'nobody@example.com', password: PASSWORD }),
    );
    expect(wrong.code).toBe('owner_credentials_invalid');
    expect(unknown.code).toBe('owner_credentials_invalid');
    expect(wrong.err.rawMessage).toBe(unknown.err.rawMessage);
    // An account without a password cannot be signed in to with one.
    await create({ email: 'keysonly@example.com' });
    expect(
      (await apiErrorOf(authenticateOwner(database.db, { email: 'keysonly@example.com', password: '' })))
        .code,
    ).toBe('owner_credentials_invalid');
  });

  it('refuses short passwords and a second owner of one e-mail address', async () => {
    expect((await apiErrorOf(create({ email: 'short@example.com', password: 'short' }))).code).toBe(
      'password_too_weak',
    );
    await create({ email: 'twice@example.com', password: PASSWORD });
    const again = await apiErrorOf(create({ email: 'TWICE@example.com', password: PASSWORD }));
    expect(again).toMatchObject({ code: 'email_taken', param: 'email' });
    // Without a password the address may hold more accounts (keys-only, as before).
    await create({ email: 'twice@example.com' });
  });

  it('throttles after repeated failures, even the right password, and a success resets the count', async () => {
    const made = await create({ email: 'guessed@example.com', password: PASSWORD });
    const t0 = new Date('2030-01-01T00:00:00Z');
    const attempt = (password: string, now: Date) =>
      apiErrorOf(authenticateOwner(database.db, { email: 'guessed@example.com', password }, now));
    for (let i = 0; i < FREE_FAILURES; i++) {
      expect((await attempt('wrong password', t0)).code).toBe('owner_credentials_invalid');
    }
    const blocked = await attempt(PASSWORD, new Date(t0.getTime() + 10_000));
    expect(blocked.code).toBe('login_throttled');
    expect(blocked.err.rawMessage).toContain('Try again in 20 seconds');
    // Once the block has passed, the right password signs in and the count starts over.
    const later = new Date(t0.getTime() + blockAfter(FREE_FAILURES) + 1);
    const who = await authenticateOwner(
      database.db,
      { email: 'guessed@example.com', password: PASSWORD },
      later,
    );
    expect(who.accountId).toBe(made.account.id);
    const rows = await database.db
      .select()
      .from(signInFailures)
      .where(eq(signInFailures.email, 'guessed@example.com'));
    expect(rows).toEqual([]);
    expect(blockAfter(FREE_FAILURES + 1)).toBe(2 * blockAfter(FREE_FAILURES));
    expect(blockAfter(FREE_FAILURES + 30)).toBe(15 * 60_000);
  });

  it('counts attempts as they start: of parallel guesses only the free ones are checked', async () => {
    await create({ email: 'raced@example.com', password: PASSWORD });
    const t0 = new Date('2031-01-01T00:00:00Z');
    const codes = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        apiErrorOf(
          authenticateOwner(
            database.db,
            { email: 'Raced@example.com ', password: i === 11 ? PASSWORD : `guess ${i}` },
            t0,
          ),
        ).then(
          (e) => e.code,
          () => 'signed in',
        ),
      ),
    );
    // Counted before any check: FREE_FAILURES attempts go through, the rest are throttled
    // unchecked (the right password among them too, unless it was among the first).
    expect(codes.filter((c) => c !== 'login_throttled')).toHaveLength(FREE_FAILURES);
    expect(codes.filter((c) => c === 'login_throttled')).toHaveLength(12 - FREE_FAILURES);
  });

  it("throttles an address nobody owns exactly like an owner's, so the throttle tells nothing", async () => {
    await create({ email: 'owner-x@example.com', password: PASSWORD });
    const t0 = new Date('2032-01-01T00:00:00Z');
    const answers = async (email: string) => {
      const out: string[] = [];
      for (let i = 0; i <= FREE_FAILURES; i++) {
        const e = await apiErrorOf(authenticateOwner(database.db, { email, password: 'wrong password' }, t0));
        out.push(`${e.code}: ${e.err.rawMessage}`);
      }
      return out;
    };
    const owner = await answers('owner-x@example.com');
    expect(await answers('nobody-x@example.com')).toEqual(owner);
    expect(owner.at(-1)).toMatch(/^login_throttled: Too many failed sign-ins with this e-mail address/);
  });

  it('forgets addresses idle a day', async () => {
    const t0 = new Date('2033-01-01T00:00:00Z');
    await apiErrorOf(authenticateOwner(database.db, { email: 'idle@example.com', password: 'x' }, t0));
    const idle = () =>
      database.db.select().from(signInFailures).where(eq(signInFailures.email, 'idle@example.com'));
    await sweepSignInFailures(database.db, new Date(t0.getTime() + 3_600_000));
    expect(await idle()).toHaveLength(1);
    await sweepSignInFailures(database.db, new Date(t0.getTime() + 25 * 3_600_000));
    expect(await idle()).toEqual([]);
  });

  it('sets a password on an existing account', async () => {
    const made = await create({ email: 'later@example.com' });
    await setOwnerPassword(database.db, { accountId: made.account.id, password: PASSWORD });
    const who = await authenticateOwner(database.db, { email: 'later@example.com', password: PASSWORD });
    expect(who.accountId).toBe(made.account.id);
  });

  it('stamps each password: the same until it is set again, new even for the same password', async () => {
    const made = await create({ email: 'stamp@example.com' });
    expect(await ownerPasswordStamp(database.db, made.account.id)).toBe('');
    await setOwnerPassword(database.db, { accountId: made.account.id, password: PASSWORD });
    const first = await ownerPasswordStamp(database.db, made.account.id);
    expect(first).toMatch(/^[\w-]{22}$/);
    const who = await authenticateOwner(database.db, { email: 'stamp@example.com', password: PASSWORD });
    expect(who.passwordStamp).toBe(first);
    expect(await ownerPasswordStamp(database.db, made.account.id)).toBe(first);
    await setOwnerPassword(database.db, { accountId: made.account.id, password: PASSWORD });
    const second = await ownerPasswordStamp(database.db, made.account.id);
    expect(second).toMatch(/^[\w-]{22}$/);
    expect(second).not.toBe(first);
    const [row] = await database.db.select().from(accounts).where(eq(accounts.id, made.account.id));
    expect(row!.passwordHash).not.toContain(second);
    expect((await apiErrorOf(ownerPasswordStamp(database.db, 'acct_nobody'))).code).toBe('resource_missing');
    expect((await apiErrorOf(ownerPasswordStamp(database.db, ''))).code).toBe('missing_required_field');
  });
});

describe('API keys: last used', () => {
  it('records when a key last authenticated', async () => {
    const made = await create({ email: 'used@example.com' });
    const before = await listApiKeys(database.db, made.account.id);
    expect(before.every((k) => k.lastUsedAt === null)).toBe(true);
    await authenticateKey(database.db, made.secretTest.secret);
    const after = await listApiKeys(database.db, made.account.id);
    const used = after.find((k) => k.id === made.secretTest.key.id)!;
    expect(used.lastUsedAt).toBeInstanceOf(Date);
    expect(after.filter((k) => k.lastUsedAt !== null)).toHaveLength(1);
  });
});
