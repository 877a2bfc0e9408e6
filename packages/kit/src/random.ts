// Random bytes for the hot paths, drawn from a pool refilled 4 KiB at a time: one getrandom call
// per id or nonce showed in the profiles under load (2 % of commerce's CPU for order ids, as much
// again for the idempotency seal's nonces, 2.8 % of the gateway's for request ids). Every byte
// is handed out once, so nonces drawn from it never repeat any more than fresh ones would.
import { randomBytes } from 'node:crypto';

const POOL_BYTES = 4096;
let pool = Buffer.alloc(0);
let at = 0;

/** `n` (≤ 4096) cryptographically random bytes, a view into the pool: copy it to keep it past the next call. */
export function pooledRandomBytes(n: number): Buffer {
  if (at + n > pool.length) {
    pool = randomBytes(Math.max(POOL_BYTES, n));
    at = 0;
  }
  at += n;
  return pool.subarray(at - n, at);
}
