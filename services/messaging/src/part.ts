// The messaging service: conversations, messages and channel adapters, and their events.
// Started by main.ts in a process of its own, or with the gateway and two other services in one (scripts/one-process.ts).
import { createDatabase } from '@mcs/kit/db';
import { databaseDependency, natsDependency } from '@mcs/kit/health';
import { createKeyStore, startKeyJanitor } from '@mcs/kit/idempotency';
import type { Logger } from '@mcs/kit/log';
import { connectNats, createEventPublisher, ensureStream, streamNames } from '@mcs/kit/nats';
import { startRelay } from '@mcs/kit/outbox';
import { errorLogger, type StartedPart, startConnectServer } from '@mcs/kit/server';
import { sandboxChannels } from './channels/sandbox.ts';
import { migrateMessaging } from './db/migrate.ts';
import { idempotencyKeys } from './db/schema.ts';
import type { Env } from './env.ts';
import { routes } from './routes.ts';

export async function startMessaging(env: Env, log: Logger): Promise<StartedPart> {
  const database = createDatabase(env.DATABASE_URL, { name: 'messaging' });
  await migrateMessaging(database);
  const nc = await connectNats(env.NATS_URL, 'messaging');
  const names = streamNames(env.MCS_NATS_PREFIX);
  await ensureStream(await nc.jetstreamManager(), names);
  const relay = startRelay({
    pool: database.pool,
    schema: 'messaging',
    js: createEventPublisher(nc),
    names,
    log,
    lingerMs: env.EVENT_PUBLISH_LINGER,
    lingerMaxMs: env.EVENT_PUBLISH_LINGER_MAX,
  });
  const keys = createKeyStore(database.db, idempotencyKeys);
  const server = await startConnectServer({
    routes: routes({ db: database.db, keys, relay, channels: sandboxChannels() }),
    port: env.port,
    socketPath: env.socketPath,
    interceptors: [errorLogger(log)],
    health: { dependencies: [databaseDependency(database.pool), natsDependency(nc)] },
  });
  log.info({ port: server.port }, 'messaging listening');
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
