// Idempotency-Key where the resource is written (docs/design.md "Idempotency"). The services keep
// one table, `idempotency.keys`: per (account, mode, key hash) the fingerprint of the first
// request (method, path, body) and its answer (the RPC's response message, sealed when it holds
// a secret). The row commits in the same statement or transaction as the write it answers for,
// so a retry after any crash either finds the answer or finds nothing written at all; there is
// no "in flight" state to recover. One table, not one per service: a key is the account's, so a
// key first used on an order and then on a conversation is another request (422).
//
//   same key, same request   → the stored answer, decoded into the same message, so the
//                               gateway renders the same bytes; response header
//                               `mcs-idempotent-replayed: true` (and when the key
//                               expires, `mcs-idempotency-expires`)
//   same key, other request  → idempotency_key_reused (422)
//   concurrent same key      → the second waits on the key's unique index until the first
//                               commits, then replays it (the gateway answers 409 itself when
//                               both reach the same gateway)
//   key older than 24 hours  → forgotten: the next request with it is a new operation
//
// The database holds only SHA-256 of the key. An answer that holds a secret (a field marked
// `(mcs.api.v1.field).secret`: a webhook endpoint's signing secret) is sealed (AES-256-GCM) with a
// key derived from the client's key, which the database never holds, so a database dump does
// not reveal it. Every other answer (an order, a message) is stored as it is: its content is in
// the resource's own rows anyway, and sealing it cost a twentieth of the commerce service's CPU
// per keyed order (a cipher, a key object and a second SHA-256 each).
import {
  createCipheriv,
  createDecipheriv,
  createHash,
  createHmac,
  createSecretKey,
  hash,
  type KeyObject,
} from 'node:crypto';
import { type DescMessage, fromBinary, type Message } from '@bufbuild/protobuf';
import { ConnectError, type HandlerContext } from '@connectrpc/connect';
import { apiError } from '@mcs/errors';
import { fieldFlags } from '@mcs/rest';
import { sql } from 'drizzle-orm';
import { boolean, index, type PgSchema, pgSchema, primaryKey, text, timestamp } from 'drizzle-orm/pg-core';
import { CALLER_HEADERS, type Caller, type IdempotencyClaim } from './caller.ts';
import { bytea, type Db, deleteInSlices, isRetryableConflict, type Tx } from './db.ts';
import { encodeAnswer } from './encoded.ts';
import type { Logger } from './log.ts';
import { transaction } from './outbox.ts';
import { pooledRandomBytes } from './random.ts';

/** Idempotency keys live 24 hours (spec 7.4). */
export const IDEMPOTENCY_WINDOW_MS = 24 * 3600 * 1000;

/**
 * An idempotency table: `idempotency.keys` (idempotencyKeys below) in the services, another in
 * a test's own schema.
 */
export function idempotencyTable(schema: PgSchema, name = 'idempotency_keys') {
  return schema.table(
    name,
    {
      accountId: text('account_id').notNull(),
      livemode: boolean('livemode').notNull(),
      keyHash: text('key_hash').notNull(),
      fingerprint: text('fingerprint').notNull(),
      /** The RPC's response message (protobuf binary); when `sealed`, iv (12) | tag (16) | ciphertext. */
      response: bytea('response').notNull(),
      /** The answer holds a secret (see holdsSecret) and `response` is sealed. */
      sealed: boolean('sealed').notNull().default(true),
      createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull(),
    },
    (t) => [
      primaryKey({ columns: [t.accountId, t.livemode, t.keyHash] }),
      // The janitor deletes expired keys through this index.
      index(`${schema.schemaName}_${name}_created_idx`).on(t.createdAt),
    ],
  );
}
export type IdempotencyTable = ReturnType<typeof idempotencyTable>;

/**
 * The services' keys, one table for all: a key is the account's in one mode, whichever service
 * owns the route it first came with, so the same key on an order and then on a conversation is
 * 422, not a second resource (spec 7.4). Each service writes it in the statement or transaction
 * of its write, as before; the table is kit's, created by each service's migration if missing
 * (migrations run one at a time under an advisory lock, kit/db migrateSchema).
 */
export const idempotencySchema = pgSchema('idempotency');
export const idempotencyKeys = idempotencyTable(idempotencySchema, 'keys');

const secretCache = new WeakMap<DescMessage, boolean>();

/**
 * Whether a message of this type can hold a secret: a field marked `(mcs.api.v1.field).secret`,
 * in it or in any message it can contain. Its idempotent answers are then stored sealed.
 */
export function holdsSecret(desc: DescMessage): boolean {
  let known = secretCache.get(desc);
  if (known === undefined) {
    known = reachesSecret(desc, new Set());
    secretCache.set(desc, known);
  }
  return known;
}

/**
 * A search of every message type reachable from `desc`. Only the answer for the type it started
 * from is kept: a type met again inside a cycle is skipped, so what the search says about it
 * there may be incomplete.
 */
function reachesSecret(desc: DescMessage, seen: Set<DescMessage>): boolean {
  if (seen.has(desc)) return false;
  seen.add(desc);
  for (const field of desc.fields) {
    if (fieldFlags(field).secret) return true;
    const inner =
      field.fieldKind === 'message'
        ? field.message
        : field.fieldKind === 'list' || field.fieldKind === 'map'
          ? field.message
          : undefined;
    if (inner !== undefined && reachesSecret(inner, seen)) return true;
  }
  return false;
}

/** A keyed write's claim with what is derived from the key, computed once per call. */
class Keyed {
  readonly caller: Caller;
  readonly claim: IdempotencyClaim;
  readonly hash: string;
  private sealKey: KeyObject | undefined;
  private pepperedKey: KeyObject | undefined;
  constructor(caller: Caller, claim: IdempotencyClaim) {
    this.caller = caller;
    this.claim = claim;
    this.hash = hash('sha256', claim.key, 'hex');
  }
  /**
   * The seal key: from the client's key and, given one, the service's own secret (`pepper`), so
   * a database dump and a guessed Idempotency-Key (they are often simple) cannot open an answer.
   * One HMAC-SHA256 (or SHA-256 without a pepper) with domain separation: as strong as HKDF for
   * this at a fifth of the cost on the hot path. Handed to the cipher as a key object: given a
   * Buffer, Node's key-object check costs 14 µs a seal instead of 5.
   */
  private key(pepper: KeyObject | undefined): KeyObject {
    const label = `mcs idempotent answer\n${this.caller.accountId}\n${this.caller.livemode}\n${this.claim.key}`;
    if (pepper) {
      this.pepperedKey ??= createSecretKey(createHmac('sha256', pepper).update(label).digest());
      return this.pepperedKey;
    }
    this.sealKey ??= createSecretKey(createHash('sha256').update(label).digest());
    return this.sealKey;
  }
  seal(plain: Uint8Array, pepper?: KeyObject): Buffer {
    const iv = Buffer.from(pooledRandomBytes(12));
    const cipher = createCipheriv('aes-256-gcm', this.key(pepper), iv);
    const data = Buffer.concat([cipher.update(plain), cipher.final()]);
    return Buffer.concat([iv, cipher.getAuthTag(), data]);
  }
  /**
   * Opens an answer sealed with `pepper`, or, failing that, one sealed without it: answers stored
   * before the service had a pepper, which live out their 24 hours.
   */
  open(sealed: Uint8Array, pepper?: KeyObject): Uint8Array {
    const buf = Buffer.from(sealed.buffer, sealed.byteOffset, sealed.byteLength);
    const attempt = (key: KeyObject) => {
      const decipher = createDecipheriv('aes-256-gcm', key, buf.subarray(0, 12));
      decipher.setAuthTag(buf.subarray(12, 28));
      return Buffer.concat([decipher.update(buf.subarray(28)), decipher.final()]);
    };
    if (!pepper) return attempt(this.key(undefined));
    try {
      return attempt(this.key(pepper));
    } catch {
      return attempt(this.key(undefined));
    }
  }
}

/**
 * The claim's Keyed, kept on the claim itself (a per-call object). Not in a WeakMap keyed by
 * claims: the map's table is long-lived and, rehashed as calls come and go, its discarded tables
 * kept claims, callers and their Keyed alive through young-generation collections (in commerce
 * they survived at 92-150 % of their allocation under heap sampling).
 */
const KEYED = Symbol('keyed');
type ClaimWithKeyed = IdempotencyClaim & { [KEYED]?: Keyed };

/** What a keyed call derives from its key, once per call: for insert-once.ts. */
export interface KeyedCall {
  readonly claim: IdempotencyClaim;
  /** SHA-256 of the key, hex: what the database holds. */
  readonly hash: string;
  /** An answer sealed with a key derived from the client's key (and the service's pepper, if any). */
  seal(plain: Uint8Array, pepper?: KeyObject): Buffer;
}

/** The caller's keyed call, or undefined without an Idempotency-Key. */
export function keyedOf(caller: Caller): KeyedCall | undefined {
  return keyed(caller);
}

function keyed(caller: Caller): Keyed | undefined {
  const claim = caller.idempotency as ClaimWithKeyed | undefined;
  if (!claim) return undefined;
  claim[KEYED] ??= new Keyed(caller, claim);
  return claim[KEYED];
}

/** A stored answer: its request's fingerprint and the response, sealed or not. */
export interface StoredAnswer {
  fingerprint: string;
  response: Uint8Array;
  sealed: boolean;
  /** When the key was stored (ms since the epoch): it expires IDEMPOTENCY_WINDOW_MS later. */
  createdMs: number;
}

/**
 * The key is taken: another request with it committed first. Carries its answer when the
 * statement that found the key could already read it.
 */
export class KeyTaken extends Error {
  readonly existing: StoredAnswer | undefined;
  constructor(existing?: StoredAnswer) {
    super('idempotency key taken');
    this.existing = existing;
  }
}

export interface KeyStore {
  table: IdempotencyTable;
  /** The service's secret in every seal key (createKeyStore `sealSecret`), if it has one. */
  pepper: KeyObject | undefined;
  /** The live answer stored under the caller's key, if any. */
  lookup(caller: Caller, now?: Date): Promise<StoredAnswer | undefined>;
  /**
   * In the write's own transaction: stores `response` under the caller's key (a no-op without
   * a key), sealed unless `sealed` is false. Throws KeyTaken when another request committed the
   * key first; the caller's transaction must then roll back.
   */
  record(tx: Tx, caller: Caller, response: Uint8Array, now?: Date, sealed?: boolean): Promise<void>;
  /** Deletes keys older than 24 hours; returns how many. */
  sweep(now?: Date): Promise<number>;
}

const tableSql = (t: IdempotencyTable) => sql`${t}`;

/**
 * A key's `created_at` as milliseconds since the epoch, in text: the same through drizzle (which
 * leaves timestamps as text) and through pg's own parsers (insert-once.ts reads it raw).
 */
export const CREATED_MS_SQL = (column: string) => `(extract(epoch from ${column}) * 1000)::bigint::text`;
const CREATED_MS = sql.raw(CREATED_MS_SQL('created_at'));

/**
 * The key store of a service. `sealSecret`: a secret of the service's own (the webhooks service
 * derives one from WEBHOOK_SECRETS_KEY) that every seal key depends on, besides the client's key.
 */
export function createKeyStore(
  db: Db,
  table: IdempotencyTable,
  opts: { sealSecret?: Uint8Array } = {},
): KeyStore {
  const t = tableSql(table);
  const pepper = opts.sealSecret ? createSecretKey(Buffer.from(opts.sealSecret)) : undefined;
  return {
    table,
    pepper,
    async lookup(caller, now = new Date()) {
      const k = keyedOf(caller);
      if (!k) return undefined;
      const { rows } = await db.execute<{
        fingerprint: string;
        response: Buffer;
        sealed: boolean;
        created_ms: string;
      }>(sql`
        select fingerprint, response, sealed, ${CREATED_MS} as created_ms from ${t}
         where account_id = ${caller.accountId} and livemode = ${caller.livemode} and key_hash = ${k.hash}
           and created_at >= ${new Date(now.getTime() - IDEMPOTENCY_WINDOW_MS)}`);
      const row = rows[0];
      return (
        row && {
          fingerprint: row.fingerprint,
          response: row.response,
          sealed: row.sealed,
          createdMs: Number(row.created_ms),
        }
      );
    },
    async record(tx, caller, response, now = new Date(), sealed = true) {
      const k = keyedOf(caller);
      if (!k) return;
      const stored = sealed ? k.seal(response, pepper) : response;
      const { rows } = await tx.execute(sql`
        insert into ${t} as k (account_id, livemode, key_hash, fingerprint, response, sealed, created_at)
        values (${caller.accountId}, ${caller.livemode}, ${k.hash}, ${k.claim.fingerprint}, ${stored}, ${sealed}, ${now})
        on conflict (account_id, livemode, key_hash) do update
          set fingerprint = excluded.fingerprint, response = excluded.response, sealed = excluded.sealed,
              created_at = excluded.created_at
          where k.created_at < ${new Date(now.getTime() - IDEMPOTENCY_WINDOW_MS)}
        returning 1`);
      if (rows.length === 0) throw new KeyTaken();
    },
    sweep(now = new Date()) {
      return deleteInSlices(db, table, sql`created_at < ${new Date(now.getTime() - IDEMPOTENCY_WINDOW_MS)}`);
    },
  };
}

/** Deletes expired keys every `everyMs` (and once at start). */
export function startKeyJanitor(keys: KeyStore, log: Logger, everyMs = 60_000): { stop(): void } {
  const run = () =>
    void keys.sweep().then(
      (n) => n > 0 && log.info({ removed: n }, 'expired idempotency keys removed'),
      (err) => log.warn({ err: (err as Error).message }, 'idempotency key janitor failed'),
    );
  run();
  const timer = setInterval(run, everyMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}

/**
 * Runs a write once per idempotency key and answers it; without a key it just runs `run`.
 *
 * `run` must store its answer under the key in the same transaction or statement as its
 * effects (KeyStore.record, or insert-once.ts insertOnce with `key`), and throw KeyTaken when the key was
 * taken. With `lookupFirst` a stored answer is looked up before `run` (writes that read and
 * update; one extra round trip); without it, `run` itself finds out (one-statement creates).
 *
 * A catalog error from `run` is answered with the stored answer when the key has one: a retry
 * must answer the first outcome even when the world has changed since (the order got paid,
 * the product archived) and the write would now be refused.
 */
export async function answerOnce<T extends Message>(
  keys: KeyStore,
  ctx: HandlerContext,
  caller: Caller,
  run: () => Promise<T>,
  opts: { lookupFirst: boolean },
): Promise<T> {
  const k = keyed(caller);
  if (!k) return run();
  const replay = (stored: StoredAnswer): T => {
    if (stored.fingerprint !== k.claim.fingerprint) throw apiError('idempotency_key_reused');
    ctx.responseHeader.set(CALLER_HEADERS.idempotentReplayed, 'true');
    ctx.responseHeader.set(
      CALLER_HEADERS.idempotencyExpires,
      String(stored.createdMs + IDEMPOTENCY_WINDOW_MS),
    );
    return fromBinary(
      ctx.method.output,
      stored.sealed ? k.open(stored.response, keys.pepper) : stored.response,
    ) as T;
  };
  if (opts.lookupFirst) {
    const stored = await keys.lookup(caller);
    if (stored) return replay(stored);
  }
  try {
    return await run();
  } catch (err) {
    if (err instanceof KeyTaken || err instanceof ConnectError) {
      const stored = (err instanceof KeyTaken && err.existing) || (await keys.lookup(caller));
      if (stored) return replay(stored);
      // Taken, then gone (expired or swept in between): the client may simply retry.
      if (err instanceof KeyTaken) throw apiError('idempotency_key_in_use');
    }
    throw err;
  }
}

/** The response bytes of a handler's answer, as KeyStore.record and insertOnce store them. */
export function answerBytes(ctx: HandlerContext, message: Message): Uint8Array {
  return encodeAnswer(ctx.method.output, message);
}

/**
 * A write in one transaction, once per idempotency key: `fn`'s effects, its answer and the key
 * commit together. The helper every non-create write handler goes through. A transaction that
 * PostgreSQL picks as a deadlock victim (two writers locking the same rows in opposite orders,
 * e.g. a manual retry and the delivery engine recording an attempt) rolled back whole and runs
 * again, up to three times, instead of answering 500.
 */
export function writeKeyed<T extends Message>(
  db: Db,
  keys: KeyStore,
  ctx: HandlerContext,
  caller: Caller,
  fn: (tx: Tx) => Promise<T>,
): Promise<T> {
  const once = () =>
    transaction(db, async (tx) => {
      const answer = await fn(tx);
      await keys.record(tx, caller, answerBytes(ctx, answer), undefined, holdsSecret(ctx.method.output));
      return answer;
    });
  return answerOnce(
    keys,
    ctx,
    caller,
    async () => {
      for (let attempt = 1; ; attempt++) {
        try {
          return await once();
        } catch (err) {
          if (attempt >= 3 || !isRetryableConflict(err)) throw err;
        }
      }
    },
    { lookupFirst: true },
  );
}
