// The messaging service: conversations, messages and channel adapters, and their events.
// Started by main.ts in a process of its own, or with the gateway and two other services in one (scripts/one-process.ts).

import { idempotencyKeys } from '@mcs/kit/idempotency';
import type { Logger } from '@mcs/kit/log';
import { startOutboxPart } from '@mcs/kit/outbox-part';
import type { StartedPart } from '@mcs/kit/server';
import { sandboxChannels } from './channels/sandbox.ts';
import { migrateMessaging } from './db/migrate.ts';
import type { Env } from './env.ts';
import { routes } from './routes.ts';

export function startMessaging(env: Env, log: Logger): Promise<StartedPart> {
  return startOutboxPart({
    name: 'messaging',
    env,
    log,
    migrate: migrateMessaging,
    idempotencyKeys,
    routes: (deps) => routes({ ...deps, channels: sandboxChannels() }),
  });
}
