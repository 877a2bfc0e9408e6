import { pooledRandomBytes } from './random.ts';

// Crockford base32 in lower case: ids sort by creation time (48-bit ms clock first, then 80
// random bits), so "newest first" lists page by id alone. Within one process ids are strictly
// increasing (the ULID monotonic rule): in the same millisecond the random part counts up.
const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';

/** The 10-character time part of an id made at `ms` (for ids derived in SQL). */
export function encodeTime(ms: number): string {
  // Ten digits hold 50 bits; before 1970 sorts first, as the earliest id would.
  ms = Math.min(Math.max(0, Math.floor(ms)), 2 ** 50 - 1);
  let out = '';
  for (let i = 0; i < 10; i++) {
    out = ALPHABET[ms % 32] + out;
    ms = Math.floor(ms / 32);
  }
  return out;
}

let lastMs = -1;
let lastRand: number[] = [];

function increment(digits: number[]): number[] {
  const next = [...digits];
  for (let i = next.length - 1; i >= 0; i--) {
    if (next[i]! < 31) {
      next[i]!++;
      return next;
    }
    next[i] = 0;
  }
  return next; // 2^80 ids in one millisecond: wraps, never happens
}

/** A prefixed, time-ordered id: `newId('ord')` → `ord_01k…` (26 characters after the prefix). */
export function newId(prefix: string, now: number = Date.now()): string {
  let rand: number[];
  if (now <= lastMs) {
    now = lastMs;
    rand = increment(lastRand);
  } else {
    const bytes = pooledRandomBytes(16);
    // The top bit stays clear so counting up within a millisecond has room before it wraps.
    rand = [...bytes].map((b, i) => (i === 0 ? b & 15 : b & 31));
  }
  lastMs = now;
  lastRand = rand;
  return `${prefix}_${encodeTime(now)}${rand.map((d) => ALPHABET[d]).join('')}`;
}

/** True when `id` has the shape newId gives for `prefix`. */
export function isId(prefix: string, id: string): boolean {
  return (
    id.length === prefix.length + 27 &&
    id.startsWith(`${prefix}_`) &&
    /^[0-9a-hjkmnp-tv-z]+$/.test(id.slice(prefix.length + 1))
  );
}
