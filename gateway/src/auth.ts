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

export function createAuthenticator(
  client: Client<typeof accounts.AccountService>,
  ttlMs: number,
): Authenticator {
  const cache = new Map<string, { principal: Principal; until: number }>();

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
      if (hit && hit.until > Date.now()) return hit.principal;
      let res: accounts.AuthenticateKeyResponse;
      try {
        res = await client.authenticateKey({ key }, { timeoutMs: 10_000 });
      } catch (err) {
        const ce = ConnectError.from(err);
        if (
          ce.code === Code.Unauthenticated ||
          ce.code === Code.NotFound ||
          ce.code === Code.InvalidArgument
        ) {
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
      if (cache.size > 100_000) cache.clear();
      cache.set(hash, { principal, until: Date.now() + ttlMs });
      return principal;
    },
    forget(keyId) {
      for (const [hash, entry] of cache) if (entry.principal.keyId === keyId) cache.delete(hash);
    },
  };
}
