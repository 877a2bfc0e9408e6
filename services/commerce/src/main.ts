// The commerce service: products, orders and payments, and their events (via the outbox).
// Its own process: the part (part.ts), stopped in order on SIGTERM/SIGINT.
import { createLogger } from '@mcs/kit/log';
import { runProcess } from '@mcs/kit/server';
import { loadEnv } from './env.ts';
import { startCommerce } from './part.ts';

const env = loadEnv();
const log = createLogger('commerce', env.LOG_LEVEL);

await runProcess(log, async () => (await startCommerce(env, log)).stop);
