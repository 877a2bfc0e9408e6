// PostgreSQL access shared by the services: one pool per process, drizzle on top, and the
// start-up migration step. Each service owns one schema and its own migrations folder.

import { type SQL, sql } from 'drizzle-orm';
import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import { migrate } from 'drizzle-orm/node-postgres/migrator';
import { customType, PgDialect, type PgTable } from 'drizzle-orm/pg-core';
import pg from 'pg';
import { PartStartError } from './config.ts';
import { registerPoolMetrics } from './metrics.ts';

/** A bytea column as Uint8Array. */
export const bytea = customType<{ data: Uint8Array; driverData: Buffer }>({
  dataType: () => 'bytea',
  toDriver: (v) => Buffer.from(v.buffer, v.byteOffset, v.byteLength),
  fromDriver: (v) => new Uint8Array(v),
});

export type Db = NodePgDatabase<Record<string, unknown>>;

/**
 * PostgreSQL chose the transaction as a deadlock victim (40P01) or could not serialize it
 * (40001): it rolled back whole, and running it again is safe.
 */
export function isRetryableConflict(err: unknown): boolean {
  for (let e = err as { code?: string; cause?: unknown } | undefined; e; e = e.cause as typeof e) {
    if (e.code === '40P01' || e.code === '40001') return true;
  }
  return false;
}
/**
 * Deletes the rows of `table` matching `where` in slices of `slice` rows, each its own statement:
 * a large backlog (a million expired sessions) never holds one long transaction, its locks and
 * its WAL, and nothing is read back but the count. Answers how many rows went.
 */
export async function deleteInSlices(db: Tx, table: PgTable, where: SQL, slice = 5_000): Promise<number> {
  let total = 0;
  for (;;) {
    const { rowCount } = await db.execute(
      sql`delete from ${table} where ctid = any(array(select ctid from ${table} where ${where} limit ${slice}))`,
    );
    total += rowCount ?? 0;
    if (!rowCount || rowCount < slice) return total;
  }
}

/** Anything that can run a query: the pool-backed db or a transaction. */
export type Tx = Parameters<Parameters<Db['transaction']>[0]>[0] | Db;

/** What runs a raw, named (prepared) statement for `tx`: its pg client, and its query log. */
export interface RawSession {
  client: pg.Pool | pg.PoolClient;
  logger: { logQuery(query: string, params: unknown[]): void };
}

/**
 * The pg client under a drizzle db or transaction, for hot statements sent as named prepared
 * statements (parsed and planned once per connection instead of on every call). Goes through
 * drizzle's session, so statements still reach its logger.
 */
export function rawSession(tx: Tx): RawSession {
  return (tx as unknown as { session: RawSession }).session;
}

const dialect = new PgDialect();

/**
 * A named statement over array parameters runs named only for batches up to this many rows.
 * After five runs PostgreSQL may keep a generic plan for it, planned without the parameters'
 * values: it takes `unnest` of an array parameter for 10 rows, and a join of two such sets
 * (a CTE of the input and the rows an INSERT … RETURNING gave) becomes a nested loop, quadratic
 * in the batch. Webhooks' fan-out of 1,000 events took 280 ms that way and 4,000 took 3.6 s;
 * unnamed (planned for its values, the array's length known) 45 ms and 195 ms. Below about 30
 * rows the named statement is the faster (2.2 ms against 3.4 ms for 20 events).
 */
export const NAMED_MAX_ROWS = 32;

/**
 * Runs a hot statement built with drizzle's `sql` as a named prepared statement: parsed and
 * planned once per connection, not on every call. Its text must not vary between calls (values
 * only as parameters; arrays for batches), since one name stands for one text. Rows come with
 * pg's own type parsers (a timestamp is a Date), where db.execute leaves timestamps as text.
 *
 * `rows`: for a batch statement, how many rows its arrays hold; above NAMED_MAX_ROWS it runs
 * unnamed, planned for its own values.
 */
export async function executeNamed<R extends pg.QueryResultRow>(
  tx: Tx,
  name: string,
  query: SQL,
  opts: { rows?: number } = {},
): Promise<R[]> {
  const { sql: text, params } = dialect.sqlToQuery(query);
  const session = rawSession(tx);
  session.logger.logQuery(text, params);
  const named = (opts.rows ?? 1) <= NAMED_MAX_ROWS;
  const { rows } = await session.client.query<R>(
    named ? { name, text, values: params } : { text, values: params },
  );
  return rows;
}

export interface Database {
  pool: pg.Pool;
  db: Db;
  close(): Promise<void>;
}

// int8 (bigint) columns arrive as JS numbers: every int8 we store (money, counts, sequence
// numbers) stays far below 2^53.
pg.types.setTypeParser(20, (v) => Number(v));

/**
 * How long a connection to PostgreSQL may be silent before TCP asks whether the server is still
 * there. Node then sends a probe every second and gives up after ten unanswered (libuv's
 * TCP_KEEPINTVL and TCP_KEEPCNT), so a connection whose server vanished without a word (a host
 * that died, a failover, a NAT or conntrack entry dropped) fails within about 20 s: its query
 * rejects and the pool replaces it. Without it, a query waiting for its answer (the outbox poll,
 * a delivery claim) or an idle connection in the pool waits forever (test/e2e/dead-peer.test.ts).
 */
export const DB_KEEPALIVE_MS = 10_000;

export function createDatabase(
  url: string,
  opts: { max?: number; name: string; keepAliveMs?: number },
): Database {
  const pool = new pg.Pool({
    connectionString: url,
    // DATABASE_POOL_SIZE caps every process's pool (sum over replicas ≤ the server's max_connections).
    max: Number(process.env.DATABASE_POOL_SIZE ?? 0) || opts.max || 16,
    application_name: `mcs-${opts.name}`,
    idleTimeoutMillis: 30_000,
    connectionTimeoutMillis: 10_000,
    keepAlive: true,
    keepAliveInitialDelayMillis: opts.keepAliveMs ?? DB_KEEPALIVE_MS,
  });
  // An idle client losing its server (Postgres restart) must not crash the process.
  pool.on('error', () => {});
  // Nor may a checked-out one (a transaction, the outbox relay): the pool listens for a client's
  // 'error' only while it is idle, and an unhandled one ends the process. Its queries still
  // reject with the error, and the pool discards the broken client when it is released.
  pool.on('connect', (client) => client.on('error', () => {}));
  const db = drizzle(pool) as Db;
  registerPoolMetrics(opts.name, pool);
  return { pool, db, close: () => pool.end() };
}

/**
 * Applies the service's drizzle migrations. Every service migrates at start-up, so they take one
 * advisory lock in turn; each keeps its own journal table.
 */
export async function migrateSchema(
  database: Database,
  migrationsFolder: string,
  service: string,
): Promise<void> {
  const lock = await database.pool.connect().catch((err: Error) => {
    // The first connection of a part: say what could not be reached, in one line.
    throw new PartStartError(`cannot connect to PostgreSQL (DATABASE_URL): ${err.message}`);
  });
  try {
    await lock.query('select pg_advisory_lock(74201)');
    await migrate(database.db, { migrationsFolder, migrationsTable: `__migrations_${service}` });
  } finally {
    await lock.query('select pg_advisory_unlock(74201)').catch(() => {});
    lock.release();
  }
}
