// The accounts service: accounts, their API keys (stored hashed) and plan limits. It has no
// domain events (no outbox); it only announces key revocations to the gateways over core NATS.
// Started by main.ts in a process of its own, or with the gateway and two other services in one (scripts/one-process.ts).
import { createDatabase } from '@mcs/kit/db';
import { databaseDependency, natsDependency } from '@mcs/kit/health';
import type { Logger } from '@mcs/kit/log';
import { connectNats, keyRevocationSubject, ownerPasswordSubject } from '@mcs/kit/nats';
import { errorLogger, type StartedPart, startConnectServer } from '@mcs/kit/server';
import { migrateAccounts } from './db/migrate.ts';
import { sweepSignInFailures } from './domain/owners.ts';
import type { Env } from './env.ts';
import { routes } from './routes.ts';

export async function startAccounts(env: Env, log: Logger): Promise<StartedPart> {
  const database = createDatabase(env.DATABASE_URL, { name: 'accounts' });
  await migrateAccounts(database);
  const nc = await connectNats(env.NATS_URL, 'accounts', log);
  const subject = keyRevocationSubject(env.MCS_NATS_PREFIX);
  const passwordSubject = ownerPasswordSubject(env.MCS_NATS_PREFIX);
  const server = await startConnectServer({
    routes: routes({
      db: database.db,
      announceRevocation: (keyId) => nc.publish(subject, keyId),
      announcePasswordSet: (accountId) => nc.publish(passwordSubject, accountId),
    }),
    port: env.port,
    socketPath: env.socketPath,
    metricsPort: env.SERVICE_METRICS_PORT,
    interceptors: [errorLogger(log)],
    health: { dependencies: [databaseDependency(database.pool), natsDependency(nc)] },
  });
  log.info({ port: server.port }, 'accounts listening');
  // Sign-in throttling forgets addresses nobody tried for a day (domain/owners.ts).
  const sweep = () =>
    void sweepSignInFailures(database.db).then(
      (n) => n > 0 && log.debug({ removed: n }, 'idle sign-in throttle rows removed'),
      (err) => log.warn({ err: (err as Error).message }, 'sign-in throttle sweep failed'),
    );
  sweep();
  const sweeper = setInterval(sweep, 3_600_000);
  sweeper.unref();
  const stop = async () => {
    clearInterval(sweeper);
    await server.close();
    await nc.drain();
    await database.close();
  };
  return { server, stop };
}
