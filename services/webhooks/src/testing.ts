// Helpers for the webhooks service's own tests.
import type { Db } from '@mcs/kit/db';
import { drizzle } from 'drizzle-orm/node-postgres';
import type pg from 'pg';

/**
 * A db on the same database as `real` that records the text of every statement sent through
 * it (pool queries and transactions alike): how tests count round trips.
 */
export function countingDb(real: pg.Pool): { db: Db; statements: string[] } {
  const statements: string[] = [];
  const textOf = (q: unknown) => (typeof q === 'string' ? q : (q as { text: string }).text).trim();
  const pool = Object.create(real) as pg.Pool;
  pool.query = ((q: unknown, values?: unknown) => {
    statements.push(textOf(q));
    return real.query(q as string, values as unknown[]);
  }) as pg.Pool['query'];
  pool.connect = (async () => {
    const client = await real.connect();
    const query = client.query;
    const release = client.release;
    client.query = ((q: unknown, values?: unknown) => {
      statements.push(textOf(q));
      return (query as (q: unknown, v?: unknown) => unknown).call(client, q, values);
    }) as typeof client.query;
    client.release = (err?: Error | boolean) => {
      client.query = query;
      client.release = release;
      return release.call(client, err);
    };
    return client;
  }) as pg.Pool['connect'];
  return { db: drizzle(pool) as Db, statements };
}
