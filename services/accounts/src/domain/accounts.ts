// Account and API-key rules: validation, creation (an account and its four keys in one
// transaction), authentication by key hash, listing, issuing and revoking keys.
// Speaks its own types; the handler maps them to and from proto. No key text is ever stored,
// returned after creation, or logged: only its hash, prefix and last four characters.
import { apiError } from '@mcs/errors';
import type { Tx } from '@mcs/kit/db';
import { newId } from '@mcs/kit/ids';
import { optionalText } from '@mcs/kit/validate';
import { and, desc, eq, isNull, sql } from 'drizzle-orm';
import { accounts, apiKeys } from '../db/schema.ts';
import { generateKey, hashKey, type KeyKind, parseKey } from './keys.ts';
import { isOwnerEmailTaken } from './owners.ts';
import { checkPasswordRules, hashPassword } from './passwords.ts';

/** An account as it may be shown: without its password hash. */
export type Account = Omit<typeof accounts.$inferSelect, 'passwordHash'>;
/** A key as it may be shown: everything but the hash. */
export type ApiKey = Omit<typeof apiKeys.$inferSelect, 'keyHash' | 'kind'> & { kind: KeyKind };
/** A key just made: the only moment its plain text exists. */
export interface IssuedKey {
  key: ApiKey;
  secret: string;
}

export const PLAN_DEFAULT_RATE_LIMIT = 100;
export const MAX_RATE_LIMIT = 100_000;
const MAX_EMAIL = 254; // RFC 5321 path limit
const MAX_NAME = 200;
// Deliberately simple: one @, no spaces, a dot in the domain. Real proof is a mail that arrives.
const EMAIL = /^[^\s@]+@[^\s@.]+(\.[^\s@.]+)+$/;

export interface CreateAccountInput {
  email?: string | undefined;
  name?: string | undefined;
  /** The owner's dashboard password; empty or absent: none. */
  password?: string | undefined;
  /** Requests per second; 0 or absent: the plan's default. */
  rateLimit?: number | undefined;
}

export function validateAccount(input: CreateAccountInput): {
  email: string;
  name: string;
  rateLimit: number;
} {
  const email = input.email?.trim() ?? '';
  if (email === '')
    throw apiError('missing_required_field', {
      param: 'email',
      message: 'Missing required parameter: email.',
    });
  if (email.length > MAX_EMAIL || !EMAIL.test(email)) {
    throw apiError('invalid_value', { param: 'email', message: 'email must be a valid e-mail address.' });
  }
  const given = optionalText(input.name?.trim(), 'name', MAX_NAME);
  const name = given || email.slice(0, email.indexOf('@'));
  const rate = input.rateLimit ?? 0;
  if (rate !== 0 && (!Number.isSafeInteger(rate) || rate < 1 || rate > MAX_RATE_LIMIT)) {
    throw apiError('invalid_value', {
      param: 'rate_limit',
      message: `rate_limit must be an integer from 1 to ${MAX_RATE_LIMIT}.`,
    });
  }
  return { email, name, rateLimit: rate === 0 ? PLAN_DEFAULT_RATE_LIMIT : rate };
}

const shownAccount = {
  id: accounts.id,
  email: accounts.email,
  name: accounts.name,
  rateLimit: accounts.rateLimit,
  createdAt: accounts.createdAt,
};

const shownKey = {
  id: apiKeys.id,
  accountId: apiKeys.accountId,
  kind: apiKeys.kind,
  livemode: apiKeys.livemode,
  prefix: apiKeys.prefix,
  last4: apiKeys.last4,
  createdAt: apiKeys.createdAt,
  revokedAt: apiKeys.revokedAt,
  lastUsedAt: apiKeys.lastUsedAt,
};

/** A key's last use is written when it is older than this, so busy keys cost no write per call. */
const LAST_USED_GRANULARITY_MS = 60_000;

function keyRow(accountId: string, kind: KeyKind, livemode: boolean, now: Date) {
  const k = generateKey(kind, livemode);
  const row = {
    id: newId('key', now.getTime()),
    accountId,
    kind,
    livemode,
    prefix: k.prefix,
    last4: k.last4,
    keyHash: k.hash,
    createdAt: now,
    revokedAt: null,
    lastUsedAt: null,
  };
  const { keyHash: _, ...key } = row;
  return { row, issued: { key, secret: k.secret } satisfies IssuedKey };
}

export interface CreatedAccount {
  account: Account;
  secretTest: IssuedKey;
  secretLive: IssuedKey;
  publishableTest: IssuedKey;
  publishableLive: IssuedKey;
}

/** Creates the account and its four keys; call inside a transaction so all or none exist. */
export async function createAccount(
  tx: Tx,
  input: CreateAccountInput,
  now = new Date(),
): Promise<CreatedAccount> {
  const v = validateAccount(input);
  const password = input.password ?? '';
  if (password !== '') checkPasswordRules(password);
  const passwordHash = password === '' ? null : await hashPassword(password);
  let account: Account | undefined;
  try {
    [account] = await tx
      .insert(accounts)
      .values({ id: newId('acct', now.getTime()), ...v, passwordHash, createdAt: now })
      .returning(shownAccount);
  } catch (err) {
    if (isOwnerEmailTaken(err)) throw apiError('email_taken', { param: 'email' });
    throw err;
  }
  if (!account) throw new Error('account insert returned no row');
  const made = {
    secretTest: keyRow(account.id, 'secret', false, now),
    secretLive: keyRow(account.id, 'secret', true, now),
    publishableTest: keyRow(account.id, 'publishable', false, now),
    publishableLive: keyRow(account.id, 'publishable', true, now),
  };
  await tx.insert(apiKeys).values(Object.values(made).map((m) => m.row));
  return {
    account,
    secretTest: made.secretTest.issued,
    secretLive: made.secretLive.issued,
    publishableTest: made.publishableTest.issued,
    publishableLive: made.publishableLive.issued,
  };
}

async function findAccount(tx: Tx, id: string, param: string): Promise<Account> {
  if (id === '')
    throw apiError('missing_required_field', { param, message: `Missing required parameter: ${param}.` });
  const [row] = await tx.select(shownAccount).from(accounts).where(eq(accounts.id, id));
  if (!row) throw apiError('resource_missing', { param, message: `No such account: ${id}.` });
  return row;
}

export function getAccount(tx: Tx, id: string): Promise<Account> {
  return findAccount(tx, id, 'id');
}

export interface Authenticated {
  accountId: string;
  keyId: string;
  kind: KeyKind;
  livemode: boolean;
  rateLimit: number;
}

/**
 * Who holds `key`. A malformed, unknown or revoked key gets the same error, so the answer says
 * nothing about which keys exist. The lookup is one indexed equality on the key's hash: the
 * comparison never touches the key's text, so its timing reveals nothing useful about it.
 */
export async function authenticateKey(tx: Tx, key: string): Promise<Authenticated> {
  const shape = parseKey(key);
  if (!shape) throw apiError('api_key_invalid');
  const [row] = await tx
    .select({
      keyId: apiKeys.id,
      accountId: apiKeys.accountId,
      kind: apiKeys.kind,
      livemode: apiKeys.livemode,
      rateLimit: accounts.rateLimit,
      lastUsedAt: apiKeys.lastUsedAt,
    })
    .from(apiKeys)
    .innerJoin(accounts, eq(accounts.id, apiKeys.accountId))
    .where(and(eq(apiKeys.keyHash, hashKey(key)), isNull(apiKeys.revokedAt)));
  // The prefix is part of what was hashed, so a match has the kind and mode the text claims;
  // checking anyway keeps a bad row from ever granting more than its key says.
  if (!row || row.kind !== shape.kind || row.livemode !== shape.livemode) throw apiError('api_key_invalid');
  const now = new Date();
  if (!row.lastUsedAt || now.getTime() - row.lastUsedAt.getTime() > LAST_USED_GRANULARITY_MS) {
    await tx.update(apiKeys).set({ lastUsedAt: now }).where(eq(apiKeys.id, row.keyId));
  }
  const { lastUsedAt: _, ...who } = row;
  return { ...who, kind: shape.kind };
}

/** Every key of the account, revoked ones included, newest first. */
export async function listApiKeys(tx: Tx, accountId: string): Promise<ApiKey[]> {
  await findAccount(tx, accountId, 'account_id');
  const rows = await tx
    .select(shownKey)
    .from(apiKeys)
    .where(eq(apiKeys.accountId, accountId))
    .orderBy(desc(apiKeys.id));
  return rows as ApiKey[];
}

export async function createApiKey(
  tx: Tx,
  input: { accountId: string; kind: KeyKind; livemode: boolean },
  now = new Date(),
): Promise<IssuedKey> {
  await findAccount(tx, input.accountId, 'account_id');
  const { row, issued } = keyRow(input.accountId, input.kind, input.livemode, now);
  await tx.insert(apiKeys).values(row);
  return issued;
}

/** Revokes a key of the account. Revoking it again keeps the first revocation time. */
export async function revokeApiKey(
  tx: Tx,
  input: { accountId: string; keyId: string },
  now = new Date(),
): Promise<ApiKey> {
  await findAccount(tx, input.accountId, 'account_id');
  if (input.keyId === '') {
    throw apiError('missing_required_field', {
      param: 'key_id',
      message: 'Missing required parameter: key_id.',
    });
  }
  const [row] = await tx
    .update(apiKeys)
    .set({ revokedAt: sql`coalesce(${apiKeys.revokedAt}, ${now})` })
    .where(and(eq(apiKeys.id, input.keyId), eq(apiKeys.accountId, input.accountId)))
    .returning(shownKey);
  if (!row)
    throw apiError('resource_missing', { param: 'key_id', message: `No such API key: ${input.keyId}.` });
  return row as ApiKey;
}
