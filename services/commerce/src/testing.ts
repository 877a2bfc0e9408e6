// The commerce service as its handler tests use it (see startServiceUnderTest in @mcs/testkit).
import { createKeyStore, idempotencyKeys } from '@mcs/kit/idempotency';
import { type ServiceUnderTest, startServiceUnderTest } from '@mcs/testkit';
import { migrateCommerce } from './db/migrate.ts';
import type { Deps } from './deps.ts';
import { sandboxProviders } from './providers/sandbox.ts';
import { routes } from './routes.ts';

export { callerMeta as as } from '@mcs/testkit';

export type CommerceUnderTest = ServiceUnderTest<Deps>;

export function startCommerce(): Promise<CommerceUnderTest> {
  return startServiceUnderTest<Deps>({
    migrate: migrateCommerce,
    schema: 'commerce',
    deps: (h) => ({
      db: h.db.db,
      keys: createKeyStore(h.db.db, idempotencyKeys),
      relay: h.relay,
      payments: sandboxProviders(),
    }),
    routes,
  });
}
