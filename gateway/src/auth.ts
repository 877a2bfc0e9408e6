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
  authenticate(header: string | undefined): Promise<Principal>;
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
    async authenticate(header) {
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
      return verifyOnce(hash, key);
    },
    forget(keyId) {
      revocations++;
      for (const [hash, entry] of cache) if (entry.principal.keyId === keyId) cache.delete(hash);
    },
  };
}
