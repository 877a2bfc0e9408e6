// The accounts service: accounts, their API keys (stored hashed) and plan limits.
// Its own process: the part (part.ts), stopped in order on SIGTERM/SIGINT.
import { createLogger } from '@mcs/kit/log';
import { runProcess } from '@mcs/kit/server';
import { loadEnv } from './env.ts';
import { startAccounts } from './part.ts';

const env = loadEnv();
const log = createLogger('accounts', env.LOG_LEVEL);

await runProcess(log, async () => (await startAccounts(env, log)).stop);
