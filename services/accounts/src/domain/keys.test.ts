import { describe, expect, it } from 'vitest';
import { generateKey, hashKey, KEY_RANDOM_LENGTH, keyPrefix, parseKey } from './keys.ts';

describe('keys', () => {
  it('have the four prefixes and random base62 bodies', () => {
    expect(keyPrefix('secret', false)).toBe('sk_test_');
    expect(keyPrefix('secret', true)).toBe('sk_live_');
    expect(keyPrefix('publishable', false)).toBe('pk_test_');
    expect(keyPrefix('publishable', true)).toBe('pk_live_');
    const k = generateKey('secret', true);
    expect(k.secret).toMatch(new RegExp(`^sk_live_[0-9A-Za-z]{${KEY_RANDOM_LENGTH}}$`));
    expect(k.prefix).toBe('sk_live_');
    expect(k.last4).toBe(k.secret.slice(-4));
    expect(k.hash).toBe(hashKey(k.secret));
    expect(k.hash).toMatch(/^[0-9a-f]{64}$/);
    expect(k.hash).not.toContain(k.secret.slice(8));
  });

  it('never repeat and use the whole alphabet', () => {
    const seen = new Set<string>();
    const chars = new Set<string>();
    for (let i = 0; i < 500; i++) {
      const { secret } = generateKey('publishable', false);
      seen.add(secret);
      for (const c of secret.slice(8)) chars.add(c);
    }
    expect(seen.size).toBe(500);
    expect(chars.size).toBe(62);
  });

  it('parse what they are, and reject anything else', () => {
    expect(parseKey(generateKey('secret', false).secret)).toEqual({ kind: 'secret', livemode: false });
    expect(parseKey(generateKey('publishable', true).secret)).toEqual({
      kind: 'publishable',
      livemode: true,
    });
    const body = 'a'.repeat(KEY_RANDOM_LENGTH);
    for (const bad of [
      '',
      `sk_prod_${body}`,
      `rk_test_${body}`,
      `SK_TEST_${body}`,
      `sk_test_${'a'.repeat(31)}`,
      `sk_test_${'a'.repeat(129)}`,
      `sk_test_${body.slice(1)}-`,
      `sk_test_${body} `,
      ` sk_test_${body}`,
      `sk_test_${body}\n`,
    ]) {
      expect(parseKey(bad), JSON.stringify(bad)).toBeUndefined();
    }
  });
});
