// The webhooks service: endpoints, the event log, fan-out from JetStream, signed deliveries
// with retries and endpoint health, and the unhealthy e-mail.
// Its own process: the part (part.ts), stopped in order on SIGTERM/SIGINT.
import { createLogger } from '@mcs/kit/log';
import { runProcess } from '@mcs/kit/server';
import { loadEnv } from './env.ts';
import { startWebhooks } from './part.ts';
import { yieldCpu } from './priority.ts';

const env = loadEnv();
const log = createLogger('webhooks', env.LOG_LEVEL);
const yielded = yieldCpu(env.WEBHOOK_NICE);
if (yielded && 'error' in yielded)
  log.warn({ nice: env.WEBHOOK_NICE, err: yielded.error }, 'could not lower the process priority');

await runProcess(log, async () => (await startWebhooks(env, log)).stop);
