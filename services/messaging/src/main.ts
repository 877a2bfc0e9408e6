// The messaging service: conversations, messages and channel adapters, and their events.
// Its own process: the part (part.ts), stopped in order on SIGTERM/SIGINT.
import { createLogger } from '@mcs/kit/log';
import { runProcess } from '@mcs/kit/server';
import { loadEnv } from './env.ts';
import { startMessaging } from './part.ts';

const env = loadEnv();
const log = createLogger('messaging', env.LOG_LEVEL);

await runProcess(log, async () => (await startMessaging(env, log)).stop);
