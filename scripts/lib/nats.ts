// A local nats-server with JetStream for `pnpm start` when NATS_URL is not given.
import { mkdirSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import {
  type Child,
  findExecutable,
  log,
  portOpen,
  StartupError,
  spawnChild,
  stopLeftBehind,
  waitForPort,
} from './proc.ts';

export const SPAWNED_NATS_PORT = 4229;
const HOST = '127.0.0.1';

/** Path of nats-server (PATH, then the usual sbin directories); exits start-up clearly if there is none. */
export function findNatsServer(): string {
  const binary = findExecutable('nats-server', ['/usr/sbin', '/usr/local/sbin', '/usr/local/bin']);
  if (!binary) {
    throw new StartupError(
      'nats-server was not found on PATH (nor in /usr/sbin). Install nats-server ' +
        '(e.g. `apt-get install nats-server`, `brew install nats-server`, or a release from ' +
        'https://github.com/nats-io/nats-server/releases), or set NATS_URL to a NATS server with JetStream.',
    );
  }
  return binary;
}

/**
 * The Go scheduler's processors (GOMAXPROCS) of the spawned nats-server, unless the environment
 * sets GOMAXPROCS: a quarter of the machine's cores, at least one. NATS carries a small share of
 * the stack's work (four messages per API write), and with a processor per core its goroutines
 * handed each message between OS threads: on 2 cores at 300 keyed orders/s it woke 8.6–9.3 times
 * per order and used 0.47–0.50 ms of CPU per order; with one processor 5.3–5.7 wake-ups and
 * 0.40–0.41 ms (−15 to −18 %), and 0.067–0.075 ms instead of 0.080–0.096 ms per order at
 * saturation (paced and closed runs of the bench stack against a nats-server started beside it,
 * 4 pairs).
 */
export function natsProcessors(env: NodeJS.ProcessEnv = process.env, cores = availableParallelism()): string {
  const given = env.GOMAXPROCS?.trim();
  return given ? given : String(Math.max(1, Math.floor(cores / 4)));
}

/**
 * Spawns `nats-server -js` on 127.0.0.1:4229 storing under `storeDir` and waits until it answers.
 * `onSpawn` receives the child as soon as it exists, so the caller can stop it even if waiting fails.
 */
export async function startNats(opts: {
  binary: string;
  storeDir: string;
  cwd: string;
  signal: AbortSignal;
  onSpawn: (child: Child) => void;
}): Promise<string> {
  const pidFile = join(opts.storeDir, 'nats-server.pid');
  const left = await stopLeftBehind(pidFile, 'nats-server', 'SIGTERM');
  if (left) log.info(`stopped the nats-server (pid ${left}) a killed \`pnpm start\` left running`);
  if (await portOpen(HOST, SPAWNED_NATS_PORT)) {
    throw new StartupError(
      `port ${SPAWNED_NATS_PORT} is already in use (another \`pnpm start\` running?); stop it or set NATS_URL`,
    );
  }
  mkdirSync(opts.storeDir, { recursive: true });
  const child = spawnChild(
    'nats',
    opts.binary,
    ['-js', '-a', HOST, '-p', String(SPAWNED_NATS_PORT), '-sd', opts.storeDir, '-P', pidFile],
    { cwd: opts.cwd, env: { ...process.env, GOMAXPROCS: natsProcessors() } },
  );
  opts.onSpawn(child);
  await waitForPort({
    what: 'nats-server',
    host: HOST,
    port: SPAWNED_NATS_PORT,
    timeoutMs: 60_000,
    child,
    signal: opts.signal,
  });
  return `nats://${HOST}:${SPAWNED_NATS_PORT}`;
}
