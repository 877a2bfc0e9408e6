// The gateway: REST ⇄ Connect for every proto route, API-key auth and the error envelope.
import http from 'node:http';
import { createClient, type Transport } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { SERVICES, type ServiceName, serviceUrl } from '@mcs/kit/config';
import { createLogger } from '@mcs/kit/log';
import { runProcess } from '@mcs/kit/server';
import { accounts } from '@mcs/proto';
import { createAuthenticator } from './auth.ts';
import { servePages } from './docs.ts';
import { loadEnv } from './env.ts';
import { createHandler, type UnaryCall } from './http.ts';
import { buildRoutes, createMatcher, type Route } from './routes.ts';

const env = loadEnv();
const log = createLogger('gateway', env.LOG_LEVEL);

await runProcess(log, async () => {
  const transports = new Map<ServiceName, Transport>(
    SERVICES.map((name) => [
      name,
      createConnectTransport({ baseUrl: serviceUrl(name), httpVersion: '2', useBinaryFormat: true }),
    ]),
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
  const auth = createAuthenticator(
    createClient(accounts.AccountService, transports.get('accounts')!),
    env.AUTH_CACHE_TTL,
  );
  const handler = createHandler({
    match: createMatcher(routes),
    clientFor,
    auth,
    docsUrl: env.docsUrl,
    log,
    pages: servePages,
  });
  const server = http.createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
    void handler(req, res);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(env.PORT, env.HOST, resolve);
  });
  log.info({ host: env.HOST, port: env.PORT, routes: routes.length }, 'gateway listening');
  return async () => {
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeIdleConnections();
    });
  };
});
