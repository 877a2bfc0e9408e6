// Idempotency keys where the resource is written, against the real PostgreSQL of the machine:
// one statement claims the key and writes row + event, a reused key writes nothing and replays
// the stored answer (sealed when it holds a secret), another request with the key is refused, keys expire after 24 hours, and a
// transactional write stores its answer with its effects or not at all.
import { randomBytes } from 'node:crypto';
import { create, type DescMessage, fromBinary, toBinary } from '@bufbuild/protobuf';
import { createHandlerContext } from '@connectrpc/connect';
import * as generated from '@mcs/proto';
import { accounts, api, commerce, events, messaging, webhooks } from '@mcs/proto';
import { fieldFlags } from '@mcs/rest';
import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/node-postgres';
import { pgSchema, text, timestamp } from 'drizzle-orm/pg-core';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CALLER_HEADERS, type Caller } from './caller.ts';
import { DEFAULT_DATABASE_URL } from './config.ts';
import { createDatabase, type Database } from './db.ts';
import {
  answerBytes,
  answerOnce,
  createKeyStore,
  holdsSecret,
  IDEMPOTENCY_WINDOW_MS,
  idempotencyTable,
  type KeyStore,
  KeyTaken,
  writeKeyed,
} from './idempotency.ts';
import { insertOnce } from './insert-once.ts';
import { type NewEvent, outboxTable } from './outbox.ts';

const schema = pgSchema('idem_test');
const keysTable = idempotencyTable(schema);
const outbox = outboxTable(schema);
const things = schema.table('things', {
  id: text('id').primaryKey(),
  accountId: text('account_id').notNull(),
  name: text('name').notNull(),
  createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull(),
});
type Thing = typeof things.$inferSelect;

const serverUrl = process.env.DATABASE_URL ?? DEFAULT_DATABASE_URL;
const dbName = `mcs_test_${randomBytes(8).toString('hex')}`;
let database: Database;
let keys: KeyStore;

async function onMaintenance(query: string) {
  const u = new URL(serverUrl);
  u.pathname = '/postgres';
  const c = new pg.Client({ connectionString: u.toString() });
  await c.connect();
  try {
    await c.query(query);
  } finally {
    await c.end();
  }
}

beforeAll(async () => {
  await onMaintenance(`create database ${dbName}`);
  const u = new URL(serverUrl);
  u.pathname = `/${dbName}`;
  database = createDatabase(u.toString(), { name: 'idem-test', max: 4 });
  await database.pool.query(`
    create schema idem_test;
    create table idem_test.idempotency_keys (
      account_id text not null, livemode boolean not null, key_hash text not null,
      fingerprint text not null, response bytea not null, sealed boolean not null default true,
      created_at timestamptz not null,
      primary key (account_id, livemode, key_hash));
    create table idem_test.outbox (seq bigserial primary key, event_id text not null unique,
      type text not null, payload bytea not null, resource_version integer,
      created_at timestamptz not null default now());
    create table idem_test.things (id text primary key, account_id text not null, name text not null,
      created_at timestamptz not null);`);
  keys = createKeyStore(database.db, keysTable);
});
afterAll(async () => {
  await database?.close();
  await onMaintenance(`drop database if exists ${dbName} with (force)`);
});

let n = 0;
const keyed = (key = `k${++n}`, fingerprint = 'fp-1'): Caller => ({
  accountId: 'acct_1',
  livemode: false,
  idempotency: { key, fingerprint },
});
const thing = (name: string, at = new Date()): Thing => ({
  id: `thing_${++n}`,
  accountId: 'acct_1',
  name,
  createdAt: at,
});
// Any message will do as an answer; an Order is what CreateOrder answers.
const answerOf = (t: Thing) => toBinary(commerce.OrderSchema, create(commerce.OrderSchema, { id: t.id }));
const eventOf = (t: Thing): NewEvent => ({
  type: events.EventType.ORDER_CREATED,
  accountId: t.accountId,
  livemode: false,
  data: { case: 'order', value: create(commerce.OrderSchema, { id: t.id }) },
});
const count = async (table: 'things' | 'outbox' | 'idempotency_keys') =>
  Number((await database.pool.query(`select count(*) from idem_test.${table}`)).rows[0].count);

/** A handler context of OrderService/CreateOrder (or another method), as connect-node makes one. */
function handlerContext(
  service: typeof commerce.OrderService | typeof webhooks.WebhookEndpointService = commerce.OrderService,
  method: (typeof service.methods)[number] = commerce.OrderService.method.createOrder,
) {
  return createHandlerContext({
    service,
    method,
    protocolName: 'connect',
    requestMethod: 'POST',
    url: `/${service.typeName}/${method.name}`,
  });
}

/** The stored row of a caller's key. */
const storedRow = async (c: Caller) =>
  (
    await database.pool.query<{ response: Buffer; sealed: boolean }>(
      `select response, sealed from idem_test.idempotency_keys
        where account_id = $1 and livemode = $2 and key_hash = encode(sha256($3::bytea), 'hex')`,
      [c.accountId, c.livemode, c.idempotency!.key],
    )
  ).rows[0];

describe('insertOnce', () => {
  it('claims the key and writes row and event in one statement; a reused key writes nothing', async () => {
    const caller = keyed();
    const sent: string[] = [];
    const counting = drizzle(database.pool, { logger: { logQuery: (q) => void sent.push(q) } });
    const before = { things: await count('things'), outbox: await count('outbox') };
    const first = thing('a');
    const { event } = await insertOnce(counting, things, first, {
      event: { outbox, of: eventOf },
      key: { keys, caller, answer: answerOf },
    });
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatch(/^\s*with k as \(\s*insert into "idem_test"."idempotency_keys"/);
    expect(event?.type).toBe('order.created');
    expect(await count('things')).toBe(before.things + 1);
    expect(await count('outbox')).toBe(before.outbox + 1);

    sent.length = 0;
    const err = await insertOnce(counting, things, thing('b'), {
      event: { outbox, of: eventOf },
      key: { keys, caller, answer: answerOf },
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KeyTaken);
    // The statement that wrote nothing also read the earlier answer: one round trip in all.
    expect(sent).toHaveLength(1);
    expect((err as KeyTaken).existing?.fingerprint).toBe('fp-1');
    expect(await count('things')).toBe(before.things + 1);
    expect(await count('outbox')).toBe(before.outbox + 1);
  });

  it('keeps keys per account and mode, and only their hash; the answer is sealed', async () => {
    const key = `secret-key-${randomBytes(4).toString('hex')}`;
    const t = thing('sealed');
    await insertOnce(database.db, things, t, { key: { keys, caller: keyed(key), answer: answerOf } });
    await insertOnce(database.db, things, thing('other account'), {
      key: { keys, caller: { ...keyed(key), accountId: 'acct_2' }, answer: answerOf },
    });
    await insertOnce(database.db, things, thing('live'), {
      key: { keys, caller: { ...keyed(key), livemode: true }, answer: answerOf },
    });
    const { rows } = await database.pool.query(
      `select key_hash, response from idem_test.idempotency_keys where key_hash = encode(sha256($1::bytea), 'hex')`,
      [key],
    );
    expect(rows).toHaveLength(3);
    const dump = JSON.stringify(
      (await database.pool.query('select * from idem_test.idempotency_keys')).rows.map((r) => ({
        ...r,
        response: Buffer.from(r.response).toString('latin1'),
      })),
    );
    expect(dump).not.toContain(key);
    expect(dump).not.toContain(t.id);
  });

  it('stores an answer without secrets as it is, and replays it from the pool', async () => {
    const caller = keyed();
    const t = thing('plain');
    await insertOnce(database.db, things, t, { key: { keys, caller, answer: answerOf, sealed: false } });
    const row = await storedRow(caller);
    expect(row?.sealed).toBe(false);
    expect(new Uint8Array(row!.response)).toEqual(answerOf(t));
    const err = await insertOnce(database.db, things, thing('again'), {
      key: { keys, caller, answer: answerOf, sealed: false },
    }).catch((e: unknown) => e);
    expect((err as KeyTaken).existing?.sealed).toBe(false);
    const replayed = await answerOnce(
      keys,
      handlerContext(),
      caller,
      (): Promise<commerce.Order> => Promise.reject(err),
      { lookupFirst: false },
    );
    expect(replayed.id).toBe(t.id);
  });

  it('lets exactly one of many concurrent requests with one key write', async () => {
    const caller = keyed();
    const before = await count('things');
    const results = await Promise.allSettled(
      Array.from({ length: 8 }, (_, i) =>
        insertOnce(database.db, things, thing(`race ${i}`), { key: { keys, caller, answer: answerOf } }),
      ),
    );
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    const refused = results.filter((r) => r.status === 'rejected');
    expect(refused.every((r) => (r as PromiseRejectedResult).reason instanceof KeyTaken)).toBe(true);
    expect(await count('things')).toBe(before + 1);
  });

  it('takes over a key older than 24 hours', async () => {
    const caller = keyed();
    const long = new Date(Date.now() - IDEMPOTENCY_WINDOW_MS - 60_000);
    await insertOnce(database.db, things, thing('old', long), {
      key: { keys, caller, answer: answerOf },
      now: long,
    });
    expect(await keys.lookup(caller)).toBeUndefined();
    await insertOnce(database.db, things, thing('new'), { key: { keys, caller, answer: answerOf } });
    expect(await keys.lookup(caller)).toBeDefined();
  });
});

describe('insertOnce on the pool: group commit', () => {
  const counting = (sent: string[], pool = database.pool) =>
    drizzle(pool, { logger: { logQuery: (q) => void sent.push(q) } });
  const create = (db: ReturnType<typeof counting>, t: Thing, caller?: Caller) =>
    insertOnce(db, things, t, {
      event: { outbox, of: eventOf },
      ...(caller ? { key: { keys, caller, answer: answerOf } } : {}),
    });
  const stored = async (ids: string[]) =>
    Number(
      (await database.pool.query('select count(*) from idem_test.things where id = any($1)', [ids])).rows[0]
        .count,
    );

  it('sends the creates of one turn as ONE statement, each with its own row, key and event', async () => {
    const sent: string[] = [];
    const db = counting(sent);
    const made = Array.from({ length: 10 }, (_, i) => thing(`turn ${i}`));
    const callers = made.map(() => keyed());
    const results = await Promise.all(made.map((t, i) => create(db, t, callers[i])));
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatch(/unnest\(/);
    expect(await stored(made.map((t) => t.id))).toBe(10);
    const eventIds = results.map((r) => r.event?.id);
    expect(new Set(eventIds).size).toBe(10);
    const { rows } = await database.pool.query(
      'select event_id from idem_test.outbox where event_id = any($1)',
      [eventIds],
    );
    expect(rows).toHaveLength(10);
    for (const c of callers) expect((await keys.lookup(c))?.fingerprint).toBe('fp-1');

    // The same keys again, in one turn: nothing is written, and each create learns its key was taken.
    sent.length = 0;
    const before = { things: await count('things'), outbox: await count('outbox') };
    const again = await Promise.allSettled(callers.map((c, i) => create(db, thing(`again ${i}`), c)));
    expect(sent).toHaveLength(1);
    expect(again.every((r) => r.status === 'rejected' && r.reason instanceof KeyTaken)).toBe(true);
    expect({ things: await count('things'), outbox: await count('outbox') }).toEqual(before);
  });

  it('sends creates without a key as one statement too', async () => {
    const sent: string[] = [];
    const db = counting(sent);
    const made = Array.from({ length: 6 }, (_, i) => thing(`no key ${i}`));
    const before = await count('outbox');
    await Promise.all(made.map((t) => create(db, t)));
    expect(sent).toHaveLength(1);
    expect(await stored(made.map((t) => t.id))).toBe(6);
    expect(await count('outbox')).toBe(before + 6);
  });

  it('sends a create whose key is in flight after that statement: it finds the key taken', async () => {
    const sent: string[] = [];
    const db = counting(sent);
    const caller = keyed();
    const made = [thing('first'), thing('second'), thing('bystander')];
    const results = await Promise.allSettled([
      create(db, made[0]!, caller),
      create(db, made[1]!, caller),
      create(db, made[2]!, keyed()),
    ]);
    expect(sent).toHaveLength(2);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    // It waited for the first statement, so its own statement read the first one's answer.
    expect((results[1] as PromiseRejectedResult).reason).toBeInstanceOf(KeyTaken);
    expect(((results[1] as PromiseRejectedResult).reason as KeyTaken).existing?.fingerprint).toBe('fp-1');
    expect(await stored(made.map((t) => t.id))).toBe(2);
    expect(await stored([made[1]!.id])).toBe(0);
  });

  it('answers each create alone when PostgreSQL refuses the batch: a bad create fails alone', async () => {
    const sent: string[] = [];
    const db = counting(sent);
    const taken = thing('taken');
    await create(db, taken);
    sent.length = 0;
    const good = [thing('good 1'), thing('good 2')];
    const results = await Promise.allSettled([
      create(db, good[0]!, keyed()),
      create(db, { ...thing('duplicate id'), id: taken.id }, keyed()),
      create(db, good[1]!, keyed()),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(((results[1] as PromiseRejectedResult).reason as { code?: string }).code).toBe('23505');
    expect(await stored(good.map((t) => t.id))).toBe(2);
    // The batch, then one statement per create.
    expect(sent).toHaveLength(4);
  });

  it('lets two replicas batch the same keys in opposite orders without a deadlock', async () => {
    // Two pools stand for two replicas: each sends its turn as one statement at the same time.
    const other = new pg.Pool({
      connectionString: (database.pool.options as { connectionString: string }).connectionString,
      max: 2,
    });
    try {
      await other.query('select 1'); // connected, so both statements start together
      // Ten rounds: the two statements overlap in some of them, and unsorted keys then deadlock.
      for (let round = 0; round < 10; round++) {
        const sentA: string[] = [];
        const sentB: string[] = [];
        const a = counting(sentA);
        const b = counting(sentB, other);
        const callers = Array.from({ length: 60 }, () => keyed());
        const results = await Promise.allSettled([
          ...callers.map((c, i) => create(a, thing(`a ${i}`), c)),
          ...[...callers].reverse().map((c, i) => create(b, thing(`b ${i}`), c)),
        ]);
        // A deadlock would have failed a batch, and its creates would have run again one by one.
        expect(sentA).toHaveLength(1);
        expect(sentB).toHaveLength(1);
        expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(60);
        expect(
          results
            .filter((r) => r.status === 'rejected')
            .every((r) => (r as PromiseRejectedResult).reason instanceof KeyTaken),
        ).toBe(true);
      }
    } finally {
      await other.end();
    }
  });
});

describe('answerOnce', () => {
  const order = (id: string) => create(commerce.OrderSchema, { id });

  it('replays the stored answer with the replay header, and refuses another request', async () => {
    const caller = keyed();
    const ctx1 = handlerContext();
    const run = (id: string, c = caller, ctx = ctx1) =>
      answerOnce(
        keys,
        ctx,
        c,
        async () => {
          const t = { ...thing('x'), id };
          await insertOnce(database.db, things, t, { key: { keys, caller: c, answer: answerOf } });
          return order(id);
        },
        { lookupFirst: false },
      );
    const before = Date.now();
    expect((await run('thing_first')).id).toBe('thing_first');
    const after = Date.now();
    expect(ctx1.responseHeader.get(CALLER_HEADERS.idempotentReplayed)).toBeNull();
    expect(ctx1.responseHeader.get(CALLER_HEADERS.idempotencyExpires)).toBeNull();

    const ctx2 = handlerContext();
    const replay = await run('thing_second', caller, ctx2);
    expect(replay.id).toBe('thing_first');
    expect(ctx2.responseHeader.get(CALLER_HEADERS.idempotentReplayed)).toBe('true');
    // When the key expires, for a gateway that keeps the answer (gateway/idempotency.ts).
    const expires = Number(ctx2.responseHeader.get(CALLER_HEADERS.idempotencyExpires));
    expect(expires).toBeGreaterThanOrEqual(before + IDEMPOTENCY_WINDOW_MS - 1);
    expect(expires).toBeLessThanOrEqual(after + IDEMPOTENCY_WINDOW_MS + 1);

    // Also when the replay is found by a lookup first.
    const ctx3 = handlerContext();
    const looked = await answerOnce(keys, ctx3, caller, async () => order('never'), { lookupFirst: true });
    expect(looked.id).toBe('thing_first');
    expect(Number(ctx3.responseHeader.get(CALLER_HEADERS.idempotencyExpires))).toBe(expires);

    const other = await run(
      'thing_third',
      keyed(caller.idempotency!.key, 'fp-other'),
      handlerContext(),
    ).catch((e: unknown) => e);
    const detail = (other as { findDetails?: (s: unknown) => Array<{ code: string }> }).findDetails?.(
      api.ErrorDetailSchema,
    );
    expect(detail?.[0]?.code).toBe('idempotency_key_reused');
  });

  it('answers a catalog error of a retry with the first answer (the world changed since)', async () => {
    const caller = keyed();
    const ctx = handlerContext();
    await writeKeyed(database.db, keys, ctx, caller, async () => order('ord_kept'));
    const { apiError } = await import('@mcs/errors');
    const replay = await answerOnce<commerce.Order>(
      keys,
      handlerContext(),
      caller,
      async () => {
        throw apiError('invalid_state_transition');
      },
      { lookupFirst: false },
    );
    expect(replay.id).toBe('ord_kept');
  });
});

describe('writeKeyed', () => {
  it('seals an answer that holds a secret, and stores others as they are', async () => {
    const ep = handlerContext(
      webhooks.WebhookEndpointService,
      webhooks.WebhookEndpointService.method.createWebhookEndpoint,
    );
    const secret = `whsec_${randomBytes(8).toString('hex')}`;
    const withSecret = keyed();
    const made = () =>
      writeKeyed(database.db, keys, ep, withSecret, async () =>
        create(webhooks.WebhookEndpointSchema, { id: 'we_1', secret }),
      );
    expect((await made()).secret).toBe(secret);
    const sealedRow = await storedRow(withSecret);
    expect(sealedRow?.sealed).toBe(true);
    expect(sealedRow!.response.toString('latin1')).not.toContain(secret);
    expect((await made()).secret).toBe(secret); // the replay opens it

    const plain = keyed();
    const order = () =>
      writeKeyed(database.db, keys, handlerContext(), plain, async () =>
        create(commerce.OrderSchema, { id: 'ord_plain' }),
      );
    await order();
    const plainRow = await storedRow(plain);
    expect(plainRow?.sealed).toBe(false);
    expect(fromBinary(commerce.OrderSchema, plainRow!.response).id).toBe('ord_plain');
    expect((await order()).id).toBe('ord_plain');
  });

  it('with a service secret, seals so that the client key alone cannot open, and opens older seals', async () => {
    const peppered = createKeyStore(database.db, keys.table, { sealSecret: randomBytes(32) });
    const ep = handlerContext(
      webhooks.WebhookEndpointService,
      webhooks.WebhookEndpointService.method.createWebhookEndpoint,
    );
    const secret = `whsec_${randomBytes(8).toString('hex')}`;
    const made = (store: typeof keys, caller: Caller) =>
      writeKeyed(database.db, store, ep, caller, async () =>
        create(webhooks.WebhookEndpointSchema, { id: 'we_p', secret }),
      );
    // Sealed with the secret: the replay opens it; a store without the secret (a dump and a
    // guessed key) cannot.
    const caller = keyed();
    expect((await made(peppered, caller)).secret).toBe(secret);
    expect((await made(peppered, caller)).secret).toBe(secret);
    await expect(
      made(keys, keyed(caller.idempotency!.key, caller.idempotency!.fingerprint)),
    ).rejects.toThrow();

    // Sealed before the service had a secret: still opened, for the rest of its 24 hours.
    const older = keyed();
    expect((await made(keys, older)).secret).toBe(secret);
    expect((await made(peppered, keyed(older.idempotency!.key, older.idempotency!.fingerprint))).secret).toBe(
      secret,
    );
  });

  it('stores the answer with the effects, and runs the write once per key', async () => {
    const caller = keyed();
    let runs = 0;
    const write = () =>
      writeKeyed(database.db, keys, handlerContext(), caller, async (tx) => {
        runs++;
        await tx.insert(things).values(thing('tx'));
        return create(commerce.OrderSchema, { id: `ord_${runs}` });
      });
    const before = await count('things');
    expect((await write()).id).toBe('ord_1');
    expect((await write()).id).toBe('ord_1');
    expect(runs).toBe(1);
    expect(await count('things')).toBe(before + 1);
  });

  it('rolls its effects back when a concurrent request took the key first', async () => {
    const caller = keyed();
    const before = await count('things');
    let release!: () => void;
    const held = new Promise<void>((r) => {
      release = r;
    });
    // Both find no answer and do their work, overlapping; both then record the key.
    const first = writeKeyed(database.db, keys, handlerContext(), caller, async (tx) => {
      await tx.insert(things).values(thing('first'));
      await held;
      return create(commerce.OrderSchema, { id: 'ord_first' });
    });
    await new Promise((r) => setTimeout(r, 50));
    const second = writeKeyed(database.db, keys, handlerContext(), caller, async (tx) => {
      await tx.insert(things).values(thing('second'));
      release();
      return create(commerce.OrderSchema, { id: 'ord_second' });
    });
    // Whichever recorded the key first won; the other rolled back and answers the winner's answer.
    const [a, b] = [await first, await second];
    expect(a.id).toBe(b.id);
    expect(await count('things')).toBe(before + 1);
  });

  it('runs again when PostgreSQL picks it as a deadlock victim', async () => {
    const caller = keyed();
    await database.pool.query(
      `insert into idem_test.things values ('lock_a', 'x', 'a', now()), ('lock_b', 'x', 'b', now())
       on conflict do nothing`,
    );
    const other = await database.pool.connect();
    let runs = 0;
    try {
      await other.query('begin');
      await other.query(`select 1 from idem_test.things where id = 'lock_b' for update`);
      const write = writeKeyed(database.db, keys, handlerContext(), caller, async (tx) => {
        runs++;
        await tx.execute(sql`select 1 from idem_test.things where id = 'lock_a' for update`);
        // Waits for lock_b first, so its deadlock check fires first: this transaction is the victim.
        await tx.execute(sql`select 1 from idem_test.things where id = 'lock_b' for update`);
        return create(commerce.OrderSchema, { id: 'ord_after_deadlock' });
      });
      await new Promise((r) => setTimeout(r, 200));
      const blocked = other.query(`select 1 from idem_test.things where id = 'lock_a' for update`);
      await blocked;
      await other.query('commit');
      expect((await write).id).toBe('ord_after_deadlock');
      expect(runs).toBe(2);
    } finally {
      other.release();
    }
  });

  it('leaves no key behind when the write fails', async () => {
    const caller = keyed();
    await expect(
      writeKeyed(database.db, keys, handlerContext(), caller, async () => {
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(await keys.lookup(caller)).toBeUndefined();
  });
});

describe('the janitor sweep', () => {
  it('deletes keys older than 24 hours and keeps the rest', async () => {
    const old = keyed();
    const fresh = keyed();
    const long = new Date(Date.now() - IDEMPOTENCY_WINDOW_MS - 60_000);
    await database.db.transaction((tx) =>
      keys.record(tx, old, answerBytes(handlerContext(), create(commerce.OrderSchema)), long),
    );
    await database.db.transaction((tx) => keys.record(tx, fresh, new Uint8Array(), new Date()));
    expect(await keys.sweep()).toBeGreaterThanOrEqual(1);
    const left = await database.db.execute<{ n: number }>(
      sql`select count(*)::int as n from idem_test.idempotency_keys where created_at < ${new Date(Date.now() - IDEMPOTENCY_WINDOW_MS)}`,
    );
    expect(left.rows[0]?.n).toBe(0);
    expect(await keys.lookup(fresh)).toBeDefined();
  });
});

describe('holdsSecret', () => {
  it('finds secret fields in the message and in the messages it holds', () => {
    expect(holdsSecret(webhooks.WebhookEndpointSchema)).toBe(true);
    expect(holdsSecret(webhooks.ListWebhookEndpointsResponseSchema)).toBe(true);
    expect(holdsSecret(accounts.CreateAccountResponseSchema)).toBe(true);
    expect(holdsSecret(accounts.CreateApiKeyResponseSchema)).toBe(true);
    expect(holdsSecret(commerce.OrderSchema)).toBe(false);
    expect(holdsSecret(commerce.ListOrdersResponseSchema)).toBe(false);
    expect(holdsSecret(messaging.MessageSchema)).toBe(false);
  });

  it('is told of every field that names a secret or a secret key in the protos', () => {
    const named: string[] = [];
    const unmarked: string[] = [];
    for (const ns of Object.values(generated)) {
      for (const value of Object.values(ns as Record<string, unknown>)) {
        const desc = value as DescMessage;
        // (mcs.api.v1 holds the option itself: FieldRules.secret.)
        if (desc?.kind !== 'message' || desc.typeName.startsWith('mcs.api.')) continue;
        for (const field of desc.fields) {
          if (!/(^|_)secret(_key)?$/.test(field.name)) continue;
          named.push(`${desc.typeName}.${field.name}`);
          if (!fieldFlags(field).secret) unmarked.push(`${desc.typeName}.${field.name}`);
        }
      }
    }
    expect(named.length).toBeGreaterThanOrEqual(4);
    expect(unmarked).toEqual([]);
  });
});
