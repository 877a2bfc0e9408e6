// The webhooks service: endpoints, the event log, fan-out from JetStream, signed deliveries
// with retries and endpoint health, and the unhealthy e-mail.
// Started by main.ts in a process of its own, always: with MCS_ONE_PROCESS too (scripts/one-process.ts says why).
import { createHmac } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { PartStartError, serviceUrl } from '@mcs/kit/config';
import { createDatabase } from '@mcs/kit/db';
import { databaseDependency, natsDependency } from '@mcs/kit/health';
import { createKeyStore, idempotencyKeys, startKeyJanitor } from '@mcs/kit/idempotency';
import type { Logger } from '@mcs/kit/log';
import { connectNats, ensureStream, streamNames } from '@mcs/kit/nats';
import { errorLogger, type StartedPart, startConnectServer } from '@mcs/kit/server';
import { startConsumer } from './consumer.ts';
import { migrateWebhooks } from './db/migrate.ts';
import { createEngine } from './delivery/engine.ts';
import { maxInFlight } from './delivery/lanes.ts';
import { createListenSender } from './delivery/listen.ts';
import { sharePauses } from './delivery/pauses.ts';
import { createProber, PROBE_BATCH } from './delivery/prober.ts';
import { createReplayer } from './delivery/replayer.ts';
import { createSender } from './delivery/sender.ts';
import { startRetention } from './domain/retention.ts';
import { createSecretBox, loadSecretsKey } from './domain/secrets.ts';
import type { Env } from './env.ts';
import { createAccountDirectory } from './mail/accounts.ts';
import { createMailer } from './mail/mailer.ts';
import { createFileTransport, createSmtpTransport } from './mail/transport.ts';
import { registerScrapedMetrics } from './metrics.ts';
import { routes } from './routes.ts';

export async function startWebhooks(env: Env, log: Logger): Promise<StartedPart> {
  const keyFile = fileURLToPath(new URL('../../../.data/webhook-secrets.key', import.meta.url));
  if (!env.WEBHOOK_SECRETS_KEY && process.env.NODE_ENV === 'production') {
    // Each replica would seal with a key of its own, and no replica could open another's secrets.
    throw new PartStartError('WEBHOOK_SECRETS_KEY is required in production (32 bytes, base64 or hex)');
  }
  const { key, generated } = loadSecretsKey(env.WEBHOOK_SECRETS_KEY, keyFile);
  if (generated)
    log.warn({ keyFile }, 'WEBHOOK_SECRETS_KEY not set: sealing secrets with a key kept on local disk');
  const box = createSecretBox(key);
  const policy = {
    allowHttp: env.WEBHOOK_ALLOW_HTTP,
    allowPrivate: env.WEBHOOK_ALLOW_PRIVATE_NETWORKS,
    hints: process.env.NODE_ENV !== 'production',
  };

  const database = createDatabase(env.DATABASE_URL, { name: 'webhooks', max: 24 });
  await migrateWebhooks(database);
  const nc = await connectNats(env.NATS_URL, 'webhooks', log);
  const names = streamNames(env.MCS_NATS_PREFIX);
  await ensureStream(await nc.jetstreamManager(), names);

  // Listen endpoints (mcs listen) are reached over NATS, every other URL over HTTP(S).
  const sender = createListenSender({
    nc,
    prefix: env.MCS_NATS_PREFIX,
    timeoutMs: env.WEBHOOK_TIMEOUT,
    http: createSender({
      timeoutMs: env.WEBHOOK_TIMEOUT,
      allowPrivate: policy.allowPrivate,
      connectionsPerOrigin: maxInFlight(env.WEBHOOK_CONCURRENCY) + PROBE_BATCH,
    }),
  });
  const mailer = createMailer({
    db: database.db,
    directory: createAccountDirectory(serviceUrl('accounts')),
    transport: env.SMTP_URL ? createSmtpTransport(env.SMTP_URL) : createFileTransport(env.MAIL_DIR, log),
    log,
    from: env.MAIL_FROM,
    pollMs: env.MAIL_POLL_INTERVAL,
  });
  // Pauses this replica records are told to the others (delivery/pauses.ts), bound once both exist.
  let announcePause: (endpointId: string, until: Date) => void = () => {};
  const engine = createEngine({
    db: database.db,
    box,
    sender,
    log,
    schedule: env.WEBHOOK_RETRY_SCHEDULE,
    warnAfterMs: env.WEBHOOK_WARN_AFTER,
    timeoutMs: env.WEBHOOK_TIMEOUT,
    leaseMarginMs: env.WEBHOOK_LEASE_MARGIN,
    groupCommitMs: env.WEBHOOK_RECORD_WINDOW,
    concurrency: env.WEBHOOK_CONCURRENCY,
    perEndpoint: env.WEBHOOK_ENDPOINT_CONCURRENCY,
    orderingWaitMs: env.WEBHOOK_ORDERING_WAIT,
    onNotify: () => mailer.wake(),
    onPause: (endpointId, until) => announcePause(endpointId, until),
    probeMs: env.WEBHOOK_PROBE_INTERVAL,
  });
  const pauses = sharePauses({
    nc,
    prefix: env.MCS_NATS_PREFIX,
    log,
    onPaused: (endpointId, until) => engine.paused(endpointId, until),
  });
  announcePause = pauses.announce;
  const consumer = await startConsumer({
    nc,
    names,
    db: database.db,
    log,
    leaseMs: engine.leaseMs,
    onQueued: (items) => engine.enqueue(items),
  });
  const prober = createProber({
    db: database.db,
    box,
    sender,
    log,
    intervalMs: env.WEBHOOK_PROBE_INTERVAL,
    leaseMs: engine.leaseMs,
    onRecovered: () => replayer.wake(),
    enqueue: (items) => engine.enqueue(items),
  });
  const replayer = createReplayer({
    db: database.db,
    log,
    rate: env.WEBHOOK_REPLAY_RATE,
    leaseMs: engine.leaseMs,
    enqueue: (items) => engine.enqueue(items),
    onTick: async () => {
      await prober.runDue();
    },
    ...(env.WEBHOOK_PROBE_INTERVAL < 1_000 ? { pollMs: env.WEBHOOK_PROBE_INTERVAL / 2 } : {}),
  });
  // Sealed idempotent answers (an endpoint's signing secret) need this service's secret too.
  const keys = createKeyStore(database.db, idempotencyKeys, {
    sealSecret: createHmac('sha256', key).update('mcs idempotent answers').digest(),
  });
  const replays = { rate: env.WEBHOOK_REPLAY_RATE, wake: () => replayer.wake() };
  const server = await startConnectServer({
    routes: routes({
      db: database.db,
      keys,
      box,
      policy,
      queue: engine,
      schedule: env.WEBHOOK_RETRY_SCHEDULE,
      replays,
    }),
    port: env.port,
    socketPath: env.socketPath,
    metricsPort: env.SERVICE_METRICS_PORT,
    interceptors: [errorLogger(log)],
    health: { dependencies: [databaseDependency(database.pool), natsDependency(nc)] },
  });
  const stopMetrics = registerScrapedMetrics({ db: database.db, nc, names });
  log.info({ port: server.port }, 'webhooks listening');
  const janitor = startKeyJanitor(keys, log);
  const retention = startRetention(database.db, log, env.WEBHOOK_RETENTION);
  const stop = async () => {
    janitor.stop();
    retention.stop();
    stopMetrics();
    await server.close();
    await consumer.stop();
    await replayer.stop();
    await engine.stop();
    pauses.stop();
    await mailer.stop();
    await sender.close();
    await nc.drain();
    await database.close();
  };
  return { server, stop };
}
