// The whole stack in one Node process: `MCS_ONE_PROCESS=true pnpm start` (scripts/start.ts) runs
// this instead of a process per part. Every part starts as it does in a process of its own and
// still serves Connect, gRPC and gRPC-Web on its port, with its own database pool and NATS
// connection. Two threads:
//
// - the main thread: accounts, commerce and messaging, then the gateway, whose calls to those
//   three go straight to their implementations (kit/in-process) instead of over HTTP: the API's
//   path (REST in, one statement, answer out) wakes one process, not two;
// - a worker thread: the webhooks service (scripts/webhooks-thread.ts), whose fan-out, signing and
//   deliveries would otherwise run between the API's requests on one event loop. The gateway
//   reaches it at its port (its calls are the endpoint and event routes, off the write path).
//
// For a small machine (docs/operations.md, "One process"). Kubernetes and replicas keep a process per part
// (deploy/): a crash or a deploy then takes down one part, not all. The thread stopping on its own
// ends the process (exit 1), so its supervisor starts everything again.
import { Worker } from 'node:worker_threads';
import { loadEnv as gatewayEnv } from '../gateway/src/env.ts';
import { startGateway } from '../gateway/src/part.ts';
import { createLogger, type Logger } from '../packages/kit/src/log.ts';
import { runProcess, type StartedPart } from '../packages/kit/src/server.ts';
import { loadEnv as accountsEnv } from '../services/accounts/src/env.ts';
import { startAccounts } from '../services/accounts/src/part.ts';
import { loadEnv as commerceEnv } from '../services/commerce/src/env.ts';
import { startCommerce } from '../services/commerce/src/part.ts';
import { loadEnv as messagingEnv } from '../services/messaging/src/env.ts';
import { startMessaging } from '../services/messaging/src/part.ts';
import type { FromThread } from './webhooks-thread.ts';

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
    started.push(await startWebhooksThread(log));
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

/** Starts the webhooks thread; resolves once it is up, with how to stop it. */
function startWebhooksThread(log: Logger): Promise<{ stop(): Promise<void> }> {
  const worker = new Worker(new URL('./webhooks-thread.ts', import.meta.url));
  let up = false;
  let stopping = false;
  let stopped: (() => void) | undefined;
  const stop = async () => {
    stopping = true;
    const done = new Promise<void>((resolve) => {
      stopped = resolve;
    });
    worker.postMessage({ mcs: 'stop' });
    await done;
    await worker.terminate();
  };
  return new Promise((resolve, reject) => {
    worker.on('message', (m: FromThread) => {
      if (m.mcs === 'ready') {
        up = true;
        resolve({ stop });
      } else if (m.mcs === 'stopped') stopped?.();
      else if (m.mcs === 'failed') {
        if (!up) reject(new Error(`the webhooks thread failed to start: ${m.message}`));
        else if (stopping) {
          log.error({ err: m.message }, 'the webhooks thread did not stop cleanly');
          stopped?.();
        }
      }
    });
    worker.on('error', (err) => {
      if (!up) return reject(err);
      log.fatal({ err }, 'the webhooks thread crashed: exiting, to be started again');
      process.exit(1);
    });
    worker.on('exit', (code) => {
      if (!up) return reject(new Error(`the webhooks thread exited (${code}) before it was up`));
      if (stopping) return;
      log.fatal({ code }, 'the webhooks thread exited: exiting, to be started again');
      process.exit(1);
    });
  });
}
