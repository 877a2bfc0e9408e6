// `pnpm start`: runs the whole stack in the foreground (CONTRACT.md section 1).
//
//   1. PostgreSQL: DATABASE_URL, or embedded PostgreSQL under .data/postgres (port 5439, db `mcs`).
//   2. NATS: NATS_URL, or `nats-server -js` from PATH on port 4229, stored under .data/nats.
//   3. Each service (`node services/<name>/src/main.ts`), one after the other, each waited for
//      until its port accepts connections; then the gateway (`node gateway/src/main.ts`).
//
// Every child runs in its own process group with its output prefixed by `[name]`. SIGINT/SIGTERM
// stop the gateway, then the services, then NATS and PostgreSQL, and exit 0; a second signal
// kills everything at once. A child that exits on its own takes the whole stack down (exit 1).
import { join, resolve } from 'node:path';
import { baseEnvSchema, parseEnv, SERVICES, servicePort, serviceUrl } from '../packages/kit/src/config.ts';
import { watchLauncher } from './lib/launcher.ts';
import { findNatsServer, startNats } from './lib/nats.ts';
import { startEmbeddedPostgres } from './lib/postgres.ts';
import {
  abandonChild,
  type Child,
  connectHost,
  describeExit,
  killChild,
  log,
  portOpen,
  StartupError,
  spawnChild,
  stopChild,
  waitForPort,
} from './lib/proc.ts';

const ROOT = resolve(import.meta.dirname, '..');
const DATA_DIR = join(ROOT, '.data');
const READY_TIMEOUT_MS = 60_000;
const STOP_GRACE_MS = 10_000;

const { HOST, PORT } = parseEnv(baseEnvSchema.pick({ HOST: true, PORT: true }));

let shuttingDown = false;
const startup = new AbortController();
let postgres: Child | undefined;
let initdb: Promise<void> | undefined;
let nats: Child | undefined;
const services: Child[] = [];
let gateway: Child | undefined;

function allChildren(): Child[] {
  return [gateway, ...services, nats, postgres].filter((c): c is Child => c !== undefined);
}

/** Thrown at a start-up step reached after shutdown began: stop quietly. */
class Aborted extends Error {}
function checkpoint(): void {
  if (shuttingDown) throw new Aborted();
}

/** A child that exits while we are not shutting down is fatal. */
function watch(child: Child): Child {
  void child.exited.then((exit) => {
    if (shuttingDown) return;
    log.error(`${child.name} exited unexpectedly (${describeExit(exit)})`);
    void shutdown(1);
  });
  return child;
}

async function shutdown(code: number): Promise<never> {
  if (!shuttingDown) {
    shuttingDown = true;
    startup.abort();
    log.info('stopping…');
    if (gateway) await stopChild(gateway, STOP_GRACE_MS);
    await Promise.all(services.map((child) => stopChild(child, STOP_GRACE_MS)));
    if (nats) await stopChild(nats, STOP_GRACE_MS);
    // Let a first-run initdb finish rather than orphan it mid-way (start-up stops right after it).
    await initdb?.catch(() => {});
    if (postgres) await stopChild(postgres, STOP_GRACE_MS);
    log.info(code === 0 ? 'stopped' : `stopped (exit ${code})`);
    process.exit(code);
  }
  return new Promise<never>(() => {});
}

function forceExit(): never {
  log.error('second signal: killing everything now');
  for (const child of allChildren()) killChild(child);
  process.exit(1);
}

/** When the first stop signal arrived; echoes of it within a second are not a "second signal". */
let signalledAt: number | undefined;
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(signal, () => {
    // A Ctrl-C reaches both us and a launcher that forwards it (pnpm does): one request to stop.
    if (signalledAt !== undefined && Date.now() - signalledAt < 1000) return;
    if (shuttingDown) forceExit();
    signalledAt = Date.now();
    log.info(`received ${signal}`);
    void shutdown(0);
  });
}

// SIGTERM to `pnpm start` reaches only pnpm's `sh -c`, which dies and leaves us orphaned: under a
// package manager, treat losing the launcher as a request to stop.
if (process.env.npm_lifecycle_event) {
  watchLauncher((why) => {
    if (shuttingDown) return;
    log.info(`${why}; stopping as if signalled`);
    signalledAt = Date.now();
    void shutdown(0);
  });
}

// If the orchestrator itself dies (a bug, an uncaught error), do not leave children running.
process.on('exit', () => {
  for (const child of allChildren()) abandonChild(child);
});

function urlHost(host: string): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
}

async function main(): Promise<void> {
  const gatewayHost = connectHost(HOST);
  const listeners = [
    ...SERVICES.map((name) => ({
      what: name,
      host: connectHost(new URL(serviceUrl(name)).hostname),
      port: servicePort(name),
    })),
    { what: 'gateway', host: gatewayHost, port: PORT },
  ];
  for (const { what, host, port } of listeners) {
    if (await portOpen(host, port)) {
      throw new StartupError(
        `port ${port} (${what}) is already in use on ${host}; is another \`pnpm start\` running?`,
      );
    }
  }

  const natsBinary = process.env.NATS_URL ? undefined : findNatsServer();
  const env: NodeJS.ProcessEnv = { ...process.env };

  if (process.env.DATABASE_URL) {
    log.info('using DATABASE_URL');
  } else {
    log.info('starting embedded PostgreSQL (.data/postgres, port 5439)');
    env.DATABASE_URL = await startEmbeddedPostgres({
      dataDir: join(DATA_DIR, 'postgres'),
      cwd: ROOT,
      signal: startup.signal,
      onInitialise: (running) => {
        initdb = running;
      },
      onSpawn: (child) => {
        postgres = watch(child);
      },
    });
  }

  if (!natsBinary) {
    log.info('using NATS_URL');
  } else {
    log.info('starting nats-server (.data/nats, port 4229)');
    env.NATS_URL = await startNats({
      binary: natsBinary,
      storeDir: join(DATA_DIR, 'nats'),
      cwd: ROOT,
      signal: startup.signal,
      onSpawn: (child) => {
        nats = watch(child);
      },
    });
  }

  for (const name of SERVICES) {
    checkpoint();
    const child = watch(
      spawnChild(name, process.execPath, [join('services', name, 'src', 'main.ts')], { cwd: ROOT, env }),
    );
    services.push(child);
    await waitForPort({
      what: name,
      host: connectHost(new URL(serviceUrl(name, env)).hostname),
      port: servicePort(name, env),
      timeoutMs: READY_TIMEOUT_MS,
      child,
      signal: startup.signal,
    });
  }

  checkpoint();
  gateway = watch(
    spawnChild('gateway', process.execPath, [join('gateway', 'src', 'main.ts')], { cwd: ROOT, env }),
  );
  await waitForPort({
    what: 'gateway',
    host: gatewayHost,
    port: PORT,
    timeoutMs: READY_TIMEOUT_MS,
    child: gateway,
    signal: startup.signal,
  });
  checkpoint();
  process.stdout.write(`mcs is up: http://${urlHost(HOST)}:${PORT}\n`);
}

main().catch((err: unknown) => {
  if (shuttingDown || err instanceof Aborted) return;
  log.error(err instanceof StartupError ? err.message : ((err as Error).stack ?? String(err)));
  void shutdown(1);
});
