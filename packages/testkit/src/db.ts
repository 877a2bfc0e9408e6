// A fresh database per test file, on the PostgreSQL server of DATABASE_URL (docs/design.md: each
// test run creates its own database and removes it after). Tests apply their own migrations.
import { randomBytes } from 'node:crypto';
import { DEFAULT_DATABASE_URL } from '@mcs/kit/config';
import pg from 'pg';

export interface TestDatabase {
  /** Connection string of the new database. */
  url: string;
  /** Drops the database, ending any session still connected to it. */
  drop(): Promise<void>;
}

function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

async function onMaintenanceDb<T>(serverUrl: string, run: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: withDatabase(serverUrl, 'postgres') });
  await client.connect();
  try {
    return await run(client);
  } finally {
    await client.end();
  }
}

/** Creates `mcs_test_<random>` on the server of env DATABASE_URL (default: local, trust auth). */
export async function createTestDatabase(
  serverUrl: string = process.env.DATABASE_URL ?? DEFAULT_DATABASE_URL,
): Promise<TestDatabase> {
  // Lower-case hex only, so the name needs no quoting rules beyond the double quotes below.
  const name = `mcs_test_${randomBytes(8).toString('hex')}`;
  await onMaintenanceDb(serverUrl, (c) => c.query(`create database "${name}"`));
  let dropped = false;
  return {
    url: withDatabase(serverUrl, name),
    async drop() {
      if (dropped) return;
      dropped = true;
      await onMaintenanceDb(serverUrl, (c) => c.query(`drop database if exists "${name}" with (force)`));
    },
  };
}
