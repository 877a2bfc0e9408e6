// The messaging service as its handler tests use it: real routes over a fresh database, the real
// outbox relay into a fresh JetStream namespace, a probe on that stream, an in-memory Connect
// transport and a real HTTP/2 server for stock gRPC clients.
import type { DescService } from '@bufbuild/protobuf';
import { type Client, createClient, createRouterTransport } from '@connectrpc/connect';
import { CALLER_HEADERS } from '@mcs/kit/caller';
import { type ServerHandle, startConnectServer } from '@mcs/kit/server';
import { grpcClient, type ServiceHarness, startServiceHarness } from '@mcs/testkit';
import { sandboxChannels } from './channels/sandbox.ts';
import { migrateMessaging } from './db/migrate.ts';
import type { Deps } from './deps.ts';
import { routes } from './routes.ts';

export interface MessagingUnderTest {
  h: ServiceHarness;
  deps: Deps;
  server: ServerHandle;
  /** A Connect client over the in-memory router transport. */
  client<S extends DescService>(service: S): Client<S>;
  grpc(): ReturnType<typeof grpcClient>;
  close(): Promise<void>;
}

export async function startMessaging(): Promise<MessagingUnderTest> {
  const h = await startServiceHarness({ migrate: migrateMessaging, schema: 'messaging' });
  const deps: Deps = { db: h.db.db, relay: h.relay, channels: sandboxChannels() };
  const transport = createRouterTransport(routes(deps));
  const server = await startConnectServer({ routes: routes(deps), port: 0 });
  return {
    h,
    deps,
    server,
    client: (service) => createClient(service, transport),
    grpc: () => grpcClient(`127.0.0.1:${server.port}`),
    async close() {
      await server.close();
      await h.close();
    },
  };
}

/** Caller metadata as the gateway sends it. */
export function as(accountId: string, opts: { livemode?: boolean; idempotencyKey?: string } = {}) {
  const headers: Record<string, string> = {
    [CALLER_HEADERS.account]: accountId,
    [CALLER_HEADERS.livemode]: String(opts.livemode ?? false),
  };
  if (opts.idempotencyKey) headers[CALLER_HEADERS.idempotencyKey] = opts.idempotencyKey;
  return headers;
}
