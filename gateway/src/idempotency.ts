// Idempotency-Key (spec 7.4, DESIGN.md): per (account, mode, key), the fingerprint of the first
// request, its state and, once done, its status and body. Same key + same request → the stored
// answer byte for byte; same key + other request → 422; same key while in flight → 409. Only
// successful answers are kept: a failed request did nothing, so its key stays free. A request
// whose gateway died mid-flight leaves an in-flight row; after its lock runs out, a retry takes
// the key over, and the service, which stored the key with what it created, answers with that
// same resource instead of creating another.
import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from 'node:crypto';
import type { Db } from '@mcs/kit/db';
import { and, eq, lt, sql } from 'drizzle-orm';
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

export function createIdempotencyStore(db: Db, lockMs: number): IdempotencyStore {
  const where = (s: Scope) =>
    and(
      eq(idempotencyKeys.accountId, s.accountId),
      eq(idempotencyKeys.livemode, s.livemode),
      eq(idempotencyKeys.keyHash, hashKey(s.key)),
    );

  async function begin(scope: Scope, fp: string, now = new Date()): Promise<Begin> {
    const lockedUntil = new Date(now.getTime() + lockMs);
    const expiredBefore = new Date(now.getTime() - KEY_LIFETIME_MS);
    // One statement: claim a new key, or take over one that expired or whose holder died.
    const claimed = await db
      .insert(idempotencyKeys)
      .values({
        accountId: scope.accountId,
        livemode: scope.livemode,
        keyHash: hashKey(scope.key),
        fingerprint: fp,
        state: 'in_flight',
        lockedUntil,
        createdAt: now,
      })
      .onConflictDoUpdate({
        target: [idempotencyKeys.accountId, idempotencyKeys.livemode, idempotencyKeys.keyHash],
        set: {
          fingerprint: sql`case when ${idempotencyKeys.createdAt} < ${expiredBefore} then excluded.fingerprint else ${idempotencyKeys.fingerprint} end`,
          state: sql`'in_flight'`,
          lockedUntil,
          status: sql`null`,
          body: sql`null`,
          createdAt: sql`case when ${idempotencyKeys.createdAt} < ${expiredBefore} then excluded.created_at else ${idempotencyKeys.createdAt} end`,
        },
        setWhere: sql`${idempotencyKeys.createdAt} < ${expiredBefore}
          or (${idempotencyKeys.state} = 'in_flight' and ${idempotencyKeys.lockedUntil} < ${now} and ${idempotencyKeys.fingerprint} = ${fp})`,
      })
      .returning({ fingerprint: idempotencyKeys.fingerprint });
    if (claimed.length > 0) return { kind: 'proceed' };
    const [row] = await db.select().from(idempotencyKeys).where(where(scope));
    if (!row) return begin(scope, fp, now); // released between our two statements
    if (row.fingerprint !== fp) return { kind: 'mismatch' };
    if (row.state === 'in_flight') return { kind: 'in_use' };
    return { kind: 'replay', status: row.status ?? 200, body: row.body ? open(scope, row.body) : '' };
  }

  return {
    begin,
    async complete(scope, status, body) {
      await db
        .update(idempotencyKeys)
        .set({ state: 'done', status, body: seal(scope, body) })
        .where(where(scope));
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
