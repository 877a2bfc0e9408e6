// API-key authentication (spec section 5): the accounts service verifies a key once; the answer
// is cached here (keyed by the key's SHA-256, never the key itself) for a short TTL.
import { createHash } from 'node:crypto';
import { type Client, Code, ConnectError } from '@connectrpc/connect';
import { apiError } from '@mcs/errors';
import { accounts } from '@mcs/proto';

export interface Principal {
  accountId: string;
  livemode: boolean;
  secret: boolean;
  rateLimit: number;
  keyId: string;
}

const KEY_SHAPE = /^(sk|pk)_(test|live)_[0-9A-Za-z]{16,128}$/;

export interface Authenticator {
  /**
   * `from`: the client's address; a key not in the cache is checked with accounts only while
   * that address has not sent too many unknown keys (UNKNOWN_KEYS_PER_S).
   */
  authenticate(header: string | undefined, from?: string): Promise<Principal>;
  /** Forget a key at once (revocations). */
  forget(keyId: string): void;
}

/**
 * In the last fifth of an entry's TTL, a request that finds it still answers from it and has the
 * key verified again meanwhile, so under steady traffic an entry is renewed before it expires and
 * no request waits for accounts. A key is still checked with accounts at least once per TTL: a
 * renewal that fails leaves the entry to expire as before.
 */
const REFRESH_AHEAD = 0.2;

/**
 * Unknown keys per client address and second, beyond a burst: every well-formed key the cache
 * does not hold costs a call to accounts and a query, so a client sending random keys (a key
 * scanner, a misconfigured job) at a few hundred a second slowed every account's requests. Each
 * key that turns out unknown takes a token of its address's bucket; while the bucket is empty, a
 * key not in the cache is refused with 429 without a call (keys in the cache still pass). Checks
 * run at once only as many at a time as the bucket has tokens, the others wait their turn, so
 * no burst of requests can spend more than the bucket holds; real keys take nothing, so a burst of
 * new, valid keys (a gateway just started) waits a moment at most, and is never refused.
 * Behind a proxy, TRUSTED_PROXIES tells the clients apart (client-address.ts).
 */
export const UNKNOWN_KEYS_PER_S = 10;
export const UNKNOWN_KEYS_BURST = 50;
interface Bucket {
  tokens: number;
  at: number;
  /** Checks of this address's keys with accounts under way. */
  checking: number;
  /** Requests waiting for one of those to end. */
  waiting: Array<() => void>;
}

/** Addresses tracked at most (a spoofed flood cannot grow the map without bound). */
const MAX_ADDRESSES = 100_000;

export function createAuthenticator(
  client: Client<typeof accounts.AccountService>,
  ttlMs: number,
  clock: () => number = Date.now,
): Authenticator {
  const cache = new Map<string, { principal: Principal; until: number }>();
  /**
   * Verifications under way, by key hash: requests that miss the cache together wait for one
   * call to accounts (at 1,000 requests/s an expired key otherwise sent every request of the
   * call's few milliseconds to accounts at once).
   */
  const verifying = new Map<string, Promise<Principal>>();
  /** Counts revocations: a verification that began before one is not cached (it may be stale). */
  let revocations = 0;
  /** Token buckets of the addresses whose keys were checked lately (UNKNOWN_KEYS_PER_S). */
  const buckets = new Map<string, Bucket>();

  /** `from`'s bucket, refilled for the time since it was last looked at. */
  function bucketOf(from: string): Bucket {
    const now = clock();
    let b = buckets.get(from);
    if (!b) {
      if (buckets.size >= MAX_ADDRESSES) buckets.clear();
      b = { tokens: UNKNOWN_KEYS_BURST, at: now, checking: 0, waiting: [] };
      buckets.set(from, b);
    }
    b.tokens = Math.min(UNKNOWN_KEYS_BURST, b.tokens + ((now - b.at) / 1000) * UNKNOWN_KEYS_PER_S);
    b.at = now;
    return b;
  }

  /** A turn to check a key from `from` with accounts, or 429 while its bucket is empty. */
  async function turn(from: string): Promise<Bucket> {
    for (;;) {
      const b = bucketOf(from);
      if (b.tokens < 1) {
        b.waiting.shift()?.(); // the next in line finds the same, and answers the same
        const seconds = Math.max(1, Math.ceil((1 - b.tokens) / UNKNOWN_KEYS_PER_S));
        const err = apiError('rate_limited', {
          message: `Too many unknown API keys from this address; retry after ${seconds} s.`,
        });
        err.metadata.set('retry-after', String(seconds));
        throw err;
      }
      if (b.checking < Math.floor(b.tokens)) {
        b.checking++;
        return b;
      }
      await new Promise<void>((resolve) => b.waiting.push(resolve));
    }
  }

  /** A check is over; an unknown key takes its token. */
  function done(b: Bucket, unknown: boolean): void {
    b.checking--;
    if (unknown) b.tokens = Math.max(-UNKNOWN_KEYS_BURST, b.tokens - 1);
    b.waiting.shift()?.();
  }

  async function verify(hash: string, key: string): Promise<Principal> {
    const since = revocations;
    let res: accounts.AuthenticateKeyResponse;
    try {
      res = await client.authenticateKey({ key }, { timeoutMs: 10_000 });
    } catch (err) {
      const ce = ConnectError.from(err);
      if (ce.code === Code.Unauthenticated || ce.code === Code.NotFound || ce.code === Code.InvalidArgument) {
        cache.delete(hash);
        throw apiError('api_key_invalid');
      }
      throw err;
    }
    const principal: Principal = {
      accountId: res.accountId,
      livemode: res.livemode,
      secret: res.kind === accounts.KeyKind.SECRET,
      rateLimit: res.rateLimit,
      keyId: res.keyId,
    };
    if (since === revocations) {
      if (cache.size > 100_000) cache.clear();
      cache.set(hash, { principal, until: clock() + ttlMs });
    }
    return principal;
  }

  function verifyOnce(hash: string, key: string): Promise<Principal> {
    let p = verifying.get(hash);
    if (!p) {
      p = verify(hash, key).finally(() => verifying.delete(hash));
      verifying.set(hash, p);
    }
    return p;
  }

  return {
    async authenticate(header, from) {
      if (!header) throw apiError('api_key_missing');
      const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
      if (!m) {
        throw apiError('api_key_invalid', {
          message: 'The Authorization header must be "Bearer <key>".',
        });
      }
      const key = m[1]!;
      if (!KEY_SHAPE.test(key)) throw apiError('api_key_invalid');
      const hash = createHash('sha256').update(key).digest('hex');
      const hit = cache.get(hash);
      const now = clock();
      if (hit && hit.until > now) {
        if (hit.until - now < ttlMs * REFRESH_AHEAD && !verifying.has(hash))
          verifyOnce(hash, key).catch(() => {}); // the entry serves until it expires
        return hit.principal;
      }
      if (from === undefined) return verifyOnce(hash, key);
      const b = await turn(from);
      try {
        const principal = await verifyOnce(hash, key);
        done(b, false);
        return principal;
      } catch (err) {
        // An unknown key takes a token; accounts being down is not the client's doing.
        done(b, err instanceof ConnectError && err.code === Code.Unauthenticated);
        throw err;
      }
    },
    forget(keyId) {
      revocations++;
      for (const [hash, entry] of cache) if (entry.principal.keyId === keyId) cache.delete(hash);
    },
  };
}
