// The whole stack in one Node process: `MCS_ONE_PROCESS=true pnpm start` (scripts/start.ts) runs
// this instead of a process per part. Every part starts as it does in a process of its own and
// still serves Connect, gRPC and gRPC-Web on its port, with its own database pool and NATS
// connection (its outbox relay, the webhooks consumer). Then the gateway, whose unary calls to the
// four services go straight to their implementations (kit/in-process) instead of over HTTP: the
// API's path (REST in, one statement, answer out) wakes one process, not two.
//
// One event loop for all of them. The webhooks service ran on a worker thread of its own for a
// while; in `pnpm bench` on 2 cores that gave the same throughput and worse latency at half load
// (ingest p50 6–14 ms against 4.5–7 ms on one loop, p99 4.7–10× bare against 3–3.9×): the thread's
// deliveries competed with the API's requests for the two cores, where on one loop they fill the
// gaps between requests.
//
// For a small machine (docs/operations.md, "One process"). Kubernetes and replicas keep a process
// per part (deploy/): a crash or a deploy then takes down one part, not all.
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
const log = createLogger('one-process', env.LOG_LEVEL);

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
