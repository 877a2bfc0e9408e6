// The accounts service: accounts, their API keys (stored hashed) and plan limits. It has no
// events, so unlike commerce it needs no NATS and no outbox relay.
import { createDatabase } from '@mcs/kit/db';
import { createLogger } from '@mcs/kit/log';
import { errorLogger, runProcess, startConnectServer } from '@mcs/kit/server';
import { migrateAccounts } from './db/migrate.ts';
import { loadEnv } from './env.ts';
import { routes } from './routes.ts';

const env = loadEnv();
const log = createLogger('accounts', env.LOG_LEVEL);

await runProcess(log, async () => {
  const database = createDatabase(env.DATABASE_URL, { name: 'accounts' });
  await migrateAccounts(database);
  const server = await startConnectServer({
    routes: routes({ db: database.db }),
    port: env.port,
    interceptors: [errorLogger(log)],
  });
  log.info({ port: server.port }, 'accounts listening');
  return async () => {
    await server.close();
    await database.close();
  };
});
