// The commerce service: products, orders and payments, and their events (via the outbox).
// Started by main.ts in a process of its own, or with the gateway and two other services in one (scripts/one-process.ts).
import { createDatabase } from '@mcs/kit/db';
import { databaseDependency, natsDependency } from '@mcs/kit/health';
import { createKeyStore, startKeyJanitor } from '@mcs/kit/idempotency';
import type { Logger } from '@mcs/kit/log';
import { connectNats, createEventPublisher, ensureStream, streamNames } from '@mcs/kit/nats';
import { startRelay } from '@mcs/kit/outbox';
import { errorLogger, type StartedPart, startConnectServer } from '@mcs/kit/server';
import { migrateCommerce } from './db/migrate.ts';
import { idempotencyKeys } from './db/schema.ts';
import type { Env } from './env.ts';
import { sandboxProviders } from './providers/sandbox.ts';
import { routes } from './routes.ts';

export async function startCommerce(env: Env, log: Logger): Promise<StartedPart> {
  const database = createDatabase(env.DATABASE_URL, { name: 'commerce' });
  await migrateCommerce(database);
  const nc = await connectNats(env.NATS_URL, 'commerce');
  const names = streamNames(env.MCS_NATS_PREFIX);
  await ensureStream(await nc.jetstreamManager(), names);
  const relay = startRelay({
    pool: database.pool,
    schema: 'commerce',
    js: createEventPublisher(nc),
    names,
    log,
    lingerMs: env.EVENT_PUBLISH_LINGER,
    lingerMaxMs: env.EVENT_PUBLISH_LINGER_MAX,
  });
  const keys = createKeyStore(database.db, idempotencyKeys);
  const server = await startConnectServer({
    routes: routes({ db: database.db, keys, relay, payments: sandboxProviders() }),
    port: env.port,
    socketPath: env.socketPath,
    interceptors: [errorLogger(log)],
    health: { dependencies: [databaseDependency(database.pool), natsDependency(nc)] },
  });
  log.info({ port: server.port }, 'commerce listening');
  const janitor = startKeyJanitor(keys, log);
  const stop = async () => {
    janitor.stop();
    await server.close();
    await relay.stop();
    await nc.drain();
    await database.close();
  };
  return { server, stop };
}
