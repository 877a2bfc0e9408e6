// The real server on port 0, called by a stock @grpc/grpc-js client: plain gRPC works.
import * as grpc from '@grpc/grpc-js';
import { createLogger } from '@mcs/kit/log';
import { errorLogger, type ServerHandle, startConnectServer } from '@mcs/kit/server';
import { accounts } from '@mcs/proto';
import { freshDatabase, grpcClient, type MigratedDatabase } from '@mcs/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateAccounts } from './db/migrate.ts';
import { routes } from './routes.ts';

let database: MigratedDatabase;
let server: ServerHandle;
let client: ReturnType<typeof grpcClient>;
const rpc = accounts.AccountService.method;

beforeAll(async () => {
  database = await freshDatabase(migrateAccounts);
  server = await startConnectServer({
    routes: routes({ db: database.db }),
    port: 0,
    interceptors: [errorLogger(createLogger('accounts-test', 'silent'))],
  });
  client = grpcClient(`127.0.0.1:${server.port}`);
});
afterAll(async () => {
  client?.close();
  await server?.close();
  await database?.close();
});

describe('AccountService over gRPC', () => {
  it('creates an account and authenticates its key', async () => {
    const made = await client.call(rpc.createAccount, { email: 'grpc@example.com', rateLimit: 9 });
    expect(made.account).toMatchObject({ email: 'grpc@example.com', name: 'grpc', rateLimit: 9 });
    expect(made.liveSecretKey).toMatch(/^sk_live_[0-9A-Za-z]{32,}$/);

    const who = await client.call(rpc.authenticateKey, { key: made.liveSecretKey });
    expect(who).toMatchObject({
      accountId: made.account!.id,
      livemode: true,
      kind: accounts.KeyKind.SECRET,
      rateLimit: 9,
    });
  });

  it('answers gRPC status codes for errors', async () => {
    const err = await client.call(rpc.authenticateKey, { key: `sk_test_${'x'.repeat(40)}` }).catch((e) => e);
    expect((err as grpc.ServiceError).code).toBe(grpc.status.UNAUTHENTICATED);
    const missing = await client.call(rpc.getAccount, { id: 'acct_none' }).catch((e) => e);
    expect((missing as grpc.ServiceError).code).toBe(grpc.status.NOT_FOUND);
  });
});
