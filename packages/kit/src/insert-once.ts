// A create in ONE statement: its row, its event (outbox) and, for a keyed call, its idempotency
// key with the answer to replay (idempotency.ts), so a create costs one round trip and needs no
// transaction; on the pool, concurrent creates share a statement (group-commit.ts). The
// statements are built once per table and shape from its drizzle columns.
import { getTableColumns } from 'drizzle-orm';
import { getTableConfig, type PgTable } from 'drizzle-orm/pg-core';
import type pg from 'pg';
import type { Caller } from './caller.ts';
import { rawSession, type Tx } from './db.ts';
import { type CreateResult, type GroupedStatement, groupCommit } from './group-commit.ts';
import {
  CREATED_MS_SQL,
  IDEMPOTENCY_WINDOW_MS,
  type IdempotencyTable,
  type KeyStore,
  KeyTaken,
  keyedOf,
} from './idempotency.ts';
import { eventWritten, isTransaction, type NewEvent, type OutboxTable, outboxEntry } from './outbox.ts';

/** An event a statement wrote to the outbox: what the relay publishes (subject from `type`, Nats-Msg-Id = `id`). */
export interface WrittenEvent {
  id: string;
  type: string;
  payload: Uint8Array;
}

/**
 * What a one-statement create writes besides its row, built by the handler from the new row
 * (the domain never sees proto): its event, and, for a keyed caller, the answer to keep.
 */
export interface CreateSidecar<V> {
  event?: (row: V) => NewEvent;
  /** `sealed`: the answer holds a secret (holdsSecret of the RPC's output); sealed when absent. */
  key?: { keys: KeyStore; answer: (row: V) => Uint8Array; sealed?: boolean };
}

interface InsertPlan {
  /** Per column: its JS key and driver mapping, in the order of the statement's parameters. */
  specs: Array<{ key: string; toDriver: (v: unknown) => unknown }>;
  /** The statements, per shape: with or without a key, with or without an event. */
  texts: Map<string, GroupedStatement>;
}
const plans = new WeakMap<PgTable, InsertPlan>();
let statements = 0;

const qualifiedNames = new WeakMap<PgTable, string>();
/** `"schema"."table"`, worked out once per table (getTableConfig is costly: 3 % of commerce's CPU). */
function qualified(table: PgTable): string {
  let q = qualifiedNames.get(table);
  if (q === undefined) {
    const { name, schema } = getTableConfig(table);
    q = schema ? `"${schema}"."${name}"` : `"${name}"`;
    qualifiedNames.set(table, q);
  }
  return q;
}

/** The key's parameters, first in both statements: account, mode, hash, fingerprint, answer, now, expiry, sealed. */
const KEY_TYPES = ['text', 'boolean', 'text', 'text', 'bytea', 'timestamptz', 'timestamptz', 'boolean'];
/** The event's parameters, last: id, type, payload, resource version. */
const EVENT_TYPES = ['text', 'text', 'bytea', 'integer'];

/**
 * The statements of insertOnce for `table` (see there), alone and for a group commit
 * (kit/group-commit). Parameters: the key's seven (keyed), then the row's columns, then the
 * event's four. The batch form takes each as an array of one element per create and answers
 * one row per create, `i` its 1-based position.
 */
function statementOf(
  table: PgTable,
  keys: IdempotencyTable | undefined,
  outbox: OutboxTable | undefined,
): { specs: InsertPlan['specs']; st: GroupedStatement } {
  let plan = plans.get(table);
  if (!plan) {
    const cols = Object.entries(getTableColumns(table));
    plan = {
      specs: cols.map(([key, c]) => ({
        key,
        toDriver: (v: unknown) => (v === null || v === undefined ? null : c.mapToDriverValue(v)),
      })),
      texts: new Map(),
    };
    plans.set(table, plan);
  }
  const shape = `${keys ? qualified(keys) : ''}|${outbox ? qualified(outbox) : ''}`;
  let st = plan.texts.get(shape);
  if (!st) {
    const cols = Object.values(getTableColumns(table));
    const n = ++statements;
    st = {
      single: { name: `mcs_insert_once_${n}`, text: singleText(table, cols, keys, outbox) },
      batch: { name: `mcs_insert_batch_${n}`, text: batchText(table, cols, keys, outbox) },
    };
    plan.texts.set(shape, st);
  }
  return { specs: plan.specs, st };
}

type Column = ReturnType<typeof getTableColumns>[string];

function singleText(table: PgTable, cols: Column[], keys?: IdempotencyTable, outbox?: OutboxTable): string {
  const first = keys ? KEY_TYPES.length + 1 : 1;
  const names = cols.map((c) => `"${c.name}"`).join(', ');
  const vals = cols.map((c, i) => `$${first + i}::${c.getSQLType()}`).join(', ');
  const ev = first + cols.length;
  const eventCte = outbox
    ? `, e as (insert into ${qualified(outbox)} (event_id, type, payload, resource_version) select $${ev}::text, $${ev + 1}::text, $${ev + 2}::bytea, $${ev + 3}::integer from o returning seq)`
    : '';
  // The event's outbox seq (kit/outbox OutboxRow.outboxSeq), for the relay to publish with it.
  const seq = outbox ? ', (select seq::text from e) as seq' : '';
  const t = qualified(table);
  if (!keys) {
    return `with o as (insert into ${t} (${names}) values (${vals}) returning 1)${eventCte} select true as inserted${seq}`;
  }
  const k = qualified(keys);
  return `with k as (
  insert into ${k} as k (account_id, livemode, key_hash, fingerprint, response, sealed, created_at)
  values ($1, $2, $3, $4, $5, $8, $6)
  on conflict (account_id, livemode, key_hash) do update
    set fingerprint = excluded.fingerprint, response = excluded.response, sealed = excluded.sealed,
        created_at = excluded.created_at
    where k.created_at < $7
  returning 1
), o as (insert into ${t} (${names}) select ${vals} where exists (select 1 from k) returning 1)${eventCte}
select exists (select 1 from o) as inserted, p.fingerprint, p.response, p.sealed, ${CREATED_MS_SQL('p.created_at')} as created_ms${seq}
  from (select 1) one left join ${k} p
    on p.account_id = $1 and p.livemode = $2 and p.key_hash = $3 and p.created_at >= $7`;
}

/**
 * The single statement for N creates. `s` unnests the parameters (s.p1 … s.pN, s.i); the key
 * CTE inserts in `i` order, which group-commit sorted by key; the row and its event are written
 * for the creates whose key the statement took (all of them without keys). Unlike the one-row
 * statement it does not read a taken key's earlier answer (answerOnce looks it up): joined to
 * the unnested creates, the planner hashed the whole key table for it while the table was new,
 * a scan of every key for every statement.
 */
function batchText(table: PgTable, cols: Column[], keys?: IdempotencyTable, outbox?: OutboxTable): string {
  const types = [
    ...(keys ? KEY_TYPES : []),
    ...cols.map((c) => c.getSQLType()),
    ...(outbox ? EVENT_TYPES : []),
  ];
  const p = (i: number) => `s.p${i}`;
  const arrays = types.map((t, i) => `$${i + 1}::${t}[]`).join(', ');
  const src = `s as (select * from unnest(${arrays}) with ordinality as s(${types.map((_, i) => `p${i + 1}`).join(', ')}, i))`;
  const first = keys ? KEY_TYPES.length + 1 : 1;
  const names = cols.map((c) => `"${c.name}"`).join(', ');
  const vals = cols.map((_, i) => p(first + i)).join(', ');
  const ev = first + cols.length;
  const t = qualified(table);
  if (!keys) {
    const eventCte = outbox
      ? `, e as (insert into ${qualified(outbox)} (event_id, type, payload, resource_version)
  select ${p(ev)}, ${p(ev + 1)}, ${p(ev + 2)}, ${p(ev + 3)} from s order by s.i returning event_id, seq)`
      : '';
    const answer = outbox
      ? `select s.i::int as i, true as inserted, e.seq::text as seq from s left join e on e.event_id = ${p(ev)}`
      : 'select s.i::int as i, true as inserted from s';
    return `with ${src},
o as (insert into ${t} (${names}) select ${vals} from s order by s.i)${eventCte}
${answer}`;
  }
  const k = qualified(keys);
  const took = `k.account_id = ${p(1)} and k.livemode = ${p(2)} and k.key_hash = ${p(3)}`;
  const eventCte = outbox
    ? `, e as (insert into ${qualified(outbox)} (event_id, type, payload, resource_version)
  select ${p(ev)}, ${p(ev + 1)}, ${p(ev + 2)}, ${p(ev + 3)} from s join k on ${took} order by s.i returning event_id, seq)`
    : '';
  return `with ${src},
k as (
  insert into ${k} as k (account_id, livemode, key_hash, fingerprint, response, sealed, created_at)
  select ${p(1)}, ${p(2)}, ${p(3)}, ${p(4)}, ${p(5)}, ${p(8)}, ${p(6)} from s order by s.i
  on conflict (account_id, livemode, key_hash) do update
    set fingerprint = excluded.fingerprint, response = excluded.response, sealed = excluded.sealed,
        created_at = excluded.created_at
    where k.created_at < excluded.created_at - interval '${IDEMPOTENCY_WINDOW_MS} milliseconds'
  returning account_id, livemode, key_hash
), o as (insert into ${t} (${names}) select ${vals} from s join k on ${took} order by s.i)${eventCte}
select s.i::int as i, k.key_hash is not null as inserted${outbox ? ', e.seq::text as seq' : ''}
  from s left join k on ${took}${outbox ? `\n  left join e on e.event_id = ${p(ev)}` : ''}`;
}

/**
 * Inserts one row, its event and its idempotency key in ONE statement, so a create costs one
 * round trip and needs no transaction (docs/performance.md: ingest):
 *
 *   with k as (insert into <keys> … on conflict (account, mode, hash) do update … where expired returning 1),
 *        o as (insert into <table> (…) select … where exists (select 1 from k) returning 1),
 *        e as (insert into <outbox> (…) select … from o)
 *   select exists (select 1 from o) as inserted, <the key's earlier answer, if it has one>
 *
 * A single statement commits whole or not at all. When the key is taken the row and event are
 * not written and KeyTaken is thrown, carrying the earlier answer when it was committed before
 * this statement began (else answerOnce looks it up). A concurrent insert of the same key waits
 * on the key's index until the other commits. Without a key it is the plain insert (+ event).
 * Returns the event it wrote, for the relay to publish at once.
 */
export async function insertOnce<V extends Record<string, unknown>>(
  db: Tx,
  table: PgTable,
  values: V,
  opts: {
    event?: { outbox: OutboxTable; of: (values: V) => NewEvent };
    key?: { keys: KeyStore; caller: Caller; answer: (values: V) => Uint8Array; sealed?: boolean };
    now?: Date;
  } = {},
): Promise<{ event: WrittenEvent | undefined }> {
  const k = opts.key && keyedOf(opts.key.caller);
  const { specs, st } = statementOf(table, k && opts.key?.keys.table, opts.event?.outbox);
  const params: unknown[] = [];
  const now = opts.now ?? new Date();
  if (k && opts.key) {
    const { caller } = opts.key;
    const sealed = opts.key.sealed ?? true;
    const answer = opts.key.answer(values);
    params.push(caller.accountId, caller.livemode, k.hash, k.claim.fingerprint);
    params.push(
      sealed ? k.seal(answer, opts.key.keys.pepper) : answer,
      now,
      new Date(now.getTime() - IDEMPOTENCY_WINDOW_MS),
      sealed,
    );
  }
  for (const spec of specs) params.push(spec.toDriver(values[spec.key]));
  const entry = opts.event ? outboxEntry(opts.event.of(values)) : undefined;
  if (entry) {
    const { payload } = entry.row;
    params.push(
      entry.row.eventId,
      entry.row.type,
      Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength),
      entry.row.resourceVersion ?? null,
    );
  }
  const session = rawSession(db);
  // In a transaction the statement runs on its connection; on the pool it joins the group commit.
  if (isTransaction(db)) session.logger.logQuery(st.single.text, params);
  const row = isTransaction(db)
    ? (await session.client.query<CreateResult>({ ...st.single, values: params })).rows[0]
    : await groupCommit(
        session.client as pg.Pool,
        st,
        params,
        k && `${opts.key!.caller.accountId}\u0000${opts.key!.caller.livemode}\u0000${k.hash}`,
        session.logger,
      );
  if (row?.inserted) {
    if (entry) {
      if (row.seq) entry.row.outboxSeq = row.seq;
      eventWritten(db, entry.row);
    }
    return { event: entry && { id: entry.row.eventId, type: entry.row.type, payload: entry.row.payload } };
  }
  throw new KeyTaken(
    row?.fingerprint && row.response && row.created_ms
      ? {
          fingerprint: row.fingerprint,
          response: row.response,
          sealed: row.sealed ?? true,
          createdMs: Number(row.created_ms),
        }
      : undefined,
  );
}
