// The commerce service: products, orders and payments, and their events (via the outbox).
// Started by main.ts in a process of its own, or with the gateway and two other services in one (scripts/one-process.ts).

import { idempotencyKeys } from '@mcs/kit/idempotency';
import type { Logger } from '@mcs/kit/log';
import { startOutboxPart } from '@mcs/kit/outbox-part';
import type { StartedPart } from '@mcs/kit/server';
import { migrateCommerce } from './db/migrate.ts';
import type { Env } from './env.ts';
import { sandboxProviders } from './providers/sandbox.ts';
import { routes } from './routes.ts';

export function startCommerce(env: Env, log: Logger): Promise<StartedPart> {
  return startOutboxPart({
    name: 'commerce',
    env,
    log,
    migrate: migrateCommerce,
    idempotencyKeys,
    routes: (deps) => routes({ ...deps, payments: sandboxProviders() }),
  });
}
