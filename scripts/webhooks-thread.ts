// The webhooks service on a worker thread of the one process (scripts/one-process.ts): its own
// event loop and heap, so fan-out, signing and delivery run beside the API's work instead of
// between its requests. It starts as its own process would (part.ts), serves its port as usual
// (the gateway's calls to it go there, over HTTP), and stops when the main thread says so.
import { parentPort } from 'node:worker_threads';
import { createLogger } from '../packages/kit/src/log.ts';
import { initMetrics } from '../packages/kit/src/metrics.ts';
import { initTracing } from '../packages/kit/src/tracing.ts';
import { loadEnv } from '../services/webhooks/src/env.ts';
import { startWebhooks } from '../services/webhooks/src/part.ts';

/** What the thread tells the main thread. */
export type FromThread = { mcs: 'ready' } | { mcs: 'stopped' } | { mcs: 'failed'; message: string };

if (!parentPort)
  throw new Error('scripts/webhooks-thread.ts runs as a worker thread of scripts/one-process.ts');
const port = parentPort;
const env = loadEnv();
const log = createLogger('webhooks', env.LOG_LEVEL);
// A thread has a module graph of its own: its metrics registry (served on its port) and tracer.
initMetrics('webhooks');
await initTracing('webhooks');
try {
  const part = await startWebhooks(env, log);
  port.on('message', (m: { mcs?: string }) => {
    if (m?.mcs !== 'stop') return;
    part.stop().then(
      () => port.postMessage({ mcs: 'stopped' } satisfies FromThread),
      (err: Error) => port.postMessage({ mcs: 'failed', message: err.message } satisfies FromThread),
    );
  });
  port.postMessage({ mcs: 'ready' } satisfies FromThread);
} catch (err) {
  log.fatal({ err }, 'failed to start');
  port.postMessage({ mcs: 'failed', message: (err as Error).message } satisfies FromThread);
}
