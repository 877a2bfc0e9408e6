import { describe, expect, it } from 'vitest';
import { createInFlight, createRecentAnswers, fingerprint } from './idempotency.ts';

describe('fingerprint', () => {
  it('ignores formatting and key order but not values, method or path', () => {
    const a = fingerprint('POST', '/v1/orders', { a: 1, b: [1, { c: 2, d: 3 }] });
    expect(fingerprint('POST', '/v1/orders', { b: [1, { d: 3, c: 2 }], a: 1 })).toBe(a);
    expect(fingerprint('POST', '/v1/orders', { a: 2, b: [1, { c: 2, d: 3 }] })).not.toBe(a);
    expect(fingerprint('POST', '/v1/products', { a: 1, b: [1, { c: 2, d: 3 }] })).not.toBe(a);
    expect(fingerprint('PATCH', '/v1/orders', { a: 1, b: [1, { c: 2, d: 3 }] })).not.toBe(a);
  });
});

describe('keys in flight', () => {
  it('holds a key once per account and mode until released', () => {
    const f = createInFlight();
    expect(f.take('acct_1', false, 'k')).toBe(true);
    expect(f.take('acct_1', false, 'k')).toBe(false);
    expect(f.take('acct_1', true, 'k')).toBe(true);
    expect(f.take('acct_2', false, 'k')).toBe(true);
    f.release('acct_1', false, 'k');
    expect(f.take('acct_1', false, 'k')).toBe(true);
  });
});

describe('recent answers', () => {
  it('keeps answers per account, mode and key, for a while, the newest ones only', () => {
    let t = 0;
    const r = createRecentAnswers({ max: 2, ttlMs: 1_000, maxBody: 10, now: () => t });
    r.set('acct_1', false, 'a', { fingerprint: 'f', body: '{"id":1}' });
    expect(r.get('acct_1', false, 'a')).toMatchObject({ fingerprint: 'f', body: '{"id":1}' });
    expect(r.get('acct_1', true, 'a')).toBeUndefined();
    expect(r.get('acct_2', false, 'a')).toBeUndefined();
    r.set('acct_1', false, 'big', { fingerprint: 'f', body: 'x'.repeat(11) });
    expect(r.get('acct_1', false, 'big')).toBeUndefined();
    r.set('acct_1', false, 'b', { fingerprint: 'f', body: '2' });
    r.set('acct_1', false, 'c', { fingerprint: 'f', body: '3' });
    expect(r.get('acct_1', false, 'a')).toBeUndefined();
    expect(r.get('acct_1', false, 'c')?.body).toBe('3');
    t = 1_000;
    expect(r.get('acct_1', false, 'c')).toBeUndefined();
  });
});
