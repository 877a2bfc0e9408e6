// The whole stack in one Node process: `MCS_ONE_PROCESS=true pnpm start` (scripts/start.ts) runs
// this instead of a process per part. The four services start as they do in their own
// processes — each still serves Connect, gRPC and gRPC-Web on its port and keeps its own
// database pool and NATS connection — and then the gateway, whose calls to them go straight to
// their implementations (kit/in-process) instead of over HTTP. Same code paths otherwise.
//
// For a small machine: on 2 cores it saves the hop's HTTP and encoding on both sides and the
// wake-ups of two more processes per call (README, "One process"). Kubernetes and replicas keep
// one process per part (deploy/): a crash or a deploy then takes down one part, not all.

import { loadEnv as gatewayEnv } from '../gateway/src/env.ts';
import { startGateway } from '../gateway/src/part.ts';
import { createLogger } from '../packages/kit/src/log.ts';
import { runProcess, type StartedPart } from '../packages/kit/src/server.ts';
import { loadEnv as accountsEnv } from '../services/accounts/src/env.ts';
import { startAccounts } from '../services/accounts/src/part.ts';
import { loadEnv as commerceEnv } from '../services/commerce/src/env.ts';
import { startCommerce } from '../services/commerce/src/part.ts';
import { loadEnv as messagingEnv } from '../services/messaging/src/env.ts';
import { startMessaging } from '../services/messaging/src/part.ts';
import { loadEnv as webhooksEnv } from '../services/webhooks/src/env.ts';
import { startWebhooks } from '../services/webhooks/src/part.ts';

const env = gatewayEnv();
const log = createLogger('mcs', env.LOG_LEVEL);

await runProcess(log, async () => {
  const started: Array<{ stop(): Promise<void> }> = [];
  const stop = async () => {
    // The gateway first (no new calls), then the services in reverse order of start.
    for (const part of started.reverse()) await part.stop();
  };
  try {
    const part = async <E extends { LOG_LEVEL: string }>(
      name: string,
      load: () => E,
      start: (env: E, log: ReturnType<typeof createLogger>) => Promise<StartedPart>,
    ) => {
      const e = load();
      const p = await start(e, createLogger(name, e.LOG_LEVEL));
      started.push(p);
      return p.server;
    };
    const accounts = await part('accounts', accountsEnv, startAccounts);
    const commerce = await part('commerce', commerceEnv, startCommerce);
    const messaging = await part('messaging', messagingEnv, startMessaging);
    const webhooks = await part('webhooks', webhooksEnv, startWebhooks);
    started.push(
      await startGateway(env, createLogger('gateway', env.LOG_LEVEL), {
        local: { accounts, commerce, messaging, webhooks },
      }),
    );
  } catch (err) {
    await stop().catch(() => {});
    throw err;
  }
  return stop;
});
