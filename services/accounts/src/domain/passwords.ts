// Owner passwords: scrypt (node:crypto) with a random salt per hash, stored as one string that
// carries its own parameters, so they can be raised later without a migration:
//   scrypt$<log2 N>$<r>$<p>$<salt base64url>$<hash base64url>
// Verification recomputes with the stored parameters and compares in constant time.
import { createHash, randomBytes, type ScryptOptions, scrypt, timingSafeEqual } from 'node:crypto';
import { apiError } from '@mcs/errors';

/** N = 2^15, r = 8, p = 1: 32 MiB and some tens of milliseconds per hash (OWASP's scrypt floor is 2^17 × 8 × 1 at 64 MiB; this trades some of that for sign-ins on small machines). */
const LOG_N = 15;
const R = 8;
const P = 1;
const KEY_LENGTH = 32;
const SALT_LENGTH = 16;
export const MIN_PASSWORD = 10;
export const MAX_PASSWORD = 200;

function derive(password: string, salt: Buffer, logN: number, r: number, p: number): Promise<Buffer> {
  const opts: ScryptOptions = { N: 2 ** logN, r, p, maxmem: 256 * 2 ** logN * r + 1024 * 1024 };
  return new Promise((resolve, reject) =>
    scrypt(password.normalize('NFC'), salt, KEY_LENGTH, opts, (err, key) =>
      err ? reject(err) : resolve(key),
    ),
  );
}

/** Refuses a password too short or too long to be one (counted in Unicode code points). */
export function checkPasswordRules(password: string, param = 'password'): void {
  const length = [...password].length;
  if (length < MIN_PASSWORD || length > MAX_PASSWORD) throw apiError('password_too_weak', { param });
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(SALT_LENGTH);
  const key = await derive(password, salt, LOG_N, R, P);
  return ['scrypt', LOG_N, R, P, salt.toString('base64url'), key.toString('base64url')].join('$');
}

const STORED = /^scrypt\$(\d{1,2})\$(\d{1,2})\$(\d{1,2})\$([A-Za-z0-9_-]+)\$([A-Za-z0-9_-]+)$/;

/** Whether `password` is the one `stored` was made from. A malformed `stored` matches nothing. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const m = STORED.exec(stored);
  if (!m) return false;
  const [logN, r, p] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (logN < 10 || logN > 22 || r < 1 || r > 32 || p < 1 || p > 16) return false;
  const expected = Buffer.from(m[5]!, 'base64url');
  const actual = await derive(password, Buffer.from(m[4]!, 'base64url'), logN, r, p);
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}

/** A hash of nothing anyone knows: verifying against it costs what a real check costs. */
let decoy: Promise<string> | undefined;
export function decoyHash(): Promise<string> {
  decoy ??= hashPassword(randomBytes(24).toString('base64url'));
  return decoy;
}

/**
 * The owner's password stamp (proto OwnerPasswordStamp): 128 bits of SHA-256 over the stored
 * hash, so it is new with every password set (the salt is random) and the same until then.
 * Guessing a password from it still costs a full scrypt per guess; '' without a password.
 */
export function passwordStamp(stored: string | null): string {
  if (stored === null) return '';
  return createHash('sha256').update(`mcs owner password stamp\0${stored}`).digest('base64url').slice(0, 22);
}
