import { randomBytes } from 'node:crypto';

// Crockford base32 in lower case: ids sort by creation time (48-bit ms clock first, then 80
// random bits), so "newest first" lists page by id alone.
const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';

function encodeTime(ms: number): string {
  let out = '';
  for (let i = 0; i < 10; i++) {
    out = ALPHABET[ms % 32] + out;
    ms = Math.floor(ms / 32);
  }
  return out;
}

/** A prefixed, time-ordered id: `newId('ord')` → `ord_01k…` (26 characters after the prefix). */
export function newId(prefix: string, now: number = Date.now()): string {
  const bytes = randomBytes(16);
  let rand = '';
  for (let i = 0; i < 16; i++) rand += ALPHABET[bytes[i]! & 31];
  return `${prefix}_${encodeTime(now)}${rand}`;
}

/** True when `id` has the shape newId gives for `prefix`. */
export function isId(prefix: string, id: string): boolean {
  return (
    id.length === prefix.length + 27 &&
    id.startsWith(`${prefix}_`) &&
    /^[0-9a-z]+$/.test(id.slice(prefix.length + 1))
  );
}
