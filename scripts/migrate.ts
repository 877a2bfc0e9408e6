// Applies every part's database migrations and exits: the Kubernetes migration Job
// (deploy/base/migrate-job.yaml) runs it before a rollout. The parts still migrate at start-up
// too (a no-op once this ran), under the same advisory lock, so running both is safe.
//   DATABASE_URL=postgres://… node scripts/migrate.ts
import { migrateGateway } from '../gateway/src/db/migrate.ts';
import { createDatabase } from '../packages/kit/src/db.ts';
import { migrateAccounts } from '../services/accounts/src/db/migrate.ts';
import { migrateCommerce } from '../services/commerce/src/db/migrate.ts';
import { migrateMessaging } from '../services/messaging/src/db/migrate.ts';
import { migrateWebhooks } from '../services/webhooks/src/db/migrate.ts';

const url = process.env.DATABASE_URL;
if (!url) {
  console.error('migrate: DATABASE_URL is not set');
  process.exit(2);
}
const database = createDatabase(url, { name: 'migrate', max: 2 });
const steps = [
  ['accounts', migrateAccounts],
  ['commerce', migrateCommerce],
  ['messaging', migrateMessaging],
  ['webhooks', migrateWebhooks],
  ['gateway', migrateGateway],
] as const;
try {
  for (const [name, migrate] of steps) {
    const t0 = performance.now();
    await migrate(database);
    console.log(JSON.stringify({ msg: 'migrated', schema: name, ms: Math.round(performance.now() - t0) }));
  }
} catch (err) {
  console.error(JSON.stringify({ msg: 'migration failed', err: (err as Error).message }));
  process.exitCode = 1;
} finally {
  await database.close();
}
