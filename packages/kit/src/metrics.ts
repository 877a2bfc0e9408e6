// Prometheus metrics of a part (prom-client), served as text at `GET /metrics`: the services on
// their own port (the HTTP/1.1 side of kit/server), the gateway on METRICS_PORT. Names follow the
// Prometheus conventions (`mcs_` prefix, base units, `_total` counters); labels are bounded sets
// (route templates, RPC names, status codes, outcomes), never ids.
//
// The hot path stays cheap: a request's metric children are looked up in maps keyed by objects
// and numbers the caller already has (the route, the RPC, the status), so observing a request
// costs a few map lookups and no string building. Gauges that need a query (outbox backlog,
// pending retries, consumer pending) are computed when Prometheus scrapes, never per request.
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { Interceptor } from '@connectrpc/connect';
import { ConnectError } from '@connectrpc/connect';
import type pg from 'pg';
import client from 'prom-client';

export const registry = new client.Registry();

/** Buckets (seconds) of request latencies: 1 ms … 10 s. */
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

let initialised = false;

/**
 * Labels every series with `part` (gateway, accounts, …) and starts the process metrics
 * (CPU, memory, heap, GC, event-loop lag: `nodejs_eventloop_lag_seconds` and its percentiles).
 */
export function initMetrics(part: string): void {
  if (initialised) return;
  initialised = true;
  registry.setDefaultLabels({ part });
  client.collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: 20 });
}

/** Answers a Prometheus scrape. */
export function serveMetrics(_req: IncomingMessage, res: ServerResponse): void {
  registry.metrics().then(
    (text) => {
      res.writeHead(200, { 'content-type': registry.contentType, 'cache-control': 'no-store' });
      res.end(text);
    },
    (err: Error) => {
      res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(`metrics failed: ${err.message}\n`);
    },
  );
}

// ---- HTTP (the gateway) -------------------------------------------------------------------

const httpRequests = new client.Counter({
  name: 'mcs_http_requests_total',
  help: 'HTTP requests answered, by route template, method and status code.',
  labelNames: ['route', 'method', 'status'] as const,
  registers: [registry],
});
const httpDuration = new client.Histogram({
  name: 'mcs_http_request_duration_seconds',
  help: 'Time from a request’s arrival to its answer, by route template, method and status code.',
  labelNames: ['route', 'method', 'status'] as const,
  buckets: LATENCY_BUCKETS,
  registers: [registry],
});

type Pair = {
  count: client.Counter.Internal;
  time: client.Histogram.Internal<'route' | 'method' | 'status'>;
};
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);
/** route → method → status → children. */
const httpChildren = new Map<string, Map<string, Map<number, Pair>>>();

/**
 * Records one answered request. `route` is a template (`/v1/orders/{id}`) or a fixed name of a
 * group (`unmatched`, `docs`, `dashboard`), never a raw path.
 */
/**
 * Serves GET /metrics alone on `port` (anything else is 404): Prometheus's port, apart from the
 * public API (the gateway's METRICS_PORT) or a service's keyless RPCs (SERVICE_METRICS_PORT), so
 * a network policy can admit the scraper to metrics and to nothing else.
 */
export async function startMetricsServer(port: number, host: string): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    if (req.url === '/metrics' && req.method === 'GET') serveMetrics(req, res);
    else {
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end('only GET /metrics here\n');
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolve);
  });
  return server;
}

export function observeHttp(route: string, method: string, status: number, seconds: number): void {
  // Unknown methods share one label value: a client cannot grow the series.
  const m = METHODS.has(method) ? method : 'OTHER';
  let byMethod = httpChildren.get(route);
  if (!byMethod) {
    byMethod = new Map();
    httpChildren.set(route, byMethod);
  }
  let byStatus = byMethod.get(m);
  if (!byStatus) {
    byStatus = new Map();
    byMethod.set(m, byStatus);
  }
  let pair = byStatus.get(status);
  if (!pair) {
    const labels = { route, method: m, status: String(status) };
    pair = { count: httpRequests.labels(labels), time: httpDuration.labels(labels) };
    byStatus.set(status, pair);
  }
  pair.count.inc();
  pair.time.observe(seconds);
}

// ---- RPC (the services) -------------------------------------------------------------------

const rpcRequests = new client.Counter({
  name: 'mcs_rpc_requests_total',
  help: 'Connect/gRPC calls served, by RPC (service/method) and Connect code.',
  labelNames: ['rpc', 'code'] as const,
  registers: [registry],
});
const rpcDuration = new client.Histogram({
  name: 'mcs_rpc_request_duration_seconds',
  help: 'Time to serve a Connect/gRPC call, by RPC (service/method) and Connect code.',
  labelNames: ['rpc', 'code'] as const,
  buckets: LATENCY_BUCKETS,
  registers: [registry],
});
type RpcPair = { count: client.Counter.Internal; time: client.Histogram.Internal<'rpc' | 'code'> };
const CODE_NAMES = [
  'ok',
  'canceled',
  'unknown',
  'invalid_argument',
  'deadline_exceeded',
  'not_found',
  'already_exists',
  'permission_denied',
  'resource_exhausted',
  'failed_precondition',
  'aborted',
  'out_of_range',
  'unimplemented',
  'internal',
  'unavailable',
  'data_loss',
  'unauthenticated',
];
/** The RPC's method descriptor → code → children. */
const rpcChildren = new WeakMap<object, RpcPair[]>();

function observeRpc(method: { name: string; parent: { typeName: string } }, code: number, seconds: number) {
  let byCode = rpcChildren.get(method);
  if (!byCode) {
    byCode = [];
    rpcChildren.set(method, byCode);
  }
  let pair = byCode[code];
  if (!pair) {
    const labels = { rpc: `${method.parent.typeName}/${method.name}`, code: CODE_NAMES[code] ?? 'unknown' };
    pair = { count: rpcRequests.labels(labels), time: rpcDuration.labels(labels) };
    byCode[code] = pair;
  }
  pair.count.inc();
  pair.time.observe(seconds);
}

/** Counts and times every call a service serves. */
export function rpcMetrics(): Interceptor {
  return (next) => async (req) => {
    const started = performance.now();
    try {
      const res = await next(req);
      observeRpc(req.method, 0, (performance.now() - started) / 1000);
      return res;
    } catch (err) {
      observeRpc(req.method, ConnectError.from(err).code, (performance.now() - started) / 1000);
      throw err;
    }
  };
}

// ---- PostgreSQL pool ----------------------------------------------------------------------

/** The pools of this process by name (`mcs-<name>`): one per createDatabase. */
const pools = new Map<string, pg.Pool>();

new client.Gauge({
  name: 'mcs_db_pool_connections',
  help: 'PostgreSQL connections of a pool, by state (idle or in use).',
  labelNames: ['pool', 'state'] as const,
  registers: [registry],
  collect() {
    this.reset();
    for (const [name, pool] of pools) {
      this.set({ pool: name, state: 'idle' }, pool.idleCount);
      this.set({ pool: name, state: 'in_use' }, pool.totalCount - pool.idleCount);
    }
  },
});
new client.Gauge({
  name: 'mcs_db_pool_waiting_queries',
  help: 'Queries waiting for a free connection of a pool (the pool is exhausted while above 0).',
  labelNames: ['pool'] as const,
  registers: [registry],
  collect() {
    this.reset();
    for (const [name, pool] of pools) this.set({ pool: name }, pool.waitingCount);
  },
});
new client.Gauge({
  name: 'mcs_db_pool_max_connections',
  help: 'Size of a pool (DATABASE_POOL_SIZE).',
  labelNames: ['pool'] as const,
  registers: [registry],
  collect() {
    this.reset();
    for (const [name, pool] of pools) this.set({ pool: name }, pool.options.max ?? 10);
  },
});

/** Reports a pool's connections and waiting queries (read at scrape time) until `pool.end()`. */
export function registerPoolMetrics(name: string, pool: pg.Pool): void {
  pools.set(name, pool);
  const end = pool.end.bind(pool);
  pool.end = ((cb?: () => void) => {
    if (pools.get(name) === pool) pools.delete(name);
    return cb ? end(cb) : end();
  }) as typeof pool.end;
}

// ---- gauges read when Prometheus scrapes --------------------------------------------------

export type Sample = { labels?: Record<string, string>; value: number };
type Source = () => Promise<Sample[]>;
const scraped = new Map<string, Set<Source>>();

/**
 * A gauge whose samples `read` returns when Prometheus scrapes, at most once per
 * `minIntervalMs` (a count over a large table is not re-run by every scraper); a read that
 * fails leaves its samples out. Several sources may feed one gauge (e.g. two relays in a test
 * process). Returns a function that removes the source.
 */
export function scrapedGauge(opts: {
  name: string;
  help: string;
  labelNames?: readonly string[];
  minIntervalMs?: number;
  read: Source;
}): () => void {
  let last: Sample[] = [];
  let at = Number.NEGATIVE_INFINITY;
  const source: Source = async () => {
    const now = Date.now();
    if (now - at >= (opts.minIntervalMs ?? 0)) {
      try {
        last = await opts.read();
      } catch {
        last = [];
      }
      at = now;
    }
    return last;
  };
  let sources = scraped.get(opts.name);
  if (!sources) {
    const set = new Set<Source>();
    sources = set;
    scraped.set(opts.name, set);
    new client.Gauge({
      name: opts.name,
      help: opts.help,
      labelNames: (opts.labelNames ?? []) as string[],
      registers: [registry],
      async collect() {
        this.reset();
        const all = await Promise.all([...set].map((read) => read()));
        for (const samples of all) {
          for (const { labels, value } of samples) {
            if (labels) this.set(labels, value);
            else this.set(value);
          }
        }
      },
    });
  }
  sources.add(source);
  return () => sources.delete(source);
}

export { client };
