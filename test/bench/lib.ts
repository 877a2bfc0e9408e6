// Shared pieces of the benchmarks (test/bench/run.ts): the benchmark contract, a stack started
// for benchmarking with a clear reason when it cannot start, accounts and endpoints, and the
// statistics and tables every benchmark prints.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import http2 from 'node:http2';
import net from 'node:net';
import { booleanFlag } from '@mcs/kit/config';
import { type Stack, startStack } from '@mcs/testkit';
import pg from 'pg';

/** What a running benchmark gets from the runner. */
export interface BenchContext {
  /** Aborted when the benchmark's time bound passes or the run is interrupted. */
  signal: AbortSignal;
  /** Registers a clean-up; the runner runs them in reverse order when the benchmark ends, however it ends. */
  defer(label: string, fn: () => unknown): void;
  /** A progress line on stderr (stdout carries the tables). */
  log(message: string): void;
  /** The benchmarks selected in this run (a benchmark may reuse another's numbers). */
  selected: ReadonlySet<string>;
  /** Numbers one benchmark leaves for the later ones of the same run (e.g. ingest's maximum). */
  shared: Map<string, unknown>;
  /**
   * Says that the benchmark's setup is done and what follows is a quiet observation window:
   * a benchmark that may overlap it (Benchmark.overlapsWith) starts now. Calling it is optional.
   */
  ready(): void;
}

/**
 * One line of the run's summary table: a target of issue 9, the project's figure, the same-run
 * baseline it is compared with, their ratio, and whether the target holds. `pass: null` means
 * it could not be decided (a void run): it counts as FAIL.
 */
export interface Check {
  /** What is compared, e.g. "keyed 2xx/s". */
  label: string;
  project: string | number | null;
  baseline: string | number | null;
  ratio: number | null;
  target: string;
  pass: boolean | null;
  /** Why it failed or was void, shown under the summary. */
  note?: string;
}

export interface Table {
  title: string;
  columns: string[];
  rows: Array<Array<string | number | null>>;
  notes?: string[];
}

export interface BenchResult {
  /** The summary lines of this benchmark (run.ts prints them first, in one table). */
  checks: Check[];
  tables: Table[];
  /** The numbers behind the tables, written to the JSON report. */
  data: Record<string, unknown>;
}

/**
 * `MCS_ONE_PROCESS=true pnpm bench`: every stack runs the gateway, accounts, commerce and messaging
 * in one process and webhooks in its own, as `MCS_ONE_PROCESS=true pnpm start` does
 * (scripts/one-process.ts); the default is a process per part.
 */
export const ONE_PROCESS = booleanFlag.parse(process.env.MCS_ONE_PROCESS ?? 'false');

export interface Benchmark {
  name: string;
  title: string;
  /** Hard bound of the whole benchmark, stack start and clean-up included. */
  budgetMs: number;
  /** Roughly how long it takes, for `--list`. */
  expectedSec: number;
  /** The issue 9 target number (1–7); absent for extra benchmarks outside the default run. */
  target?: number;
  /**
   * When this benchmark and the named one are both selected, the named one starts as soon as
   * this one calls ctx.ready() and both run at the same time (two 5-minute windows in one).
   */
  overlapsWith?: string;
  run(ctx: BenchContext): Promise<BenchResult>;
}

// ---------------------------------------------------------------------------------------------
// Time

export const now = (): number => performance.timeOrigin + performance.now();

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal?.reason);
    };
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Polls `done` every 50 ms until it holds or `timeoutMs` passes; returns whether it held. */
export async function waitUntil(
  done: () => boolean,
  timeoutMs: number,
  signal: AbortSignal,
): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() >= deadline) return false;
    await sleep(50, signal);
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// The stack

/**
 * Every benchmark stack: plain-HTTP receivers on loopback, quiet logs, and the webhooks process
 * at pnpm start's niceness (test stacks leave it at 0: testkit startStack).
 */
export const BENCH_ENV = {
  WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
  WEBHOOK_ALLOW_HTTP: 'true',
  LOG_LEVEL: 'warn',
  WEBHOOK_NICE: '10',
};

function reachable(host: string, port: number, timeoutMs = 2_000): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host, port });
    const t = setTimeout(() => {
      s.destroy();
      resolve(false);
    }, timeoutMs);
    s.once('connect', () => {
      clearTimeout(t);
      s.destroy();
      resolve(true);
    });
    s.once('error', () => {
      clearTimeout(t);
      resolve(false);
    });
  });
}

/** Says plainly which server is missing, before startStack fails somewhere deeper. */
export async function preflight(): Promise<void> {
  const checks = [
    { what: 'PostgreSQL', env: 'DATABASE_URL', url: process.env.DATABASE_URL ?? 'postgres://127.0.0.1:5432' },
    { what: 'NATS', env: 'NATS_URL', url: process.env.NATS_URL ?? 'nats://127.0.0.1:4222' },
  ];
  for (const c of checks) {
    const u = new URL(c.url);
    const port = Number(u.port || (c.what === 'NATS' ? 4222 : 5432));
    if (!(await reachable(u.hostname, port))) {
      throw new Error(
        `${c.what} does not answer on ${u.hostname}:${port} (${c.env}); start it, e.g. bash .ci/ensure-services.sh`,
      );
    }
  }
}

/**
 * Starts the whole stack for one benchmark and registers its stop. If it cannot start, the
 * error says which part failed and carries that part's output.
 */
export async function startBenchStack(ctx: BenchContext, env: Record<string, string> = {}): Promise<Stack> {
  await preflight();
  const extra: Record<string, string> = {};
  if (process.env.BENCH_NODE_OPTIONS) extra.NODE_OPTIONS = process.env.BENCH_NODE_OPTIONS;
  // Experiments: BENCH_STACK_ENV="WEBHOOK_CONCURRENCY=1024,DATABASE_POOL_SIZE=32" reaches every part.
  for (const pair of (process.env.BENCH_STACK_ENV ?? '').split(',').filter(Boolean)) {
    const i = pair.indexOf('=');
    if (i > 0) extra[pair.slice(0, i).trim()] = pair.slice(i + 1).trim();
  }
  // One stack of a comparison may run as one process (ab-latency: AB_B="MCS_ONE_PROCESS=true").
  const oneProcess = ONE_PROCESS || booleanFlag.parse(env.MCS_ONE_PROCESS ?? 'false');
  const started = startStack({ env: { ...BENCH_ENV, ...extra, ...env }, oneProcess });
  // Registered before awaiting: a stack that finishes starting after a time-out is still stopped.
  ctx.defer('stop the stack', async () => {
    const stack = await started.catch(() => undefined);
    await stack?.stop();
  });
  const t0 = Date.now();
  try {
    const stack = await started;
    ctx.log(`stack up at ${stack.baseUrl} in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    return stack;
  } catch (err) {
    const message = (err as Error).message;
    // The part's output can be long; keep its tail, which holds the reason.
    const tail = message.length > 4_000 ? `…${message.slice(-4_000)}` : message;
    throw new Error(`the stack failed to start: ${tail}`);
  }
}

/** A free port below the ephemeral range (PERF-NOTES.md), for a server the benchmark starts. */
export async function freeLowPort(low = 10_000, high = 11_999): Promise<number> {
  for (let i = 0; i < 100; i++) {
    const port = low + Math.floor(Math.random() * (high - low));
    const free = await new Promise<boolean>((resolve) => {
      const s = net.createServer();
      s.once('error', () => resolve(false));
      s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
    });
    if (free) return port;
  }
  throw new Error(`no free port between ${low} and ${high}`);
}

/** One log line, shortened: pino JSON → "msg: err.message" on one line. */
function shortLine(line: string): string {
  try {
    const j = JSON.parse(line) as { msg?: string; err?: { message?: string; cause?: { message?: string } } };
    const err = j.err?.cause?.message ?? j.err?.message;
    const text = `${j.msg ?? ''}${err ? `: ${err}` : ''}`;
    return text.replace(/\s+/g, ' ').slice(0, 300);
  } catch {
    return line.replace(/\s+/g, ' ').slice(0, 300);
  }
}

/** What the stack's processes logged (LOG_LEVEL=warn: warnings and errors only), per part. */
export function stackComplaints(stack: Stack): {
  lines: number;
  byPart: Record<string, number>;
  first: string[];
} {
  const byPart: Record<string, number> = {};
  const first: string[] = [];
  let lines = 0;
  for (const [part, chunks] of Object.entries(stack.logs)) {
    for (const line of chunks.join('').split('\n')) {
      if (!line.trim()) continue;
      lines++;
      byPart[part] = (byPart[part] ?? 0) + 1;
      if (first.length < 20) first.push(`${part}: ${shortLine(line)}`);
    }
  }
  return { lines, byPart, first };
}

/** A note for a table when the stack complained. */
export function complaintNotes(stack: Stack): string[] {
  const c = stackComplaints(stack);
  if (c.lines === 0) return [];
  const parts = Object.entries(c.byPart)
    .map(([p, n]) => `${p} ${n}`)
    .join(', ');
  const distinct = [...new Set(c.first)].slice(0, 3);
  return [
    `the stack logged ${c.lines} warning/error lines (${parts}), e.g.:`,
    ...distinct.map((l) => `  ${l}`),
  ];
}

// ---------------------------------------------------------------------------------------------
// Accounts, endpoints, orders

export interface Account {
  id: string;
  secretKey: string;
}

/** Effectively unthrottled: the benchmarks measure the system, not the plan's rate limit. */
const UNTHROTTLED = 100_000;

/**
 * The accounts service's CreateAccount, called the way the CLI calls it (Connect, JSON, HTTP/2),
 * without a process per account. Falls back to the CLI if that call fails.
 */
async function createAccountOverConnect(stack: Stack, email: string): Promise<Account> {
  const base = stack.env.ACCOUNTS_URL ?? `http://127.0.0.1:${Number(stack.env.PORT) + 1}`;
  const session = http2.connect(base);
  try {
    const body = JSON.stringify({ email, name: '', rateLimit: UNTHROTTLED });
    const text = await new Promise<string>((resolve, reject) => {
      session.once('error', reject);
      const req = session.request({
        ':method': 'POST',
        ':path': '/mcs.accounts.v1.AccountService/CreateAccount',
        'content-type': 'application/json',
        'connect-protocol-version': '1',
        'connect-timeout-ms': '15000',
      });
      let status = 0;
      let out = '';
      req.setEncoding('utf8');
      req.on('response', (h) => {
        status = Number(h[':status']);
      });
      req.on('data', (c: string) => {
        out += c;
      });
      req.on('end', () => (status === 200 ? resolve(out) : reject(new Error(`HTTP ${status}: ${out}`))));
      req.on('error', reject);
      req.end(body);
    });
    const res = JSON.parse(text) as { account?: { id?: string }; secretKey?: string };
    if (!res.account?.id || !res.secretKey) throw new Error(`unexpected answer ${text.slice(0, 200)}`);
    return { id: res.account.id, secretKey: res.secretKey };
  } finally {
    session.close();
  }
}

async function createAccountWithCli(stack: Stack, email: string): Promise<Account> {
  const out = JSON.parse(
    await stack.cli(['accounts', 'create', '--email', email, '--rate-limit', String(UNTHROTTLED)]),
  ) as { account: { id: string }; secret_key: string };
  return { id: out.account.id, secretKey: out.secret_key };
}

/** `n` unthrottled accounts, a few at a time. */
export async function createAccounts(stack: Stack, n: number): Promise<Account[]> {
  const out: Account[] = new Array(n);
  let next = 0;
  const worker = async () => {
    while (next < n) {
      const i = next++;
      const email = `bench-${i}-${randomBytes(3).toString('hex')}@example.com`;
      out[i] = await createAccountOverConnect(stack, email).catch(() => createAccountWithCli(stack, email));
    }
  };
  await Promise.all(Array.from({ length: Math.min(8, n) }, worker));
  return out;
}

export async function api(stack: Stack, key: string, method: string, path: string, body?: unknown) {
  const res = await fetch(`${stack.baseUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {}
  return { status: res.status, json, text };
}

/** A webhook endpoint (for order.created unless told otherwise); returns its id. */
export async function createEndpoint(
  stack: Stack,
  account: Account,
  url: string,
  description: string,
  events: string[] = ['order.created'],
) {
  const res = await api(stack, account.secretKey, 'POST', '/v1/webhooks', { url, events, description });
  if (res.status !== 200)
    throw new Error(`creating an endpoint for ${url} answered ${res.status}: ${res.text}`);
  return res.json.id as string;
}

/** The body of every benchmark order; `marker` (the customer's name) tells phases apart on arrival. */
export function orderBody(marker: string): string {
  return JSON.stringify({
    customer: { name: marker, phone: '+4915112345678' },
    currency: 'EUR',
    items: [
      { name: 'Tea', unit_amount: 450, quantity: 2 },
      { name: 'Cake', unit_amount: 300, quantity: 1 },
    ],
  });
}

export function orderHeaders(key: string, idempotency: boolean): Record<string, string> {
  return {
    authorization: `Bearer ${key}`,
    'content-type': 'application/json',
    ...(idempotency ? { 'idempotency-key': '[<id>]' } : {}),
  };
}

// ---------------------------------------------------------------------------------------------
// The database, read-only: counters that tell round trips, and diagnostics

export const databaseName = (url: string): string => new URL(url).pathname.slice(1);

/** Runs one read-only query on the benchmark's database. */
export async function queryDb<R extends pg.QueryResultRow>(
  url: string,
  text: string,
  values: unknown[] = [],
): Promise<R[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end();
  }
}

/**
 * Writes out, now, what a closed-loop phase left dirty: PostgreSQL's dirty buffers (CHECKPOINT)
 * and the kernel's dirty pages (sync: the table files, nats-server's store). Left alone, the
 * kernel writes a page back 30 s after it was dirtied, in one burst, and every commit's WAL flush
 * waits behind it: a scenario's closed-loop warm-up (or the scenario before it) then stalled the
 * first paced rounds measured after it, 30 s later (in one run a project round's p99 was 1.2 s,
 * the load generator out of free connections). The paced rounds' own pages are left to the
 * kernel, as in steady service. CHECKPOINT needs superuser or pg_checkpoint; without it, sync only.
 */
export async function settleDisk(url: string): Promise<{ dirtyMiB: number | null; ms: number }> {
  const started = Date.now();
  const dirtyMiB = dirtyMemoryMiB();
  const client = new pg.Client({ connectionString: url, application_name: 'bench-settle' });
  await client.connect();
  try {
    await client.query('checkpoint');
  } catch {
    // Not allowed for this role: the kernel's part still helps.
  } finally {
    await client.end();
  }
  await new Promise<void>((resolve, reject) => execFile('sync', (err) => (err ? reject(err) : resolve())));
  return { dirtyMiB, ms: Date.now() - started };
}

/** The kernel's dirty page cache (/proc/meminfo `Dirty`) in MiB; null where there is none. */
function dirtyMemoryMiB(): number | null {
  try {
    const kb = /^Dirty:\s+(\d+) kB/m.exec(readFileSync('/proc/meminfo', 'utf8'))?.[1];
    return kb === undefined ? null : Math.round(Number(kb) / 1024);
  } catch {
    return null;
  }
}

/**
 * Orders of `accountId` carrying `marker` that committed, from commerce's table (read-only). The
 * load generator's 2xx count misses orders whose answers were still in flight when it stopped;
 * the expected number of deliveries comes from here.
 */
export async function ordersCommitted(url: string, accountId: string, marker: string): Promise<number> {
  const [row] = await queryDb<{ n: number }>(
    url,
    'select count(*)::int as n from commerce.orders where account_id = $1 and customer_name = $2',
    [accountId, marker],
  );
  return row?.n ?? 0;
}

/** Average sessions of one application (e.g. mcs-webhooks) in each state over a sampling window. */
export interface PoolActivity {
  samples: number;
  /** application_name → state (idle, active, idle in transaction, lock wait: …) → mean sessions. */
  byApp: Record<string, Record<string, number>>;
}

/**
 * Samples pg_stat_activity of the benchmark's database every 200 ms: how many of each part's
 * pooled connections are idle, running, idle inside a transaction, or waiting on a lock. A pool
 * with no idle connection left is where requests queue.
 */
export async function poolSampler(url: string): Promise<{ stop(): Promise<PoolActivity> }> {
  const client = new pg.Client({ connectionString: url, application_name: 'bench-sampler' });
  await client.connect();
  const sums: Record<string, Record<string, number>> = {};
  let samples = 0;
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      try {
        const { rows } = await client.query<{ app: string; state: string; n: number }>(
          `select application_name as app,
                  case when wait_event_type = 'Lock' then 'lock wait: ' || wait_event
                       when state = 'idle' then 'idle'
                       when state like 'idle in transaction%' then 'idle in transaction'
                       else coalesce(state, 'unknown') end as state,
                  count(*)::int as n
             from pg_stat_activity
            where datname = current_database() and pid <> pg_backend_pid() and application_name like 'mcs-%'
            group by 1, 2`,
        );
        samples++;
        for (const r of rows) {
          sums[r.app] ??= {};
          sums[r.app]![r.state] = (sums[r.app]![r.state] ?? 0) + r.n;
        }
      } catch {
        break;
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      await client.end().catch(() => {});
      const byApp: Record<string, Record<string, number>> = {};
      for (const [app, states] of Object.entries(sums)) {
        byApp[app] = Object.fromEntries(
          Object.entries(states).map(([k, v]) => [k, Math.round((v / Math.max(1, samples)) * 10) / 10]),
        );
      }
      return { samples, byApp };
    },
  };
}

export interface DbCounters {
  xactCommit: number;
  tupInserted: number;
  tupUpdated: number;
  tupDeleted: number;
  /** The whole server's (pg_stat_wal, pg_stat_bgwriter): what else runs on it counts too. */
  walBytes: number;
  /** Full-page images: the first change of a page after a checkpoint logs the whole page. */
  walFpi: number;
  checkpoints: number;
}

/**
 * The database's transaction and row counters (pg_stat_database). Backends publish them at most
 * once a second, so deltas over a 15 s window are good to a few per cent.
 */
export async function dbCounters(url: string): Promise<DbCounters | null> {
  try {
    const [row] = await queryDb<{
      x: string;
      i: string;
      u: string;
      d: string;
      wb: string;
      fpi: string;
      c: string;
    }>(
      url,
      `select xact_commit x, tup_inserted i, tup_updated u, tup_deleted d,
              (select wal_bytes from pg_stat_wal) wb, (select wal_fpi from pg_stat_wal) fpi,
              (select checkpoints_timed + checkpoints_req from pg_stat_bgwriter) c
         from pg_stat_database where datname = $1`,
      [databaseName(url)],
    );
    if (!row) return null;
    return {
      xactCommit: Number(row.x),
      tupInserted: Number(row.i),
      tupUpdated: Number(row.u),
      tupDeleted: Number(row.d),
      walBytes: Number(row.wb),
      walFpi: Number(row.fpi),
      checkpoints: Number(row.c),
    };
  } catch (err) {
    process.stderr.write(`could not read pg_stat_database: ${(err as Error).message}\n`);
    return null;
  }
}

export function counterDelta(a: DbCounters | null, b: DbCounters | null): DbCounters | null {
  if (!a || !b) return null;
  return {
    xactCommit: b.xactCommit - a.xactCommit,
    tupInserted: b.tupInserted - a.tupInserted,
    tupUpdated: b.tupUpdated - a.tupUpdated,
    tupDeleted: b.tupDeleted - a.tupDeleted,
    walBytes: b.walBytes - a.walBytes,
    walFpi: b.walFpi - a.walFpi,
    checkpoints: b.checkpoints - a.checkpoints,
  };
}

// ---------------------------------------------------------------------------------------------
// Statistics and output

/** The median of the finite values; null when there are none. */
export function median(values: Array<number | null | undefined>): number | null {
  const s = values
    .filter((v): v is number => typeof v === 'number' && Number.isFinite(v))
    .sort((a, b) => a - b);
  if (s.length === 0) return null;
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** a / b, or null when either is missing or b is 0. */
export function ratioOf(a: number | null | undefined, b: number | null | undefined): number | null {
  if (a === null || a === undefined || b === null || b === undefined || b === 0) return null;
  return a / b;
}

/** Nearest-rank percentile of ascending `sorted`; null when empty. */
export function percentile(sorted: number[], p: number): number | null {
  if (sorted.length === 0) return null;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

export interface Summary {
  count: number;
  min: number | null;
  p50: number | null;
  p95: number | null;
  p99: number | null;
  max: number | null;
  mean: number | null;
}

export function summarize(values: number[]): Summary {
  const s = [...values].sort((a, b) => a - b);
  const mean = s.length ? s.reduce((a, b) => a + b, 0) / s.length : null;
  return {
    count: s.length,
    min: s[0] ?? null,
    p50: percentile(s, 50),
    p95: percentile(s, 95),
    p99: percentile(s, 99),
    max: s.at(-1) ?? null,
    mean,
  };
}

export function round(v: number | null | undefined, digits = 1): number | null {
  if (v === null || v === undefined || !Number.isFinite(v)) return null;
  const f = 10 ** digits;
  return Math.round(v * f) / f;
}

export function fmt(v: string | number | null | undefined, digits = 1): string {
  if (v === null || v === undefined) return '–';
  if (typeof v === 'string') return v;
  if (!Number.isFinite(v)) return '–';
  if (Number.isInteger(v)) return v.toLocaleString('en-US');
  return v.toLocaleString('en-US', {
    minimumFractionDigits: digits,
    maximumFractionDigits: Math.max(digits, 2),
  });
}

export function pct(ratio: number | null): string {
  return ratio === null || !Number.isFinite(ratio) ? '–' : `${(ratio * 100).toFixed(1)} %`;
}

export function renderTable(t: Table): string {
  const cells = t.rows.map((r) => r.map((c) => fmt(c)));
  const widths = t.columns.map((c, i) => Math.max(c.length, ...cells.map((r) => (r[i] ?? '').length)));
  const line = (r: string[]) =>
    r
      .map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!)))
      .join('  ')
      .trimEnd();
  const out = [`== ${t.title}`, line(t.columns), line(widths.map((w) => '-'.repeat(w))), ...cells.map(line)];
  for (const n of t.notes ?? []) out.push(`   ${n}`);
  return out.join('\n');
}
