import { fileURLToPath } from 'node:url';
import { type Database, migrateSchema } from '@mcs/kit/db';

const MIGRATIONS = fileURLToPath(new URL('../../drizzle', import.meta.url));

/** Brings the gateway schema up to date (main.ts at start-up, and each test database). */
export function migrateGateway(database: Database): Promise<void> {
  return migrateSchema(database, MIGRATIONS, 'gateway');
}
