// Helpers for a service's own tests: a migrated database of its own, a stock gRPC client, and
// reading the catalog error a call failed with.
import {
  create,
  type DescMethodUnary,
  fromBinary,
  type Message,
  type MessageInitShape,
  type MessageShape,
  toBinary,
} from '@bufbuild/protobuf';
import { ConnectError } from '@connectrpc/connect';
import * as grpc from '@grpc/grpc-js';
import { createDatabase, type Database, type Tx } from '@mcs/kit/db';
import { api } from '@mcs/proto';
import { createTestDatabase } from './db.ts';
import { until } from './until.ts';

export interface MigratedDatabase extends Database {
  url: string;
}

/** A fresh database, migrated by `migrate`; `close()` also drops it. */
export async function freshDatabase(
  migrate: (db: Database) => Promise<void>,
  name = 'test',
): Promise<MigratedDatabase> {
  const testDb = await createTestDatabase();
  const database = createDatabase(testDb.url, { name, max: 4 });
  try {
    await migrate(database);
  } catch (err) {
    await database.close();
    await testDb.drop();
    throw err;
  }
  return {
    ...database,
    url: testDb.url,
    async close() {
      await database.close();
      await testDb.drop();
    },
  };
}

/**
 * Two writers of one row, in order: `first` runs in a transaction that stays open until `second`
 * (in another) is seen waiting for a lock, then commits; answers both results. For checking what
 * a change that waited for a row's lock does after the change it waited for.
 */
export async function secondWaitsForFirst<A, B>(
  db: Database,
  first: (tx: Tx) => Promise<A>,
  second: (tx: Tx) => Promise<B>,
): Promise<[A, B]> {
  let commit!: () => void;
  const held = new Promise<void>((resolve) => {
    commit = resolve;
  });
  let locked!: () => void;
  const isLocked = new Promise<void>((resolve) => {
    locked = resolve;
  });
  const a = db.db.transaction(async (tx) => {
    const out = await first(tx);
    locked();
    await held;
    return out;
  });
  // Should `first` fail before it holds anything, say so rather than wait for ever.
  await Promise.race([isLocked, a]);
  const b = db.db.transaction((tx) => second(tx));
  await until('the second writer waiting for a lock', async () => {
    const { rows } = await db.pool.query<{ n: number }>(
      "select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'",
    );
    return rows[0]!.n > 0;
  });
  commit();
  return [await a, await b];
}

/** Awaits `p`, expecting a ConnectError; returns the catalog code and param it carries. */
export async function apiErrorOf(
  p: Promise<unknown>,
): Promise<{ code: string; param: string; err: ConnectError }> {
  try {
    await p;
  } catch (e) {
    const err = ConnectError.from(e);
    const [detail] = err.findDetails(api.ErrorDetailSchema);
    return { code: detail?.code ?? '(no detail)', param: detail?.param ?? '', err };
  }
  throw new Error('expected the call to fail');
}

/** A stock @grpc/grpc-js client, so tests prove plain gRPC works against our Connect servers. */
export function grpcClient(address: string) {
  const client = new grpc.Client(address, grpc.credentials.createInsecure());
  return {
    call<M extends DescMethodUnary>(
      method: M,
      req: MessageInitShape<M['input']>,
      metadata: Record<string, string> = {},
    ): Promise<MessageShape<M['output']>> {
      const md = new grpc.Metadata();
      for (const [k, v] of Object.entries(metadata)) md.set(k, v);
      return new Promise((resolve, reject) => {
        client.makeUnaryRequest<Message, MessageShape<M['output']>>(
          `/${method.parent.typeName}/${method.name}`,
          (m) => Buffer.from(toBinary(method.input, m)),
          (b) => fromBinary(method.output, b) as MessageShape<M['output']>,
          create(method.input, req),
          md,
          (err, res) => (err || !res ? reject(err) : resolve(res)),
        );
      });
    },
    close: () => client.close(),
  };
}
