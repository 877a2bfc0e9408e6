import { createHash } from 'node:crypto';
import { freshDatabase, type MigratedDatabase } from '@mcs/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateGateway } from '../db/migrate.ts';
import {
  createSessionStore,
  MAX_SESSIONS_PER_SIGNER,
  SESSION_LIFETIME_MS,
  type SessionStore,
} from './sessions.ts';

let db: MigratedDatabase;
let store: SessionStore;
let n = 0;
beforeAll(async () => {
  db = await freshDatabase(migrateGateway);
  store = createSessionStore(db.db);
});
afterAll(() => db?.close());

const who = (keyId = `key_${++n}`) => ({ accountId: 'acct_1', livemode: false, keyId, passwordStamp: null });
const t0 = new Date('2026-01-01T00:00:00Z');
const at = (ms: number) => new Date(t0.getTime() + ms);

describe('dashboard sessions', () => {
  it('creates a session found by its token until it expires 12 hours later', async () => {
    const { token, session } = await store.create(who(), t0);
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(session).toMatchObject({ accountId: 'acct_1', livemode: false, createdAt: t0 });
    expect(session.expiresAt.getTime() - t0.getTime()).toBe(SESSION_LIFETIME_MS);
    expect(await store.find(token, at(1))).toEqual(session);
    expect(await store.find(token, at(SESSION_LIFETIME_MS - 1))).toEqual(session);
    expect(await store.find(token, at(SESSION_LIFETIME_MS))).toBeUndefined();
  });

  it('stores only the SHA-256 of the token', async () => {
    const { token, session } = await store.create(who(), t0);
    expect(session.id).toBe(createHash('sha256').update(token).digest('hex'));
    const { rows } = await db.pool.query('select * from gateway.sessions where id = $1', [session.id]);
    expect(rows).toHaveLength(1);
    expect(JSON.stringify(rows)).not.toContain(token);
  });

  it('gives every sign-in its own token', async () => {
    const a = await store.create(who('key_same'), t0);
    const b = await store.create(who('key_same'), t0);
    expect(a.token).not.toBe(b.token);
    expect(a.session.id).not.toBe(b.session.id);
  });

  it('finds nothing for unknown, malformed or hashed tokens', async () => {
    const { session } = await store.create(who(), t0);
    for (const token of ['', 'x', 'A'.repeat(43), session.id, `${'A'.repeat(42)}'`, 'A'.repeat(44)]) {
      expect(await store.find(token, at(1)), token).toBeUndefined();
    }
  });

  it('signs out one session only', async () => {
    const keyId = `key_${++n}`;
    const a = await store.create(who(keyId), t0);
    const b = await store.create(who(keyId), t0);
    await store.delete(a.token);
    expect(await store.find(a.token, at(1))).toBeUndefined();
    expect(await store.find(b.token, at(1))).toBeDefined();
    await store.delete('not a token'); // harmless
  });

  it('ends every session of a revoked key, and no other', async () => {
    const revoked = `key_${++n}`;
    const a = await store.create(who(revoked), t0);
    const b = await store.create({ ...who(revoked), livemode: true }, t0);
    const other = await store.create(who(), t0);
    expect(await store.deleteForKey(revoked)).toBe(2);
    expect(await store.find(a.token, at(1))).toBeUndefined();
    expect(await store.find(b.token, at(1))).toBeUndefined();
    expect(await store.find(other.token, at(1))).toBeDefined();
    expect(await store.deleteForKey(revoked)).toBe(0);
  });

  it('keeps the newest MAX_SESSIONS_PER_SIGNER sessions of one key, and of one owner', async () => {
    const keyId = `key_${++n}`;
    const other = await store.create(who(), t0);
    const made = [];
    for (let i = 0; i <= MAX_SESSIONS_PER_SIGNER; i++) made.push(await store.create(who(keyId), at(i)));
    expect(await store.find(made[0]!.token, at(100))).toBeUndefined();
    for (const m of made.slice(1)) expect(await store.find(m.token, at(100))).toBeDefined();
    expect(await store.find(other.token, at(100))).toBeDefined();
    const owner = { accountId: 'acct_owner', livemode: false, keyId: null, passwordStamp: 'stamp-a' };
    const first = await store.create(owner, t0);
    for (let i = 1; i <= MAX_SESSIONS_PER_SIGNER; i++) await store.create(owner, at(i));
    expect(await store.find(first.token, at(100))).toBeUndefined();
  });

  it("keeps an owner's password stamp, and ends the owner's sessions of other stamps only", async () => {
    const owner = (passwordStamp: string) => ({
      accountId: 'acct_stamps',
      livemode: false,
      keyId: null,
      passwordStamp,
    });
    const a = await store.create(owner('stamp-a'), t0);
    const b = await store.create(owner('stamp-b'), t0);
    const key = await store.create({ ...who(), accountId: 'acct_stamps', passwordStamp: 'ignored' }, t0);
    expect((await store.find(a.token, t0))?.passwordStamp).toBe('stamp-a');
    expect((await store.find(key.token, t0))?.passwordStamp).toBeNull();
    expect(await store.deleteForOwner('acct_stamps', 'stamp-b')).toBe(1);
    expect(await store.find(a.token, t0)).toBeUndefined();
    expect(await store.find(b.token, t0)).toBeDefined();
    expect(await store.deleteForOwner('acct_stamps')).toBe(1);
    expect(await store.find(b.token, t0)).toBeUndefined();
    expect(await store.find(key.token, t0)).toBeDefined(); // a key's session is not the owner's
  });

  it('sweeps expired sessions only, in slices', async () => {
    // More than one slice of expired sessions (deleteInSlices takes 5,000 at a time).
    await db.pool.query(
      `insert into gateway.sessions (id, account_id, livemode, key_id, created_at, expires_at)
       select md5(g::text) || md5('x' || g::text), 'acct_bulk', false, 'key_bulk' || g, $1, $1 from generate_series(1, 12000) g`,
      [t0],
    );
    const later = at(10 * SESSION_LIFETIME_MS);
    const old = await store.create(who(), t0);
    const fresh = await store.create(who(), later);
    expect(await store.sweep(at(10 * SESSION_LIFETIME_MS + 1))).toBeGreaterThanOrEqual(12_001);
    const { rows } = await db.pool.query('select id from gateway.sessions where id = any($1)', [
      [old.session.id, fresh.session.id],
    ]);
    expect(rows.map((r) => r.id)).toEqual([fresh.session.id]);
  });
});
