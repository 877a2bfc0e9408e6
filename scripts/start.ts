// `pnpm start`: runs the whole stack in the foreground (docs/operations.md).
//
//   1. PostgreSQL: DATABASE_URL, or embedded PostgreSQL under .data/postgres (port 5439, db `mcs`).
//   2. NATS: NATS_URL, or `nats-server -js` from PATH on port 4229, stored under .data/nats.
//   3. Each service (`node services/<name>/src/main.ts`), one after the other, each waited for
//      until it is ready; then the gateway (`node gateway/src/main.ts`).
//      With MCS_ONE_PROCESS=true (a flag like the others: true/false/1/0; anything else stops
//      start-up with exit 78) instead the webhooks service, then one Node part, `mcs` (`node
//      scripts/one-process.ts`, which says how and why), that runs the accounts, commerce and
//      messaging services and the gateway in one process; the services still listen on their
//      ports (checked free below like always). `mcs` is supervised and stopped like the gateway. Opt-in for a small machine (docs/operations.md, "One process"); the default
//      stays a process per part (CONTRACT §1).
//
// Every child runs in its own process group with its output prefixed by `[name]`. SIGINT/SIGTERM
// stop the gateway (or `mcs`), then the services, then NATS and PostgreSQL, and exit 0; a second
// signal kills everything at once.
//
// Supervision: once the stack is up, a part that exits on its own (a crash, kill -9, OOM) is
// started again after a back-off (scripts/lib/supervise.ts: 100 ms doubling up to 10 s, back to
// 100 ms once it stayed up for 30 s), and each restart is logged. The others keep running: the
// gateway answers 503 api_error for the routes of a service that is down. A Node part is ready
// when it says so over an IPC channel (kit/server runProcess), and has a standby with its code
// already loaded that takes over when it crashes (nodePart), so it is back in well under a
// second. A part that keeps crashing — 5 restarts in a row that exit before they are ready, or
// 10 crashes within a minute — stops the whole stack with a message naming it (exit 1). During
// start-up, a part that exits is fatal at once (a bad configuration should not be retried).
import { accessSync, constants, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { gatewayEnvSchema } from '../gateway/src/env.ts';
import {
  baseEnvSchema,
  booleanFlag,
  PART_NODE_FLAGS,
  parseDuration,
  parseEnv,
  SERVICES,
  servicePort,
  serviceUrl,
} from '../packages/kit/src/config.ts';
import { parseWebhooksEnv } from '../services/webhooks/src/env.ts';
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
  waitForReady,
} from './lib/proc.ts';
import { CrashHistory } from './lib/supervise.ts';

const ROOT = resolve(import.meta.dirname, '..');
const DATA_DIR = join(ROOT, '.data');
const READY_TIMEOUT_MS = 60_000;

// Every part's environment, checked before any part starts: a bad value is one line naming it
// (exit 78), not a part dying with a stack trace or a stack that never gets ready.
parseEnv(gatewayEnvSchema);
parseWebhooksEnv();
const { HOST, PORT } = parseEnv(baseEnvSchema.pick({ HOST: true, PORT: true }));
// SERVICE_METRICS_PORT is one port for every service: right for a service in a pod of its own
// (deploy/), but here the services share one machine and the second to start would die on it.
if (process.env.SERVICE_METRICS_PORT) {
  process.stderr.write(
    'invalid environment:\n  SERVICE_METRICS_PORT: not with `pnpm start`, whose services share one machine and cannot all bind one port (it is for a service alone in its pod, as in deploy/); leave it unset: each service serves /metrics on its own port\n',
  );
  process.exit(78); // EX_CONFIG, as parseEnv
}
// SERVICE_SOCKET_DIR: every service makes it (mode 0700) and listens in it; one that cannot be
// made is said here, once, rather than as the first service's stack trace once the stores are up.
if (process.env.SERVICE_SOCKET_DIR) {
  try {
    mkdirSync(process.env.SERVICE_SOCKET_DIR, { recursive: true, mode: 0o700 });
    accessSync(process.env.SERVICE_SOCKET_DIR, constants.W_OK);
  } catch (err) {
    process.stderr.write(
      `invalid environment:\n  SERVICE_SOCKET_DIR: cannot use it as a directory for the services' sockets (${(err as Error).message})\n`,
    );
    process.exit(78); // EX_CONFIG, as parseEnv
  }
}
/** MCS_ONE_PROCESS, read as every part reads a flag; a bad value stops here, as the others do. */
const ONE_PROCESS = booleanFlag.safeParse(process.env.MCS_ONE_PROCESS);
if (!ONE_PROCESS.success) {
  process.stderr.write(
    `invalid environment:\n  MCS_ONE_PROCESS: must be true, false, 1 or 0 (or unset), not ${JSON.stringify(process.env.MCS_ONE_PROCESS)}\n`,
  );
  process.exit(78); // EX_CONFIG, as parseEnv
}
// The webhooks service drains its delivery attempts (each at most WEBHOOK_TIMEOUT) on SIGTERM:
// give every part that long and 5 s more, and at least the 15 s a part allows itself (kit/server
// stopGraceMs), before killing it.
const STOP_GRACE_MS = (() => {
  try {
    return Math.max(15_000, parseDuration(process.env.WEBHOOK_TIMEOUT ?? '10s') + 5_000);
  } catch {
    return 15_000;
  }
})();

let shuttingDown = false;
const startup = new AbortController();
let initdb: Promise<void> | undefined;

/**
 * A supervised child: `launch` spawns it (handing the child over at once through `spawned`, so
 * a shutdown can stop it while it starts) and resolves once it accepts connections.
 */
interface Part {
  name: string;
  launch(spawned: (child: Child) => void): Promise<void>;
  child?: Child;
  history: CrashHistory;
  /** A Node part's standby: its code loaded, waiting to take over (see nodePart). */
  standby?: Child;
  /** Called once the part is ready: prepares its next standby. */
  ready?(): void;
}

let postgres: Part | undefined;
let nats: Part | undefined;
const services: Part[] = [];
/** The gateway, or with MCS_ONE_PROCESS the `mcs` part (the services but webhooks too). */
let gateway: Part | undefined;
/** Up: exits are crashes to restart from now on (during start-up they are fatal). */
let supervising = false;

function allChildren(): Child[] {
  return [gateway, ...services, nats, postgres]
    .flatMap((part) => [part?.child, part?.standby])
    .filter((c): c is Child => c !== undefined);
}

/** Thrown at a start-up step reached after shutdown began: stop quietly. */
class Aborted extends Error {}
function checkpoint(): void {
  if (shuttingDown) throw new Aborted();
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Starts a part for the first time: an exit from then on is fatal until the stack is up. */
async function first(part: Part): Promise<void> {
  checkpoint();
  await part.launch((child) => {
    part.child = child;
    void child.exited.then((exit) => {
      if (shuttingDown || supervising || part.child !== child) return;
      log.error(`${part.name} exited unexpectedly during start-up (${describeExit(exit)})`);
      void shutdown(1);
    });
  });
  part.history.ready(Date.now());
  log.info(`${part.name} is up (pid ${part.child?.proc.pid})`);
  part.ready?.();
}

/** Restarts `part` whenever it exits on its own, until the stack stops or it keeps crashing. */
async function supervise(part: Part): Promise<void> {
  for (;;) {
    const child = part.child;
    if (!child) return;
    const exit = await child.exited;
    if (shuttingDown) return;
    const crashedAt = Date.now();
    let ready = true;
    let last = describeExit(exit);
    let attempt = 0;
    for (;;) {
      const decision = part.history.crashed(Date.now(), ready);
      if (!decision.restart) {
        log.error(
          `${part.name} keeps crashing (${decision.reason}; last exit: ${last}): stopping the stack. ` +
            `Its [${part.name}] lines above say why.`,
        );
        void shutdown(1);
        return;
      }
      attempt++;
      log.error(
        `${part.name} exited unexpectedly (${last}); restarting it in ${decision.delayMs / 1000} s` +
          (attempt > 1 ? ` (attempt ${attempt})` : ''),
      );
      await sleep(decision.delayMs);
      if (shuttingDown) return;
      try {
        await part.launch((c) => {
          part.child = c;
        });
        part.history.ready(Date.now());
        log.info(
          `${part.name} restarted (pid ${part.child?.proc.pid}), up ${((Date.now() - crashedAt) / 1000).toFixed(1)} s after it exited`,
        );
        part.ready?.();
        break;
      } catch (err) {
        if (shuttingDown) return;
        ready = false;
        const failed = part.child?.exit;
        last = failed ? describeExit(failed) : (err as Error).message;
        // Not yet listening and not exited (a start-up time-out): do not leave it running.
        if (part.child && !part.child.exit) {
          killChild(part.child);
          await part.child.exited;
        }
      }
    }
  }
}

async function shutdown(code: number): Promise<never> {
  if (!shuttingDown) {
    shuttingDown = true;
    startup.abort();
    log.info('stopping…');
    const stop = async (part: Part | undefined) => {
      if (part?.standby) await stopChild(part.standby, STOP_GRACE_MS);
      if (part?.child) await stopChild(part.child, STOP_GRACE_MS);
    };
    await stop(gateway);
    await Promise.all(services.map(stop));
    await stop(nats);
    // Let a first-run initdb finish rather than orphan it mid-way (start-up stops right after it).
    await initdb?.catch(() => {});
    await stop(postgres);
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

/**
 * A Node part (a service, the gateway, or `mcs`: all of them in one process). Once it is ready, a
 * standby is spawned with MCS_STANDBY=1: it loads the part's code (half of a start on a busy
 * machine) and waits (kit/server runProcess). When the part crashes, the standby is told to start, so the part is back in about
 * the time its start-up itself takes; a fresh standby follows once it is ready.
 */
function nodePart(name: string, entry: string, env: NodeJS.ProcessEnv): Part {
  const part: Part = {
    name,
    history: new CrashHistory(),
    async launch(spawned) {
      let child = part.standby;
      part.standby = undefined;
      if (child && !child.exit) child.proc.send({ mcs: 'go' });
      else
        child = spawnChild(name, process.execPath, [...PART_NODE_FLAGS, entry], {
          cwd: ROOT,
          env,
          ipc: true,
        });
      spawned(child);
      // Ready when it says so (it listens and has started everything), not merely when its port
      // accepts: something else may hold the port.
      await waitForReady({ what: name, child, timeoutMs: READY_TIMEOUT_MS, signal: startup.signal });
    },
    ready() {
      if (shuttingDown || part.standby) return;
      const standby = spawnChild(name, process.execPath, [...PART_NODE_FLAGS, entry], {
        cwd: ROOT,
        env: { ...env, MCS_STANDBY: '1' },
        ipc: true,
      });
      part.standby = standby;
      void standby.exited.then(() => {
        if (part.standby === standby) part.standby = undefined;
      });
    },
  };
  return part;
}

async function main(): Promise<void> {
  const oneProcess = ONE_PROCESS.data === true;
  const gatewayHost = connectHost(HOST);
  const listeners = [
    ...SERVICES.map((name) => ({
      what: name,
      host: connectHost(new URL(serviceUrl(name)).hostname),
      port: servicePort(name),
    })),
    { what: 'gateway', host: gatewayHost, port: PORT },
  ];
  const metricsPort = Number(process.env.METRICS_PORT ?? PORT + 5);
  if (metricsPort !== 0) {
    listeners.push({
      what: "gateway's METRICS_PORT",
      host: connectHost(process.env.SERVICE_HOST ?? '127.0.0.1'),
      port: metricsPort,
    });
  }
  for (const { what, host, port } of listeners) {
    if (await portOpen(host, port)) {
      throw new StartupError(
        `port ${port} (${what}) is already in use on ${host}; is another \`pnpm start\` running?`,
      );
    }
  }

  const natsBinary = process.env.NATS_URL ? undefined : findNatsServer();
  const env: NodeJS.ProcessEnv = { ...process.env };
  // V8's code cache for every part: a restarted part is back sooner (about a quarter of its start).
  env.NODE_COMPILE_CACHE ??= join(DATA_DIR, 'compile-cache');
  // Every part runs on this machine: the gateway calls each service over a Unix domain socket,
  // about a sixth less CPU per call on both sides than TCP loopback (kit/config serviceSocket).
  env.SERVICE_SOCKET_DIR ??= join(DATA_DIR, 'run');

  if (process.env.DATABASE_URL) {
    log.info('using DATABASE_URL');
  } else {
    log.info('starting embedded PostgreSQL (.data/postgres, port 5439)');
    postgres = {
      name: 'postgres',
      history: new CrashHistory(),
      async launch(spawned) {
        env.DATABASE_URL = await startEmbeddedPostgres({
          dataDir: join(DATA_DIR, 'postgres'),
          cwd: ROOT,
          signal: startup.signal,
          onInitialise: (running) => {
            initdb = running;
          },
          onSpawn: spawned,
        });
      },
    };
    await first(postgres);
  }

  if (!natsBinary) {
    log.info('using NATS_URL');
  } else {
    log.info('starting nats-server (.data/nats, port 4229)');
    nats = {
      name: 'nats',
      history: new CrashHistory(),
      async launch(spawned) {
        env.NATS_URL = await startNats({
          binary: natsBinary,
          storeDir: join(DATA_DIR, 'nats'),
          cwd: ROOT,
          signal: startup.signal,
          onSpawn: spawned,
        });
      },
    };
    await first(nats);
  }

  if (oneProcess) {
    log.info(
      'MCS_ONE_PROCESS: the gateway and the accounts, commerce and messaging services run in one process, mcs; webhooks in its own',
    );
    const webhooks = nodePart('webhooks', join('services', 'webhooks', 'src', 'main.ts'), env);
    services.push(webhooks);
    await first(webhooks);
    gateway = nodePart('mcs', join('scripts', 'one-process.ts'), env);
  } else {
    for (const name of SERVICES) {
      const part = nodePart(name, join('services', name, 'src', 'main.ts'), env);
      services.push(part);
      await first(part);
    }
    gateway = nodePart('gateway', join('gateway', 'src', 'main.ts'), env);
  }
  await first(gateway);
  checkpoint();
  supervising = true;
  for (const part of [postgres, nats, ...services, gateway]) if (part) void supervise(part);
  process.stdout.write(readyLines(`http://${urlHost(HOST)}:${PORT}`));
}

/**
 * What a new user needs once the stack answers: where the docs, the dashboard and the CLI are,
 * and which of the settings that production must never have are on.
 */
function readyLines(base: string): string {
  // Read as the webhooks service reads them (it refuses to start on a value that is not a flag).
  const on = (name: string) => booleanFlag.safeParse(process.env[name]).data === true;
  const unsafe = [
    on('WEBHOOK_ALLOW_HTTP') && 'WEBHOOK_ALLOW_HTTP (http:// endpoint URLs accepted)',
    on('WEBHOOK_ALLOW_PRIVATE_NETWORKS') &&
      'WEBHOOK_ALLOW_PRIVATE_NETWORKS (deliveries may reach loopback and private addresses)',
  ].filter((x): x is string => typeof x === 'string');
  const docs = process.env.DOCS_URL || `${base}/docs`;
  return [
    `mcs is up: ${base}`,
    `  API docs:  ${docs}`,
    `  Dashboard: ${base}/dashboard`,
    '  CLI:       pnpm mcs --help (first: pnpm mcs accounts create --email you@example.com)',
    unsafe.length
      ? `  Unsafe local settings ON, never use them in production: ${unsafe.join('; ')}`
      : '  Unsafe local settings: none (endpoints must be public https:// URLs; for local receivers set WEBHOOK_ALLOW_HTTP=true WEBHOOK_ALLOW_PRIVATE_NETWORKS=true)',
    '',
  ].join('\n');
}

main().catch((err: unknown) => {
  if (shuttingDown || err instanceof Aborted) return;
  log.error(err instanceof StartupError ? err.message : ((err as Error).stack ?? String(err)));
  void shutdown(1);
});
