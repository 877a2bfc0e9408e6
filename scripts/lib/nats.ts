// A local nats-server with JetStream for `pnpm start` when NATS_URL is not given.
import { mkdirSync } from 'node:fs';
import { type Child, findExecutable, portOpen, StartupError, spawnChild, waitForPort } from './proc.ts';

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
  if (await portOpen(HOST, SPAWNED_NATS_PORT)) {
    throw new StartupError(
      `port ${SPAWNED_NATS_PORT} is already in use (another \`pnpm start\` running?); stop it or set NATS_URL`,
    );
  }
  mkdirSync(opts.storeDir, { recursive: true });
  const child = spawnChild(
    'nats',
    opts.binary,
    ['-js', '-a', HOST, '-p', String(SPAWNED_NATS_PORT), '-sd', opts.storeDir],
    { cwd: opts.cwd, env: process.env },
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
