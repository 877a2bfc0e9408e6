// Idempotency-Key (spec 7.4, DESIGN.md): per (account, mode, key), the fingerprint of the first
// request, its state and, once done, its status and body. Same key + same request → the stored
// answer byte for byte; same key + other request → 422; same key while in flight → 409. Only
// successful answers are kept: a failed request did nothing, so its key stays free. A request
// whose gateway died mid-flight leaves an in-flight row; after its lock runs out, a retry takes
// the key over, and the service, which stored the key with what it created, answers with that
// same resource instead of creating another.
import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from 'node:crypto';
import type { Database } from '@mcs/kit/db';
import { and, eq, lt } from 'drizzle-orm';
import { idempotencyKeys } from './db/schema.ts';

export const KEY_LIFETIME_MS = 24 * 3600 * 1000;

export interface Scope {
  accountId: string;
  livemode: boolean;
  key: string;
}

export type Begin =
  | { kind: 'proceed' }
  | { kind: 'replay'; status: number; body: string }
  | { kind: 'in_use' }
  | { kind: 'mismatch' };

/** Canonical JSON: object keys sorted, so formatting and key order do not change the fingerprint. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.keys(value as object)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

export function fingerprint(method: string, path: string, body: unknown): string {
  return createHash('sha256')
    .update(`${method}\n${path}\n${canonical(body)}`)
    .digest('hex');
}

const hashKey = (key: string) => createHash('sha256').update(key, 'utf8').digest('hex');

/** The answer's encryption key: derived from the client's key, which the database never holds. */
function answerKey(s: Scope): Buffer {
  return Buffer.from(hkdfSync('sha256', s.key, `${s.accountId}:${s.livemode}`, 'mcs idempotent answer', 32));
}

function seal(s: Scope, body: string): Uint8Array {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', answerKey(s), iv);
  const data = Buffer.concat([cipher.update(body, 'utf8'), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), data]);
}

function open(s: Scope, sealed: Uint8Array): string {
  const buf = Buffer.from(sealed);
  const decipher = createDecipheriv('aes-256-gcm', answerKey(s), buf.subarray(0, 12));
  decipher.setAuthTag(buf.subarray(12, 28));
  return Buffer.concat([decipher.update(buf.subarray(28)), decipher.final()]).toString('utf8');
}

export interface IdempotencyStore {
  begin(scope: Scope, fp: string, now?: Date): Promise<Begin>;
  complete(scope: Scope, status: number, body: string): Promise<void>;
  release(scope: Scope): Promise<void>;
  /** Removes keys older than 24 hours; returns how many. */
  sweep(now?: Date): Promise<number>;
}

export function createIdempotencyStore(
  { db, pool }: Pick<Database, 'db' | 'pool'>,
  lockMs: number,
): IdempotencyStore {
  const where = (s: Scope) =>
    and(
      eq(idempotencyKeys.accountId, s.accountId),
      eq(idempotencyKeys.livemode, s.livemode),
      eq(idempotencyKeys.keyHash, hashKey(s.key)),
    );

  async function begin(scope: Scope, fp: string, now = new Date()): Promise<Begin> {
    const lockedUntil = new Date(now.getTime() + lockMs);
    const expiredBefore = new Date(now.getTime() - KEY_LIFETIME_MS);
    // One prepared statement on the hot path: claim a new key, or take over one that expired or
    // whose holder died (same request, lock run out).
    const claimed = await pool.query({
      name: 'idempotency_begin',
      text: `insert into gateway.idempotency_keys as k
               (account_id, livemode, key_hash, fingerprint, state, locked_until, created_at)
             values ($1, $2, $3, $4, 'in_flight', $5, $6)
             on conflict (account_id, livemode, key_hash) do update set
               fingerprint = case when k.created_at < $7 then excluded.fingerprint else k.fingerprint end,
               state = 'in_flight', locked_until = $5, status = null, body = null,
               created_at = case when k.created_at < $7 then excluded.created_at else k.created_at end
             where k.created_at < $7 or (k.state = 'in_flight' and k.locked_until < $6 and k.fingerprint = $4)
             returning 1`,
      values: [scope.accountId, scope.livemode, hashKey(scope.key), fp, lockedUntil, now, expiredBefore],
    });
    if (claimed.rowCount === 1) return { kind: 'proceed' };
    const [row] = await db.select().from(idempotencyKeys).where(where(scope));
    if (!row) return begin(scope, fp, now); // released between our two statements
    if (row.fingerprint !== fp) return { kind: 'mismatch' };
    if (row.state === 'in_flight') return { kind: 'in_use' };
    return { kind: 'replay', status: row.status ?? 200, body: row.body ? open(scope, row.body) : '' };
  }

  return {
    begin,
    async complete(scope, status, body) {
      await pool.query({
        name: 'idempotency_complete',
        text: `update gateway.idempotency_keys set state = 'done', status = $4, body = $5
                where account_id = $1 and livemode = $2 and key_hash = $3`,
        values: [scope.accountId, scope.livemode, hashKey(scope.key), status, Buffer.from(seal(scope, body))],
      });
    },
    async release(scope) {
      await db.delete(idempotencyKeys).where(and(where(scope), eq(idempotencyKeys.state, 'in_flight')));
    },
    async sweep(now = new Date()) {
      const gone = await db
        .delete(idempotencyKeys)
        .where(lt(idempotencyKeys.createdAt, new Date(now.getTime() - KEY_LIFETIME_MS)))
        .returning({ key: idempotencyKeys.keyHash });
      return gone.length;
    },
  };
}
