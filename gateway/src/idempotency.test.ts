import { freshDatabase, type MigratedDatabase } from '@mcs/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateGateway } from './db/migrate.ts';
import {
  createIdempotencyStore,
  fingerprint,
  type IdempotencyStore,
  KEY_LIFETIME_MS,
} from './idempotency.ts';

let db: MigratedDatabase;
let store: IdempotencyStore;
let n = 0;
beforeAll(async () => {
  db = await freshDatabase(migrateGateway);
  store = createIdempotencyStore(db, 1_000);
});
afterAll(() => db?.close());

const scope = () => ({ accountId: 'acct_1', livemode: false, key: `k${++n}` });
const t0 = new Date('2026-01-01T00:00:00Z');
const at = (ms: number) => new Date(t0.getTime() + ms);

describe('fingerprint', () => {
  it('ignores formatting and key order but not values, method or path', () => {
    const a = fingerprint('POST', '/v1/orders', { a: 1, b: [1, { c: 2, d: 3 }] });
    expect(fingerprint('POST', '/v1/orders', { b: [1, { d: 3, c: 2 }], a: 1 })).toBe(a);
    expect(fingerprint('POST', '/v1/orders', { a: 2, b: [1, { c: 2, d: 3 }] })).not.toBe(a);
    expect(fingerprint('POST', '/v1/products', { a: 1, b: [1, { c: 2, d: 3 }] })).not.toBe(a);
  });
});

describe('idempotency store', () => {
  it('proceeds once, replays the stored answer, refuses another request with the same key', async () => {
    const s = scope();
    expect(await store.begin(s, 'fp1', t0)).toEqual({ kind: 'proceed' });
    expect(await store.begin(s, 'fp1', at(10))).toEqual({ kind: 'in_use' });
    await store.complete(s, 200, '{"id":"ord_1"}');
    expect(await store.begin(s, 'fp1', at(20))).toEqual({
      kind: 'replay',
      status: 200,
      body: '{"id":"ord_1"}',
    });
    expect(await store.begin(s, 'fp2', at(30))).toEqual({ kind: 'mismatch' });
  });

  it('frees a released key', async () => {
    const s = scope();
    await store.begin(s, 'fp', t0);
    await store.release(s);
    expect(await store.begin(s, 'other', at(1))).toEqual({ kind: 'proceed' });
  });

  it('lets a retry take over an in-flight key whose gateway died, after the lock', async () => {
    const s = scope();
    await store.begin(s, 'fp', t0);
    expect((await store.begin(s, 'fp', at(999))).kind).toBe('in_use');
    expect((await store.begin(s, 'other', at(2_000))).kind).toBe('mismatch');
    expect((await store.begin(s, 'fp', at(2_000))).kind).toBe('proceed');
  });

  it('expires keys after 24 hours: a new operation may use it, and the janitor removes it', async () => {
    const s = scope();
    await store.begin(s, 'fp', t0);
    await store.complete(s, 200, 'old');
    expect((await store.begin(s, 'new', at(KEY_LIFETIME_MS - 1))).kind).toBe('mismatch');
    expect(await store.begin(s, 'new', at(KEY_LIFETIME_MS + 1))).toEqual({ kind: 'proceed' });
    await store.complete(s, 200, 'new');
    expect(await store.begin(s, 'new', at(KEY_LIFETIME_MS + 2))).toEqual({
      kind: 'replay',
      status: 200,
      body: 'new',
    });
    const old = scope();
    await store.begin(old, 'fp', t0);
    expect(await store.sweep(at(KEY_LIFETIME_MS + 10))).toBeGreaterThanOrEqual(1);
    expect(await store.begin(old, 'other', at(KEY_LIFETIME_MS + 11))).toEqual({ kind: 'proceed' });
  });

  it('keeps accounts and modes apart', async () => {
    const s = scope();
    await store.begin(s, 'fp', t0);
    expect((await store.begin({ ...s, accountId: 'acct_2' }, 'x', t0)).kind).toBe('proceed');
    expect((await store.begin({ ...s, livemode: true }, 'x', t0)).kind).toBe('proceed');
  });
});

describe('at rest', () => {
  it('keeps neither the key nor the answer in clear', async () => {
    const s = { accountId: 'acct_rest', livemode: false, key: 'my-key-123' };
    await store.begin(s, 'fp', t0);
    await store.complete(s, 200, '{"secret":"whsec_abcdef"}');
    const { rows } = await db.pool.query(
      "select * from gateway.idempotency_keys where account_id = 'acct_rest'",
    );
    const dump = JSON.stringify(rows) + Buffer.from(rows[0].body).toString('latin1');
    expect(dump).not.toContain('my-key-123');
    expect(dump).not.toContain('whsec_abcdef');
    expect(await store.begin(s, 'fp', at(1))).toEqual({
      kind: 'replay',
      status: 200,
      body: '{"secret":"whsec_abcdef"}',
    });
  });
});
