// The gateway: REST ⇄ Connect for every proto route, API keys, rate limits, idempotency, the
// error envelope, the OpenAPI document, the docs and the dashboard (Settings → API).
// Started by main.ts in a process of its own, or with three services in one (scripts/one-process.ts).
import http from 'node:http';
import type { Socket } from 'node:net';
import { createClient, type Transport } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { SERVICES, type ServiceName, serviceSocket, serviceUrl } from '@mcs/kit/config';
import { createDatabase } from '@mcs/kit/db';
import { createInProcessTransport } from '@mcs/kit/in-process';
import type { Logger } from '@mcs/kit/log';
import { startMetricsServer } from '@mcs/kit/metrics';
import { connectNats, keyRevocationSubject, ownerPasswordSubject } from '@mcs/kit/nats';
import { closingResponse, type ServerHandle } from '@mcs/kit/server';
import { accounts, grpcHealth, webhooks } from '@mcs/proto';
import { createAuthenticator } from './auth.ts';
import { type Circuit, createCircuit } from './circuit.ts';
import { clientAddressOf } from './client-address.ts';
import { createDashboard } from './dashboard/handler.ts';
import { createSessionStore } from './dashboard/sessions.ts';
import { migrateGateway } from './db/migrate.ts';
import { createPages } from './docs.ts';
import type { Env } from './env.ts';
import { clientErrorResponse, createHandler, type UnaryCall } from './http.ts';
import { createListen } from './listen.ts';
import { buildOpenApi } from './openapi.ts';
import { createPgTokenStore, createSharedRateLimiter } from './rate-limit.ts';
import { buildRoutes, createMatcher, type Route } from './routes.ts';
import { createUnaryTransport } from './transport.ts';

/** A request's head (its line and headers) must arrive within this (or REQUEST_TIMEOUT if shorter). */
const HEAD_TIMEOUT_MS = 20_000;

export interface GatewayOptions {
  /**
   * Services running in this same process: their calls go to them directly
   * (kit/in-process) instead of over HTTP; the others are reached at their URLs.
   */
  local?: Partial<Record<ServiceName, Pick<ServerHandle, 'invoke'>>>;
}

/** `work`, or an error naming `what` once `ms` have passed without an answer. */
async function within<T>(ms: number, what: string, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not answer within ${ms / 1000} s`)), ms);
  });
  try {
    return await Promise.race([
      work.catch((err: Error) => {
        throw new Error(`${what}: ${err.message}`);
      }),
      late,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

export async function startGateway(
  env: Env,
  log: Logger,
  opts: GatewayOptions = {},
): Promise<{ stop(): Promise<void> }> {
  const database = createDatabase(env.DATABASE_URL, { name: 'gateway', max: 16 });
  await migrateGateway(database);
  const sessions = createSessionStore(database.db);
  const sweep = () =>
    sessions.sweep().then(
      (n) => n > 0 && log.info({ removed: n }, 'expired dashboard sessions removed'),
      (err) => log.warn({ err: (err as Error).message }, 'session sweep failed'),
    );
  void sweep();
  const janitor = setInterval(sweep, 3_600_000);
  janitor.unref();

  // The hop to the services: Connect, binary, unary calls on the gateway's own lean transport
  // (transport.ts), which cuts connect-node's per-call machinery. Over HTTP/1.1 keep-alive by
  // default: a node:http2 client stream outlives the young-generation collections, so under load
  // every call promoted a few KB and the gateway ran a major GC every few seconds (closed-loop
  // keyed orders: see transport.ts); its CPU per call is no higher than HTTP/2's.
  // SERVICE_TRANSPORT=http2 multiplexes them on one HTTP/2 connection per service instead, and
  // SERVICE_TRANSPORT=connect-node uses connect-node's HTTP/2 transport for every call. Streaming
  // calls (listen) always take connect-node's HTTP/2 transport. Services serve all of them on one
  // port. Every call to a service passes its circuit (circuit.ts): while the service or its
  // database is down, calls are refused here at once (503) instead of each one trying to reach it.
  const circuits: Circuit[] = [];
  const transports = new Map<ServiceName, Transport>(
    SERVICES.map((name) => {
      let guarded: Transport | undefined;
      const circuit = createCircuit(name, {
        // Back when it answers and its database does (kit/health: a Check of `postgres`).
        probe: async () =>
          (
            await createClient(grpcHealth.Health, guarded!).check(
              { service: 'postgres' },
              { timeoutMs: 1_000 },
            )
          ).status === grpcHealth.HealthCheckResponse_ServingStatus.SERVING,
        onChange: (down, err) =>
          down
            ? log.warn(
                { service: name, err: err?.message },
                'service down: its calls are refused at once until it answers again',
              )
            : log.info({ service: name }, 'service back'),
      });
      circuits.push(circuit);
      const h2 = createConnectTransport({
        baseUrl: serviceUrl(name),
        httpVersion: '2',
        useBinaryFormat: true,
        // While calls are open (a listen session's stream may be open for hours), a PING every
        // 10 s: a connection whose service vanished without a word fails its calls within 15 s
        // instead of never (transport.ts H2_PING_TIMEOUT_MS does the same for unary calls).
        pingIntervalMs: 10_000,
        pingTimeoutMs: 5_000,
      });
      const local = opts.local?.[name];
      const transport: Transport = local
        ? createInProcessTransport(local, h2)
        : env.SERVICE_TRANSPORT === 'connect-node'
          ? h2
          : createUnaryTransport(serviceUrl(name), h2, {
              httpVersion: env.SERVICE_TRANSPORT === 'http2' ? '2' : '1.1',
              socketPath: serviceSocket(name),
            });
      guarded = circuit.guard(transport);
      return [name, guarded];
    }),
  );
  const routes = buildRoutes();
  const clients = new Map<string, Record<string, UnaryCall>>();
  const clientFor = (route: Route) => {
    let c = clients.get(route.service.typeName);
    if (!c) {
      c = createClient(route.service, transports.get(route.owner)!) as unknown as Record<string, UnaryCall>;
      clients.set(route.service.typeName, c);
    }
    return c;
  };
  const accountsClient = createClient(accounts.AccountService, transports.get('accounts')!);
  const auth = createAuthenticator(accountsClient, env.AUTH_CACHE_TTL);
  const clientAddress = clientAddressOf(env.TRUSTED_PROXIES);
  const dashboard = createDashboard({
    sessions,
    auth,
    accounts: accountsClient,
    webhooks: createClient(webhooks.WebhookEndpointService, transports.get('webhooks')!),
    events: createClient(webhooks.EventService, transports.get('webhooks')!),
    settings: createClient(webhooks.WebhookSettingsService, transports.get('webhooks')!),
    docsUrl: env.docsUrl,
    log,
    keyCheckTtlMs: env.AUTH_CACHE_TTL,
    clientAddress,
  });

  // Revocations reach every replica at once; the cache TTL bounds staleness if NATS is down
  // (for dashboard sessions too: each re-checks its key after that TTL).
  const nc = await connectNats(env.NATS_URL, 'gateway', log);
  const revocations = nc.subscribe(keyRevocationSubject(env.MCS_NATS_PREFIX), {
    callback: (err, msg) => {
      if (err) return;
      const keyId = msg.string();
      auth.forget(keyId);
      dashboard.keyRevoked(keyId).then(
        (n) => n > 0 && log.info({ keyId, sessions: n }, 'dashboard sessions of a revoked key ended'),
        (e) => log.warn({ keyId, err: (e as Error).message }, 'could not end sessions of a revoked key'),
      );
    },
  });

  const passwords = nc.subscribe(ownerPasswordSubject(env.MCS_NATS_PREFIX), {
    callback: (err, msg) => {
      if (err) return;
      const accountId = msg.string();
      dashboard.ownerPasswordSet(accountId).then(
        (n) => n > 0 && log.info({ accountId, sessions: n }, 'owner sessions ended: password replaced'),
        (e) => log.warn({ accountId, err: (e as Error).message }, 'could not end owner sessions'),
      );
    },
  });

  const listen = createListen({
    nc,
    prefix: env.MCS_NATS_PREFIX,
    webhooks: createClient(webhooks.WebhookEndpointService, transports.get('webhooks')!),
    log,
    heartbeatMs: env.LISTEN_PING_INTERVAL,
  });
  const handler = createHandler({
    match: createMatcher(routes),
    clientFor,
    auth,
    limiter: createSharedRateLimiter({
      store: createPgTokenStore(database.pool),
      replicas: env.RATE_LIMIT_REPLICAS,
      onStoreError: (err) =>
        log.warn({ err: err.message }, 'shared rate limits unreachable: per-replica limits for 1 s'),
    }),
    docsUrl: env.docsUrl,
    log,
    pages: createPages(buildOpenApi(routes, env.docsUrl.replace(/\/docs$/, '')), async () => {
      // Ready when both stores answer, each within 2 s (a frozen one never would): the
      // database and NATS.
      await within(2_000, 'PostgreSQL', database.pool.query('select 1'));
      if (nc.isClosed()) throw new Error('NATS: connection closed');
      await within(2_000, 'NATS', nc.flush());
    }),
    dashboard: dashboard.handle,
    listen,
    clientAddress,
    failpoint: env.MCS_FAILPOINT,
  });
  // Stopping ends every connection: idle ones at once, busy ones with their answer, which says
  // `Connection: close` when its head is still unwritten. Otherwise a client that keeps its
  // connection alive after an answer given while stopping (most do, for up to a minute) would
  // hold server.close() open until the grace time ran out and the process exited 1 without
  // stopping what comes after the gateway (in one process: the three services with it).
  // (One shared listener, no closure per request; no collection of the requests in progress
  // either: kit/server closingResponse.)
  let closing = false;
  const closeIdle = () => server.closeIdleConnections();
  function answered() {
    // An answer whose head went out before the stop: its connection is idle only now.
    if (closing) setImmediate(closeIdle);
  }
  const server = http.createServer(
    {
      keepAliveTimeout: 65_000,
      requestTimeout: env.REQUEST_TIMEOUT,
      headersTimeout: Math.min(HEAD_TIMEOUT_MS, env.REQUEST_TIMEOUT),
      // How often Node looks for requests past those times (default 30 s, which would let a
      // 60 s limit run to 90).
      connectionsCheckingInterval: Math.min(1_000, env.REQUEST_TIMEOUT),
      ServerResponse: closingResponse(() => closing),
      // Node would answer a missing Host with a bare, empty 400; the handler refuses it in the envelope.
      requireHostHeader: false,
    },
    (req, res) => {
      res.on('close', answered);
      void handler(req, res);
    },
  );
  // Connections that never sent a request (a browser's preconnect; fetch opens a spare one when
  // a streamed answer is cancelled) count as busy to Node: closeIdleConnections() leaves them,
  // so one held the stop until its grace time ran out (exit 1). Stopping ends them at once.
  const sockets = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  // A request Node's parser refuses (a control character in a header, headers over 16 KiB) is
  // answered in the error envelope with a Request-Id, as every other answer, not Node's bare 400.
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    const answer = socket.writable ? clientErrorResponse(err, env.docsUrl) : null;
    const started = (socket as { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent;
    if (answer === null || started) socket.destroy();
    else socket.end(answer);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(env.PORT, env.HOST, resolve);
  });
  // Prometheus scrapes the gateway on a port of its own, on the internal address the services
  // bind (SERVICE_HOST), so /metrics is never on the public API.
  const metricsServer =
    env.metricsPort === 0
      ? undefined
      : await startMetricsServer(env.metricsPort, process.env.SERVICE_HOST ?? '127.0.0.1');
  log.info(
    { host: env.HOST, port: env.PORT, metricsPort: env.metricsPort, routes: routes.length },
    'gateway listening',
  );
  const stop = async () => {
    listen.close(); // open mcs listen streams would hold the server open
    for (const c of circuits) c.close();
    closing = true;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeIdleConnections();
      for (const socket of sockets) if (socket.bytesRead === 0) socket.destroy();
    });
    metricsServer?.close();
    metricsServer?.closeAllConnections();
    revocations.unsubscribe();
    passwords.unsubscribe();
    await nc.drain();
    await database.close();
  };
  return { stop };
}
