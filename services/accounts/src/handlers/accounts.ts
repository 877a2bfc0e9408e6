// AccountService over Connect: decode, call the domain (in a transaction where it writes), encode.
import { create } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { ServiceImpl } from '@connectrpc/connect';
import { apiError } from '@mcs/errors';
import { accounts } from '@mcs/proto';
import type { Deps } from '../deps.ts';
import {
  type Account,
  type ApiKey,
  authenticateKey,
  createAccount,
  createApiKey,
  getAccount,
  listApiKeys,
  revokeApiKey,
} from '../domain/accounts.ts';
import type { KeyKind } from '../domain/keys.ts';
import { authenticateOwner, ownerPasswordStamp, setOwnerPassword } from '../domain/owners.ts';

function toProtoKind(kind: KeyKind): accounts.KeyKind {
  switch (kind) {
    case 'secret':
      return accounts.KeyKind.SECRET;
    case 'publishable':
      return accounts.KeyKind.PUBLISHABLE;
    default: {
      const never: never = kind;
      throw new Error(`unknown key kind ${String(never)}`);
    }
  }
}

function fromProtoKind(kind: accounts.KeyKind): KeyKind {
  switch (kind) {
    case accounts.KeyKind.SECRET:
      return 'secret';
    case accounts.KeyKind.PUBLISHABLE:
      return 'publishable';
    case accounts.KeyKind.UNSPECIFIED:
      throw apiError('missing_required_field', {
        param: 'kind',
        message: 'Missing required parameter: kind.',
      });
    default:
      throw apiError('invalid_value', { param: 'kind', message: 'kind must be secret or publishable.' });
  }
}

export function toProtoAccount(a: Account): accounts.Account {
  return create(accounts.AccountSchema, {
    id: a.id,
    email: a.email,
    name: a.name,
    rateLimit: a.rateLimit,
    createdAt: timestampFromDate(a.createdAt),
  });
}

export function toProtoApiKey(k: ApiKey): accounts.ApiKey {
  return create(accounts.ApiKeySchema, {
    id: k.id,
    kind: toProtoKind(k.kind),
    livemode: k.livemode,
    prefix: k.prefix,
    last4: k.last4,
    createdAt: timestampFromDate(k.createdAt),
    ...(k.revokedAt ? { revokedAt: timestampFromDate(k.revokedAt) } : {}),
    ...(k.lastUsedAt ? { lastUsedAt: timestampFromDate(k.lastUsedAt) } : {}),
  });
}

export function accountHandlers(deps: Deps): ServiceImpl<typeof accounts.AccountService> {
  return {
    async createAccount(req) {
      const made = await deps.db.transaction((tx) =>
        createAccount(tx, {
          email: req.email,
          name: req.name,
          rateLimit: req.rateLimit,
          password: req.password,
        }),
      );
      return create(accounts.CreateAccountResponseSchema, {
        account: toProtoAccount(made.account),
        secretKey: made.secretTest.secret,
        liveSecretKey: made.secretLive.secret,
        publishableKey: made.publishableTest.secret,
        livePublishableKey: made.publishableLive.secret,
      });
    },
    async getAccount(req) {
      return toProtoAccount(await getAccount(deps.db, req.id));
    },
    async authenticateKey(req) {
      const who = await authenticateKey(deps.db, req.key);
      return create(accounts.AuthenticateKeyResponseSchema, {
        accountId: who.accountId,
        livemode: who.livemode,
        kind: toProtoKind(who.kind),
        rateLimit: who.rateLimit,
        keyId: who.keyId,
      });
    },
    async listApiKeys(req) {
      const keys = await listApiKeys(deps.db, req.accountId);
      return create(accounts.ListApiKeysResponseSchema, { data: keys.map(toProtoApiKey) });
    },
    async createApiKey(req) {
      const kind = fromProtoKind(req.kind);
      const issued = await deps.db.transaction((tx) =>
        createApiKey(tx, { accountId: req.accountId, kind, livemode: req.livemode }),
      );
      return create(accounts.CreateApiKeyResponseSchema, {
        key: toProtoApiKey(issued.key),
        secret: issued.secret,
      });
    },
    async setOwnerPassword(req) {
      const account = await setOwnerPassword(deps.db, { accountId: req.accountId, password: req.password });
      // A new password is how an owner locks someone out: sessions signed in with the old one end.
      deps.announcePasswordSet?.(account.id);
      return toProtoAccount(account);
    },
    async authenticateOwner(req) {
      // Not in a transaction: a failed attempt must stay counted although the call fails.
      const who = await authenticateOwner(deps.db, { email: req.email, password: req.password });
      return create(accounts.AuthenticateOwnerResponseSchema, {
        accountId: who.accountId,
        passwordStamp: who.passwordStamp,
      });
    },
    async getOwnerPasswordStamp(req) {
      const stamp = await ownerPasswordStamp(deps.db, req.id);
      return create(accounts.OwnerPasswordStampSchema, { stamp });
    },
    async revokeApiKey(req) {
      const key = await revokeApiKey(deps.db, { accountId: req.accountId, keyId: req.keyId });
      deps.announceRevocation?.(key.id);
      return toProtoApiKey(key);
    },
  };
}
