// The shape of API keys: `sk_test_` | `sk_live_` | `pk_test_` | `pk_live_`, then random base62.
// Pure functions; storing and looking keys up lives in accounts.ts.
import { createHash, randomBytes } from 'node:crypto';

export type KeyKind = 'secret' | 'publishable';

const KIND_PREFIX: Record<KeyKind, string> = { secret: 'sk', publishable: 'pk' };

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
/** Random characters in a new key: 40 × log2(62) ≈ 238 bits. */
export const KEY_RANDOM_LENGTH = 40;
// Accepted on input: any length we might have issued (never fewer than 32 characters).
const KEY_SHAPE = /^(sk|pk)_(test|live)_[0-9A-Za-z]{32,128}$/;

export interface NewKey {
  /** The key in plain text. It exists only in the answer that creates it. */
  secret: string;
  prefix: string;
  last4: string;
  hash: string;
}

export function keyPrefix(kind: KeyKind, livemode: boolean): string {
  return `${KIND_PREFIX[kind]}_${livemode ? 'live' : 'test'}_`;
}

/** Uniform base62: bytes ≥ 248 (= 4 × 62) are dropped, so `% 62` has no bias. */
function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const b of randomBytes(length * 2)) {
      if (b < 248) out += BASE62[b % 62];
      if (out.length === length) break;
    }
  }
  return out;
}

/**
 * The stored form of a key. Plain SHA-256 (no salt, no slow KDF) is enough here because keys
 * are ~238 random bits: nobody can guess or brute-force a preimage, unlike a password. Being
 * deterministic, it lets authentication find the key by equality on a unique index.
 */
export function hashKey(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}

export function generateKey(kind: KeyKind, livemode: boolean): NewKey {
  const prefix = keyPrefix(kind, livemode);
  const secret = prefix + randomBase62(KEY_RANDOM_LENGTH);
  return { secret, prefix, last4: secret.slice(-4), hash: hashKey(secret) };
}

/** What a key's text says about it, or undefined when it cannot be one of our keys. */
export function parseKey(key: string): { kind: KeyKind; livemode: boolean } | undefined {
  const m = KEY_SHAPE.exec(key);
  if (!m) return undefined;
  return { kind: m[1] === 'sk' ? 'secret' : 'publishable', livemode: m[2] === 'live' };
}
