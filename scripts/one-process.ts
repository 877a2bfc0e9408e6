// The API's path in one Node process: `MCS_ONE_PROCESS=true pnpm start` (scripts/start.ts) runs
// this, `mcs`, in place of the gateway and the accounts, commerce and messaging services; the
// webhooks service keeps a process of its own (services/webhooks/src/main.ts, at niceness 10,
// WEBHOOK_NICE). Every part here starts as it does in a process of its own and still serves
// Connect, gRPC and gRPC-Web on its port, with its own database pool and NATS connection (its
// outbox relay). Then the gateway, whose unary calls to the three services go straight to their
// implementations (kit/in-process) instead of over HTTP: the API's path (REST in, one statement,
// answer out) wakes one process, not two. Its calls to the webhooks service go over its port.
//
// Why the webhooks service stays apart: its work (fan-out, deliveries, their records) is in
// batches, off the request path, and on one event loop every batch delayed the requests queued
// behind it. Apart and at niceness 10 it takes the CPU the API leaves. Side by side on 2 cores,
// keyed orders paced at 1,150/s, eight alternated rounds (test/bench/ab-latency.ts): p99 median
// 23.5 ms against 40.2 with webhooks in this process too, lower in 7 rounds of 8; at 1,100/s
// 23.9 ms against 40.1 for a process per part. Keyed throughput is that of the all-in-one process
// (`pnpm bench ingest`: 0.87–1.06× the bare server against 0.89×). (A worker thread for webhooks,
// at the API's priority, was tried earlier and was worse than one loop: its deliveries competed
// with the API's requests for the two cores.)
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
    started.push(
      await startGateway(env, createLogger('gateway', env.LOG_LEVEL), {
        local: { accounts, commerce, messaging },
      }),
    );
  } catch (err) {
    await stop().catch(() => {});
    throw err;
  }
  return stop;
});
