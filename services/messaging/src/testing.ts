// The messaging service as its handler tests use it (see startServiceUnderTest in @mcs/testkit).
import { createKeyStore, idempotencyKeys } from '@mcs/kit/idempotency';
import { type ServiceUnderTest, startServiceUnderTest } from '@mcs/testkit';
import { sandboxChannels } from './channels/sandbox.ts';
import { migrateMessaging } from './db/migrate.ts';
import type { Deps } from './deps.ts';
import { routes } from './routes.ts';

export { callerMeta as as } from '@mcs/testkit';

export type MessagingUnderTest = ServiceUnderTest<Deps>;

export function startMessaging(): Promise<MessagingUnderTest> {
  return startServiceUnderTest<Deps>({
    migrate: migrateMessaging,
    schema: 'messaging',
    deps: (h) => ({
      db: h.db.db,
      keys: createKeyStore(h.db.db, idempotencyKeys),
      relay: h.relay,
      channels: sandboxChannels(),
    }),
    routes,
  });
}
