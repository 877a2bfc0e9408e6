// The gateway: REST ⇄ Connect for every proto route, API keys, rate limits, idempotency, the
// error envelope, the OpenAPI document, the docs and the dashboard (Settings → API).
// Its own process: the part (part.ts), stopped in order on SIGTERM/SIGINT.
import { createLogger } from '@mcs/kit/log';
import { runProcess } from '@mcs/kit/server';
import { loadEnv } from './env.ts';
import { startGateway } from './part.ts';

const env = loadEnv();
const log = createLogger('gateway', env.LOG_LEVEL);

await runProcess(log, async () => (await startGateway(env, log)).stop);
