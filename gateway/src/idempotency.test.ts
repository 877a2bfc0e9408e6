import { describe, expect, it } from 'vitest';
import { createInFlight, fingerprint } from './idempotency.ts';

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
