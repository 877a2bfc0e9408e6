import { fileURLToPath } from 'node:url';
import { type Database, migrateSchema } from '@mcs/kit/db';

const MIGRATIONS = fileURLToPath(new URL('../../drizzle', import.meta.url));

/** Brings the accounts schema up to date (main.ts at start-up, and each test database). */
export function migrateAccounts(database: Database): Promise<void> {
  return migrateSchema(database, MIGRATIONS, 'accounts');
}
