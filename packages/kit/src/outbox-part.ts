// A service whose writes publish events through its schema's outbox, with idempotency keys kept
// beside the resources (commerce, messaging): its database and migrations, NATS and the event
// stream, the outbox relay, the key store and its janitor, and the Connect server, stopped in
// the reverse order. Started by each service's part.ts, in a process of its own or in one
// process with the gateway (scripts/one-process.ts).
import type { ConnectRouter } from '@connectrpc/connect';
import type { BaseEnv } from './config.ts';
import { createDatabase, type Database, type Db } from './db.ts';
import { databaseDependency, natsDependency } from './health.ts';
import { createKeyStore, type IdempotencyTable, type KeyStore, startKeyJanitor } from './idempotency.ts';
import type { Logger } from './log.ts';
import { connectNats, createEventPublisher, ensureStream, streamNames } from './nats.ts';
import { type Relay, startRelay } from './relay.ts';
import { errorLogger, type StartedPart, startConnectServer } from './server.ts';

export interface OutboxPartDeps {
  db: Db;
  keys: KeyStore;
  relay: Relay;
}

export async function startOutboxPart(opts: {
  /** The service's name: its database schema (with the outbox) and connection names. */
  name: 'commerce' | 'messaging';
  env: BaseEnv & { port: number; socketPath: string | undefined };
  log: Logger;
  migrate(database: Database): Promise<void>;
  idempotencyKeys: IdempotencyTable;
  routes(deps: OutboxPartDeps): (router: ConnectRouter) => void;
}): Promise<StartedPart> {
  const { name, env, log } = opts;
  const database = createDatabase(env.DATABASE_URL, { name });
  await opts.migrate(database);
  const nc = await connectNats(env.NATS_URL, name, log);
  const names = streamNames(env.MCS_NATS_PREFIX);
  await ensureStream(await nc.jetstreamManager(), names);
  const relay = startRelay({
    pool: database.pool,
    schema: name,
    js: createEventPublisher(nc),
    names,
    log,
    lingerMs: env.EVENT_PUBLISH_LINGER,
    lingerMaxMs: env.EVENT_PUBLISH_LINGER_MAX,
  });
  const keys = createKeyStore(database.db, opts.idempotencyKeys);
  const server = await startConnectServer({
    routes: opts.routes({ db: database.db, keys, relay }),
    port: env.port,
    socketPath: env.socketPath,
    metricsPort: env.SERVICE_METRICS_PORT,
    interceptors: [errorLogger(log)],
    health: { dependencies: [databaseDependency(database.pool), natsDependency(nc)] },
  });
  log.info({ port: server.port }, `${name} listening`);
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
