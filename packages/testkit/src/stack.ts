// The whole stack as real processes for end-to-end tests: every service and the gateway,
// on free ports, against a fresh database and a fresh JetStream prefix.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { PART_NODE_FLAGS, SERVICES } from '@mcs/kit/config';
import { createTestDatabase, type TestDatabase } from './db.ts';
import { createTestNats, type TestNats } from './nats.ts';

export const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
export const PARTS = [...SERVICES, 'gateway'] as const;
export type Part = (typeof PARTS)[number];

const ENTRY: Record<Part, string> = {
  accounts: 'services/accounts/src/main.ts',
  commerce: 'services/commerce/src/main.ts',
  messaging: 'services/messaging/src/main.ts',
  webhooks: 'services/webhooks/src/main.ts',
  gateway: 'gateway/src/main.ts',
};
/** The gateway with accounts, commerce and messaging in one process (`oneProcess`). */
const ONE_PROCESS_ENTRY = 'scripts/one-process.ts';
/** The parts that process runs; webhooks keeps its own (scripts/one-process.ts says why). */
const IN_ONE_PROCESS: readonly Part[] = ['accounts', 'commerce', 'messaging', 'gateway'];

export interface Stack {
  /** The first gateway replica. */
  baseUrl: string;
  /** Every gateway replica (`replicas.gateway`, default 1), in order. */
  gatewayUrls: string[];
  /** Replicas started of each part. */
  replicas: Record<Part, number>;
  /** The port of each part's first replica (the services speak Connect, gRPC and gRPC-Web there). */
  ports: Record<Part, number>;
  env: Record<string, string>;
  db: TestDatabase;
  nats: TestNats;
  /** Output of each part (all its replicas), for diagnosing a failing test. */
  logs: Record<Part, string[]>;
  /**
   * Sends a signal to a part (e.g. SIGKILL) and waits for it to exit; resolves how it exited
   * (undefined if it was not running). `replica` defaults to 0.
   */
  kill(part: Part, signal?: NodeJS.Signals, replica?: number): Promise<Exit | undefined>;
  /** Sends a signal without waiting (SIGSTOP/SIGCONT to freeze and thaw a part). */
  signal(part: Part, signal: NodeJS.Signals, replica?: number): void;
  /** Starts a part again after kill(). */
  restart(part: Part, replica?: number): Promise<void>;
  /** Whether a part's process is running (it has not exited since it was last started). */
  alive(part: Part, replica?: number): boolean;
  /** Where Prometheus scrapes a part's replica: the service's own port, the gateway's METRICS_PORT. */
  metricsUrl(part: Part, replica?: number): string;
  /** The process id of a part's replica (while it runs). */
  pid(part: Part, replica?: number): number | undefined;
  /** Runs the mcs CLI with the stack's environment; resolves its stdout. */
  cli(args: string[]): Promise<string>;
  /** One /v1 request as a client makes it: Bearer `key`, JSON body; to gateway replica `replica` (0). */
  api(
    key: string,
    method: string,
    path: string,
    body?: unknown,
    opts?: { signal?: AbortSignal; replica?: number; headers?: Record<string, string> },
  ): Promise<ApiResponse>;
  /** `mcs accounts create` → the parsed JSON it prints. */
  createAccount(email?: string): Promise<AccountKeys>;
  stop(): Promise<void>;
}

/** How a process ended: its exit code, or the signal that ended it. */
export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface ApiResponse {
  status: number;
  headers: Headers;
  text: string;
  /** The parsed body, or null when it is not JSON. */
  // biome-ignore lint/suspicious/noExplicitAny: tests read whatever the API answered
  json: any;
}

export interface AccountKeys {
  account: { id: string; email: string; name: string };
  secret_key: string;
  live_secret_key: string;
  publishable_key: string;
  live_publishable_key: string;
}

async function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

/**
 * Where this test worker's stacks take their ports: `pnpm test` runs two files at a time, and
 * each vitest worker (VITEST_POOL_ID 1, 2, …) draws from its own quarter of 20000–29999, so two
 * stacks starting at once cannot both find the same block free before either binds it.
 */
const PORT_QUARTER = 20_000 + ((Number(process.env.VITEST_POOL_ID ?? 1) - 1) % 4) * 2_500;

/**
 * What a test's stack runs with, whether its parts are started here (startStack) or by
 * `scripts/start.ts` (the supervisor's tests): its own ports from `base`, database, JetStream
 * prefix, signing-secrets key and mail directory; quiet logs. Add what the test needs.
 */
export function testStackEnv(base: number, db: TestDatabase, nats: TestNats): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '/root',
    HOST: '127.0.0.1',
    PORT: String(base),
    DATABASE_URL: db.url,
    NATS_URL: nats.url,
    MCS_NATS_PREFIX: nats.prefix,
    LOG_LEVEL: 'warn',
    WEBHOOK_SECRETS_KEY: randomBytes(32).toString('base64'),
    MAIL_DIR: `${REPO_ROOT}.data/test-mail/${nats.prefix}`,
    // As `pnpm start` does: V8's code cache (and Node's type-stripped sources) for every part.
    NODE_COMPILE_CACHE: process.env.NODE_COMPILE_CACHE ?? `${REPO_ROOT}.data/compile-cache`,
  };
}
/** A base port with the next five free too (the gateway's METRICS_PORT is base + 5), below the ephemeral range (PERF-NOTES.md). */
export async function freeBasePort(taken: number[] = []): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const base = PORT_QUARTER + Math.floor(Math.random() * 250) * 10;
    if (taken.includes(base)) continue;
    const checks = await Promise.all([0, 1, 2, 3, 4, 5].map((d) => portFree(base + d)));
    if (checks.every(Boolean)) return base;
  }
  throw new Error('no free ports for the test stack');
}

export async function waitForPort(
  port: number,
  timeoutMs = 30_000,
  isAlive: () => boolean = () => true,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!isAlive()) throw new Error(`process exited before listening on ${port}`);
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1');
      s.once('connect', () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`nothing listens on ${port} after ${timeoutMs} ms`);
}

export async function startStack(
  opts: {
    env?: Record<string, string>;
    /** PostgreSQL server for the fresh database (default: env DATABASE_URL, else the local one). */
    databaseServerUrl?: string;
    /** NATS server for the fresh JetStream prefix (default: env NATS_URL, else the local one). */
    natsUrl?: string;
    /**
     * Processes of each part (default 1). Replica r of every part shares one port block: gateway
     * replica r calls service replica r (so the calls of a load spread over both gateways reach
     * both replicas of each service), while outbox relays and webhooks consumers share the work
     * through PostgreSQL and JetStream. A part with fewer replicas than the gateway is called by
     * the surplus gateways at its replica 0.
     */
    replicas?: Partial<Record<Part, number>>;
    /**
     * The gateway, accounts, commerce and messaging in one process (scripts/one-process.ts, as
     * `MCS_ONE_PROCESS=true pnpm start` runs them), webhooks in its own: one replica each; kill,
     * signal, pid and logs of any of the four are that process's.
     */
    oneProcess?: boolean;
  } = {},
): Promise<Stack> {
  const db = await createTestDatabase(opts.databaseServerUrl);
  const nats = createTestNats(opts.natsUrl);
  if (opts.oneProcess && Object.values(opts.replicas ?? {}).some((n) => n > 1))
    throw new Error('oneProcess runs one replica of each part');
  const replicas = Object.fromEntries(PARTS.map((p) => [p, Math.max(1, opts.replicas?.[p] ?? 1)])) as Record<
    Part,
    number
  >;
  const blocks = Math.max(...Object.values(replicas));
  const bases: number[] = [];
  for (let r = 0; r < blocks; r++) bases.push(await freeBasePort(bases));
  const base = bases[0]!;
  const env: Record<string, string> = {
    ...testStackEnv(base, db, nats),
    // As `pnpm start` does: the gateway reaches each service over a Unix domain socket.
    SERVICE_SOCKET_DIR: `${REPO_ROOT}.data/run`,
    // Not niceness 10, the default: `pnpm test` runs two files at a time, and a webhooks process
    // at 10 yields to the other file's stack too, which no deployment has beside it. Starved that
    // way on a slow VM, a delivery's 20 ms answer went unread past a test's 1 s time-out and its
    // retry arrived twice. Tests of the niceness itself set it.
    WEBHOOK_NICE: '0',
    ...opts.env,
  };
  const logs = Object.fromEntries(PARTS.map((p) => [p, [] as string[]])) as Record<Part, string[]>;
  const procs = new Map<string, ChildProcess>();
  const OFFSET: Record<Part, number> = { gateway: 0, accounts: 1, commerce: 2, messaging: 3, webhooks: 4 };
  const portOf = (part: Part, replica: number) => bases[replica]! + OFFSET[part];
  /** The environment of replica r: its own port block; services absent there are reached at block 0. */
  const envOf = (replica: number): Record<string, string> => {
    if (replica === 0) return env;
    const own: Record<string, string> = { ...env, PORT: String(bases[replica]) };
    for (const service of SERVICES) {
      const key = `${service.toUpperCase()}_URL`;
      if (env[key] !== undefined) continue;
      const r = replica < replicas[service] ? replica : 0;
      own[key] = `http://127.0.0.1:${portOf(service, r)}`;
    }
    return own;
  };
  const id = (part: Part, replica: number) => `${part}#${replica}`;

  async function launch(part: Part, replica = 0): Promise<void> {
    // One process: it serves four parts, and the gateway's port opens last.
    const together = opts.oneProcess === true && IN_ONE_PROCESS.includes(part);
    if (together) part = 'gateway';
    const child = spawn(process.execPath, [...PART_NODE_FLAGS, together ? ONE_PROCESS_ENTRY : ENTRY[part]], {
      cwd: REPO_ROOT,
      env: envOf(replica),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    for (const p of together ? IN_ONE_PROCESS : [part]) procs.set(id(p, replica), child);
    const append = (to: Part, text: string) => {
      logs[to].push(text);
      if (logs[to].length > 500) logs[to].shift();
    };
    // One process: each JSON line goes to the part it names (`"svc"`), anything else to the gateway.
    let partial = '';
    const keep = together
      ? (chunk: Buffer) => {
          const lines = (partial + chunk.toString()).split('\n');
          partial = lines.pop()!;
          for (const line of lines) {
            const svc = /"svc":"([a-z]+)"/.exec(line)?.[1] as Part | undefined;
            append(svc && IN_ONE_PROCESS.includes(svc) ? svc : 'gateway', `${line}\n`);
          }
        }
      : (chunk: Buffer) => append(part, chunk.toString());
    child.stdout!.on('data', keep);
    child.stderr!.on('data', keep);
    try {
      await waitForPort(
        portOf(part, replica),
        60_000,
        () => child.exitCode === null && child.signalCode === null,
      );
    } catch (err) {
      throw new Error(
        `${id(part, replica)} did not start: ${(err as Error).message}\n${logs[part].join('')}`,
      );
    }
  }

  async function kill(
    part: Part,
    signal: NodeJS.Signals = 'SIGTERM',
    replica = 0,
  ): Promise<Exit | undefined> {
    const child = procs.get(id(part, replica));
    if (!child || child.exitCode !== null || child.signalCode !== null) return undefined;
    const exited = new Promise<Exit>((r) => child.once('exit', (code, sig) => r({ code, signal: sig })));
    child.kill(signal);
    return exited;
  }

  async function cli(args: string[]): Promise<string> {
    const child = spawn(process.execPath, ['packages/cli/src/main.ts', ...args], {
      cwd: REPO_ROOT,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => (out += c));
    child.stderr.on('data', (c: Buffer) => (err += c));
    const code = await new Promise<number | null>((r) => child.once('exit', r));
    if (code !== 0) throw new Error(`mcs ${args.join(' ')} exited ${code}: ${err}`);
    return out;
  }

  const running = (child: ChildProcess | undefined): child is ChildProcess =>
    child !== undefined && child.exitCode === null && child.signalCode === null;
  const stack: Stack = {
    baseUrl: `http://127.0.0.1:${base}`,
    gatewayUrls: bases.slice(0, replicas.gateway).map((b) => `http://127.0.0.1:${b}`),
    replicas,
    env,
    ports: Object.fromEntries(PARTS.map((p) => [p, portOf(p, 0)])) as Record<Part, number>,
    db,
    nats,
    logs,
    kill,
    signal: (part, sig, replica = 0) => {
      procs.get(id(part, replica))?.kill(sig);
    },
    restart: launch,
    alive: (part, replica = 0) => running(procs.get(id(part, replica))),
    metricsUrl: (part, replica = 0) =>
      `http://127.0.0.1:${part === 'gateway' ? bases[replica]! + 5 : portOf(part, replica)}/metrics`,
    pid: (part, replica = 0) => {
      const child = procs.get(id(part, replica));
      return running(child) ? child.pid : undefined;
    },
    cli,
    async api(key, method, path, body, opts = {}) {
      const res = await fetch(`http://127.0.0.1:${portOf('gateway', opts.replica ?? 0)}${path}`, {
        method,
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...opts.headers },
        body: body === undefined ? undefined : JSON.stringify(body),
        ...(opts.signal ? { signal: opts.signal } : {}),
      });
      const text = await res.text();
      let json = null;
      try {
        json = JSON.parse(text);
      } catch {}
      return { status: res.status, headers: res.headers, text, json };
    },
    async createAccount(email = `owner-${randomBytes(4).toString('hex')}@example.com`) {
      return JSON.parse(await cli(['accounts', 'create', '--email', email])) as AccountKeys;
    },
    async stop() {
      for (const child of procs.values()) child.kill('SIGCONT'); // a frozen part cannot stop
      if (opts.oneProcess) await kill('gateway', 'SIGTERM');
      await Promise.all(
        PARTS.flatMap((p) => Array.from({ length: replicas[p] }, (_, r) => kill(p, 'SIGTERM', r))),
      );
      await nats.drop().catch(() => {});
      await db.drop().catch(() => {});
    },
  };
  try {
    if (opts.oneProcess) {
      await launch('webhooks');
      await launch('gateway');
      return stack;
    }
    // Replica 0 of each service first (the first start creates the stream and migrates), then the rest.
    await Promise.all(SERVICES.map((part) => launch(part)));
    await Promise.all(
      SERVICES.flatMap((p) => Array.from({ length: replicas[p] - 1 }, (_, r) => launch(p, r + 1))),
    );
    await Promise.all(Array.from({ length: replicas.gateway }, (_, r) => launch('gateway', r)));
  } catch (err) {
    await stack.stop();
    throw err;
  }
  return stack;
}
