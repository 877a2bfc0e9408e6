import { createHash } from 'node:crypto';
import fc from 'fast-check';
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

  it('is SHA-256 of method, path and the canonical body, as stored keys were fingerprinted', () => {
    const body = { z: null, a: [1, 'x', { y: true, b: { d: [], c: {} } }], m: 'é"\\' };
    const canonical = '{"a":[1,"x",{"b":{"c":{},"d":[]},"y":true}],"m":"é\\"\\\\","z":null}';
    expect(JSON.parse(canonical)).toEqual(body);
    const expected = createHash('sha256').update(`POST\n/v1/orders\n${canonical}`).digest('hex');
    expect(fingerprint('POST', '/v1/orders', body)).toBe(expected);
  });
});

/** The scope of a key: the account and the mode, whatever the route. */
const at = (accountId: string, livemode: boolean) => ({ accountId, livemode });

describe('keys in flight', () => {
  it('holds a key once per account and mode until released', () => {
    const f = createInFlight();
    expect(f.take(at('acct_1', false), 'k')).toBe(true);
    expect(f.take(at('acct_1', false), 'k')).toBe(false);
    expect(f.take(at('acct_1', true), 'k')).toBe(true);
    expect(f.take(at('acct_2', false), 'k')).toBe(true);
    f.release(at('acct_1', false), 'k');
    expect(f.take(at('acct_1', false), 'k')).toBe(true);
  });
});

describe('recent answers', () => {
  const fp = 'a'.repeat(64);
  const text = (a: { fingerprint: string; body: Buffer } | undefined) =>
    a && { fingerprint: a.fingerprint, body: a.body.toString() };
  it('keeps answers per account, mode and key, for a while, the newest ones only', () => {
    let t = 0;
    const r = createRecentAnswers({ max: 2, ttlMs: 1_000, maxBody: 10, now: () => t });
    r.set(at('acct_1', false), 'a', fp, Buffer.from('{"id":1}'));
    expect(text(r.get(at('acct_1', false), 'a'))).toEqual({ fingerprint: fp, body: '{"id":1}' });
    expect(r.get(at('acct_1', true), 'a')).toBeUndefined();
    expect(r.get(at('acct_2', false), 'a')).toBeUndefined();
    r.set(at('acct_1', false), 'big', fp, Buffer.from('x'.repeat(11)));
    expect(r.get(at('acct_1', false), 'big')).toBeUndefined();
    r.set(at('acct_1', false), 'b', 'f2', Buffer.from('2'));
    r.set(at('acct_1', false), 'c', 'f3', Buffer.from('3'));
    expect(r.get(at('acct_1', false), 'a')).toBeUndefined();
    expect(text(r.get(at('acct_1', false), 'b'))).toEqual({ fingerprint: 'f2', body: '2' });
    expect(text(r.get(at('acct_1', false), 'c'))).toEqual({ fingerprint: 'f3', body: '3' });
    t = 1_000;
    expect(r.get(at('acct_1', false), 'c')).toBeUndefined();
  });

  it('keeps an answer no longer than its key lives in the service', () => {
    let t = 0;
    const r = createRecentAnswers({ ttlMs: 1_000, now: () => t });
    r.set(at('acct_1', false), 'soon', fp, Buffer.from('1'), 400);
    r.set(at('acct_1', false), 'later', fp, Buffer.from('2'), 5_000);
    r.set(at('acct_1', false), 'gone', fp, Buffer.from('3'), 0);
    r.set(at('acct_1', false), 'unknown', fp, Buffer.from('4'), Number.NaN);
    expect(r.get(at('acct_1', false), 'gone')).toBeUndefined();
    expect(r.get(at('acct_1', false), 'unknown')).toBeUndefined();
    t = 399;
    expect(text(r.get(at('acct_1', false), 'soon'))?.body).toBe('1');
    t = 400;
    expect(r.get(at('acct_1', false), 'soon')).toBeUndefined();
    expect(text(r.get(at('acct_1', false), 'later'))?.body).toBe('2');
    t = 1_000; // the gateway's own limit comes first
    expect(r.get(at('acct_1', false), 'later')).toBeUndefined();
  });

  it('gives back the exact bytes, multi-byte text included, and a copy of them', () => {
    const r = createRecentAnswers();
    const body = Buffer.from('{"name":"Café ☕","note":"日本"}');
    r.set(at('acct_1', false), 'k', 'é'.repeat(20), body);
    const got = r.get(at('acct_1', false), 'k')!;
    expect(got.fingerprint).toBe('é'.repeat(20));
    expect(got.body.equals(body)).toBe(true);
    body.fill(0);
    expect(got.body.toString()).toBe('{"name":"Café ☕","note":"日本"}');
  });
});

describe('fingerprint of any JSON body', () => {
  // The canonical form as first defined: keys sorted with Array.prototype.sort, values as
  // JSON.stringify writes them. Stored fingerprints were computed this way.
  const reference = (value: unknown): string => {
    if (Array.isArray(value)) return `[${value.map(reference).join(',')}]`;
    if (value !== null && typeof value === 'object') {
      const o = value as Record<string, unknown>;
      return `{${Object.keys(o)
        .sort()
        .map((k) => `${JSON.stringify(k)}:${reference(o[k])}`)
        .join(',')}}`;
    }
    return JSON.stringify(value) ?? 'null';
  };
  it('is SHA-256 of the reference canonical form, for every body JSON can carry', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (body) => {
        const expected = createHash('sha256')
          .update(`POST\n/v1/x\n${reference(body)}`)
          .digest('hex');
        expect(fingerprint('POST', '/v1/x', body)).toBe(expected);
      }),
      { numRuns: 2_000 },
    );
  });
});
