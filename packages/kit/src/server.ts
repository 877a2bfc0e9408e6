// A service process: one cleartext port that speaks HTTP/2 (Connect, gRPC and gRPC-Web, so stock
// gRPC clients work) and HTTP/1.1 keep-alive (Connect and gRPC-Web: curl, browsers' fetch, the
// gateway's calls by default), and an orderly stop on SIGTERM/SIGINT. Telling the two
// apart costs nothing measurable (test/bench/transport.ts: same calls/s and CPU as a bare
// http2.createServer).

import { mkdir, rm } from 'node:fs/promises';
import http from 'node:http';
import http2 from 'node:http2';
import net from 'node:net';
import { dirname } from 'node:path';
import type { DescService } from '@bufbuild/protobuf';
import type { ConnectRouter, Interceptor } from '@connectrpc/connect';
import { connectNodeAdapter } from '@connectrpc/connect-node';
import { apiError } from '@mcs/errors';
import { grpcHealth } from '@mcs/proto';
import { CALLER_HEADERS } from './caller.ts';
import { PartStartError, parseDuration } from './config.ts';
import { createFastUnary, type FastUnary } from './fast-unary.ts';
import { addHealthService, type HealthOptions, type HealthState } from './health.ts';
import { settleHeap } from './heap.ts';
import type { Logger } from './log.ts';
import { initMetrics, rpcMetrics, serveMetrics, startMetricsServer } from './metrics.ts';
import { addReflectionService } from './reflection.ts';
import {
  context,
  endSpan,
  extractContext,
  fetchHeadersGetter,
  initTracing,
  SpanKind,
  trace,
  tracer,
  tracing,
} from './tracing.ts';

export interface ServerHandle {
  port: number;
  /** The grpc.health.v1 status of this server (its dependencies). */
  health: HealthState;
  /** Stops accepting, lets in-flight calls finish, closes idle connections; resolves when all are gone. */
  close(): Promise<void>;
  /** A unary method of this server called from within the process (kit/in-process), by its path. */
  invoke: FastUnary['invoke'];
}

/** What an HTTP/2 client sends first ("prior knowledge" h2c, RFC 9113 §3.4); no HTTP/1 request starts so. */
const H2_PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

/** How long a new connection may stay silent before it is dropped (it has not picked a protocol yet). */
const SNIFF_TIMEOUT_MS = 30_000;

/**
 * Keep-alive on the HTTP/1.1 side: longer than any client agent keeps a free socket by default,
 * and announced in `Keep-Alive: timeout=…`, which Node's agent honours, so a client never sends on
 * a socket the server is closing.
 */
const KEEP_ALIVE_TIMEOUT_MS = 65_000;

/** Unfinished responses on an HTTP/1.1 socket (a count kept on the socket itself). */
const BUSY = Symbol('unfinished responses');
type BusySocket = net.Socket & { [BUSY]?: number };

/**
 * node:http's ServerResponse, with `Connection: close` in every head written once `closing()`
 * says the server is stopping, so a client does not reuse a connection about to close. For the
 * HTTP/1.1 servers of the gateway and the services (http.createServer's `ServerResponse` option).
 *
 * Instead of a set of the responses in progress, each given the header when the stop began: a
 * Set that takes and drops a response per request rehashes into new tables, and a discarded
 * table promoted to the old generation keeps the responses it held (with their requests and
 * whatever the handler hung on them) alive through every young-generation collection until the
 * next full one. The gateway's response set made it promote about 630 KB per scavenge at 1,100
 * keyed orders/s (about 2 MB/s, a full collection every few seconds); without it, 215 KB.
 */
export function closingResponse(closing: () => boolean): typeof http.ServerResponse {
  class ClosingResponse extends http.ServerResponse {
    override writeHead(statusCode: number, ...rest: unknown[]): this {
      if (closing() && !this.headersSent) this.setHeader('connection', 'close');
      return super.writeHead(statusCode, ...(rest as []));
    }
  }
  return ClosingResponse as typeof http.ServerResponse;
}

/** A service started (in a process of its own or with the others in one): its port, and how to stop it. */
export interface StartedPart {
  server: ServerHandle;
  /** Stops the part's work in reverse order of start (its port first). */
  stop(): Promise<void>;
}

/** Whether this process already serves SERVICE_METRICS_PORT (startConnectServer metricsPort). */
let metricsServing = false;

export async function startConnectServer(opts: {
  routes: (router: ConnectRouter) => void;
  port: number;
  host?: string;
  /** Also serve on this Unix domain socket (same protocols), for a gateway on the same machine. */
  socketPath?: string;
  interceptors?: Interceptor[];
  /** What the port's grpc.health.v1.Health reports on: the service's database and NATS. */
  health?: HealthOptions;
  /**
   * Also serve GET /metrics alone on this port (SERVICE_METRICS_PORT), for a network policy that
   * admits the scraper to metrics only; /metrics stays on the service's port too. One per
   * process: in one process the first service's serves the shared registry for all.
   */
  metricsPort?: number | undefined;
}): Promise<ServerHandle> {
  // Besides the service's own RPCs, every port serves grpc.health.v1.Health (probes) and gRPC
  // server reflection v1 + v1alpha describing all of them (grpcurl, `buf curl`).
  let health: HealthState | undefined;
  const routes = (router: ConnectRouter) => {
    opts.routes(router);
    const services = [...new Set(router.handlers.map((h): DescService => h.service))];
    const names = services.map((s) => s.typeName);
    health = addHealthService(router, names, opts.health ?? { dependencies: [] });
    addReflectionService(
      router,
      [...names, grpcHealth.Health.typeName],
      [...services.map((s) => s.file), grpcHealth.file_grpc_health_v1_health],
    );
  };
  const interceptors = [
    rpcMetrics(),
    ...(tracing.enabled ? [traceServer()] : []),
    ...(opts.interceptors ?? []),
  ];
  // Binary Connect unary calls over HTTP/1.1 or HTTP/2 (the gateway's) take the short path
  // (kit/fast-unary); every other call, protocol and path goes through the adapter.
  const fast = createFastUnary(interceptors);
  const handler = connectNodeAdapter({ routes: fast.capture(routes), interceptors });
  if (!health) throw new Error('connectNodeAdapter did not build the routes');
  const healthState: HealthState = health;
  let closing = false;

  // HTTP/2: sessions are tracked so close() can send GOAWAY (in-flight streams still finish).
  const h2 = http2.createServer((req, res) => {
    if (!fast.serve(req, res)) handler(req, res);
  });
  const sessions = new Set<http2.ServerHttp2Session>();
  h2.on('session', (s) => {
    sessions.add(s);
    s.on('close', () => sessions.delete(s));
    if (closing) s.close();
  });

  // HTTP/1.1: a socket is busy while a response on it is unfinished. Closing ends idle sockets at
  // once, and busy ones right after their last response, which says `Connection: close` when its
  // head is still unwritten (so the client's agent does not reuse the socket meanwhile). A count
  // on the socket, not a collection of responses: see closingResponse.
  const h1Sockets = new Set<net.Socket>();
  function responseClosed(this: http.ServerResponse): void {
    const socket = this.req.socket as BusySocket;
    socket[BUSY] = (socket[BUSY] ?? 1) - 1;
    if (socket[BUSY] === 0 && closing) socket.destroySoon();
  }
  const h1 = http.createServer(
    { keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS, ServerResponse: closingResponse(() => closing) },
    (req, res) => {
      const socket = req.socket as BusySocket;
      socket[BUSY] = (socket[BUSY] ?? 0) + 1;
      res.on('close', responseClosed);
      // Prometheus scrapes over HTTP/1.1 on the service's own port (kit/metrics).
      if (req.url === '/metrics' && req.method === 'GET') serveMetrics(req, res);
      else if (!fast.serve(req, res)) handler(req, res);
    },
  );
  h1.on('connection', (socket: net.Socket) => {
    h1Sockets.add(socket);
    socket.once('close', () => h1Sockets.delete(socket));
  });

  // The listener: read the first bytes of each connection, then hand the socket, bytes put back,
  // to the HTTP/2 or the HTTP/1.1 server. Both run the same Connect handler.
  const undecided = new Set<net.Socket>();
  const onConnection = (socket: net.Socket) => {
    undecided.add(socket);
    let seen: Buffer = Buffer.alloc(0);
    const timer = setTimeout(() => socket.destroy(), SNIFF_TIMEOUT_MS);
    const stop = () => {
      clearTimeout(timer);
      undecided.delete(socket);
      socket.off('data', onData);
      socket.off('error', onGone);
      socket.off('close', onGone);
    };
    const onGone = () => {
      stop();
      socket.destroy();
    };
    const onData = (chunk: Buffer) => {
      seen = seen.length === 0 ? chunk : Buffer.concat([seen, chunk]);
      const n = Math.min(seen.length, H2_PREFACE.length);
      const isH2Prefix = seen.compare(H2_PREFACE, 0, n, 0, n) === 0;
      // A prefix of the preface that is still short: wait for more (a client may write byte by byte).
      if (isH2Prefix && n < H2_PREFACE.length) return;
      stop();
      socket.pause();
      socket.unshift(seen);
      (isH2Prefix ? h2 : h1).emit('connection', socket);
      // Both servers take over the socket on 'connection'; the bytes put back are read on resume.
      process.nextTick(() => socket.resume());
    };
    socket.on('data', onData);
    socket.on('error', onGone);
    socket.on('close', onGone);
  };
  const server = net.createServer(onConnection);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    // SERVICE_HOST lets containers bind every interface; locally services stay on loopback.
    server.listen(opts.port, opts.host ?? process.env.SERVICE_HOST ?? '127.0.0.1', () => resolve());
  });
  // The same connections on a Unix domain socket (kit/config serviceSocket), opened once the port
  // is ours: a file left there is then a dead process's (kill -9 leaves it), never a live one's.
  const local = opts.socketPath ? net.createServer(onConnection) : undefined;
  if (local && opts.socketPath) {
    const path = opts.socketPath;
    try {
      await mkdir(dirname(path), { recursive: true, mode: 0o700 });
      await rm(path, { force: true });
      await new Promise<void>((resolve, reject) => {
        local.once('error', reject);
        local.listen(path, () => resolve());
      });
    } catch (err) {
      server.close();
      throw err;
    }
  }
  let metrics: http.Server | undefined;
  if (opts.metricsPort && !metricsServing) {
    metricsServing = true;
    try {
      metrics = await startMetricsServer(
        opts.metricsPort,
        opts.host ?? process.env.SERVICE_HOST ?? '127.0.0.1',
      );
    } catch (err) {
      metricsServing = false;
      server.close();
      local?.close();
      throw err;
    }
  }
  const address = server.address();
  return {
    port: typeof address === 'object' && address ? address.port : opts.port,
    health: healthState,
    invoke: fast.invoke,
    close: () =>
      new Promise<void>((resolve) => {
        closing = true;
        // Resolves once every accepted socket, whichever protocol and listener it took, is closed.
        let open = (local ? 2 : 1) + (metrics ? 1 : 0);
        const closed = () => --open === 0 && resolve();
        if (metrics) {
          metricsServing = false;
          metrics.close(closed);
          metrics.closeAllConnections();
        }
        local?.close(closed);
        server.close(closed);
        for (const socket of undecided) socket.destroy();
        for (const s of sessions) s.close();
        // A busy socket closes after its last response (responseClosed).
        for (const socket of h1Sockets) if (!(socket as BusySocket)[BUSY]) socket.destroySoon();
      }),
  };
}

/**
 * Runs `start`, then waits for SIGTERM or SIGINT and calls the stop function it returned
 * (which stops the parts in reverse order of start). A second signal exits at once.
 */
export async function runProcess(log: Logger, start: () => Promise<() => Promise<void>>): Promise<void> {
  const part = String(log.bindings().svc ?? 'unknown');
  initMetrics(part);
  await initTracing(part);
  // A standby of `pnpm start` (MCS_STANDBY=1): its code is loaded, and it starts when the
  // supervisor says so (the part it stands in for crashed), or leaves with the supervisor.
  if (process.send && process.env.MCS_STANDBY === '1') {
    // Its code is loaded: a standby waits with the heap that loading left settled (heap.ts).
    await settleHeap();
    await new Promise<void>((resolve) => {
      process.on('disconnect', () => process.exit(0));
      process.on('message', (m: { mcs?: unknown } | null) => {
        if (m?.mcs === 'go') resolve();
      });
    });
  }
  let stop: () => Promise<void>;
  try {
    stop = await start();
  } catch (err) {
    if (err instanceof PartStartError) log.fatal(`failed to start: ${err.message}`);
    else log.fatal({ err }, 'failed to start');
    process.exit(1);
  }
  // The stop is armed as soon as the part serves: a SIGTERM from then on drains, where before the
  // heap settled it would have killed the process with its requests.
  let stopping = false;
  const onSignal = (signal: string) => {
    if (stopping) process.exit(1);
    stopping = true;
    log.info({ signal }, 'stopping');
    // Draining may take as long as a delivery attempt (WEBHOOK_TIMEOUT) and recording it.
    const force = setTimeout(() => {
      log.error('did not stop in time; exiting');
      process.exit(1);
    }, stopGraceMs());
    force.unref();
    stop().then(
      () => tracing.shutdown().then(() => process.exit(0)),
      (err) => {
        log.error({ err }, 'error while stopping');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  process.on('SIGINT', () => onSignal('SIGINT'));
  // Loading and starting grew V8's heap to its maximum young generation; give back what is not
  // live now, so a part that stays idle does not hold it until V8's watchdog (heap.ts).
  const settled = await settleHeap();
  if (settled) log.debug(settled, 'heap settled after start-up');
  // Started by `pnpm start` (scripts/start.ts), which supervises over an IPC channel: say we are up.
  if (process.send) {
    process.send({ mcs: 'ready' });
    process.channel?.unref();
  }
  // The supervisor's channel closed without a stop (it was killed -9): stop as if told to, rather
  // than serve on as an orphan holding the ports the next `pnpm start` needs.
  if (process.send) {
    process.on('disconnect', () => {
      if (!stopping) onSignal('supervisor gone');
    });
  }
}

/**
 * A server span per call, child of the caller's (its `traceparent` metadata); the handler, its
 * statements and the events it writes run inside it (kit/outbox carries it on to NATS).
 */
function traceServer(): Interceptor {
  return (next) => (req) => {
    const parent = extractContext(req.header, fetchHeadersGetter);
    const span = tracer().startSpan(
      `${req.method.parent.typeName}/${req.method.name}`,
      {
        kind: SpanKind.SERVER,
        attributes: {
          'rpc.system': 'connect_rpc',
          'rpc.service': req.method.parent.typeName,
          'rpc.method': req.method.name,
          'mcs.request_id': req.header.get('request-id') ?? '',
        },
      },
      parent,
    );
    return context.with(trace.setSpan(parent, span), async () => {
      try {
        const res = await next(req);
        endSpan(span);
        return res;
      } catch (err) {
        endSpan(span, err);
        throw err;
      }
    });
  };
}

/** How long a stopping process may drain: WEBHOOK_TIMEOUT + 5 s, at least 15 s. */
function stopGraceMs(): number {
  try {
    return Math.max(15_000, parseDuration(process.env.WEBHOOK_TIMEOUT ?? '10s') + 5_000);
  } catch {
    return 15_000;
  }
}

/** Error codes of a PostgreSQL server that cannot be reached or is going away (node and SQLSTATE). */
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  '57P01', // admin_shutdown
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now (starting up, shutting down, recovering)
  '08000', // connection_exception
  '08001',
  '08003',
  '08004',
  '08006',
  '53300', // too_many_connections
]);
const UNREACHABLE_MESSAGES =
  /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|connection is closed|Client was closed/i;

/**
 * True when `err` (or an error it wraps, as drizzle does) says the database cannot be reached
 * now, as opposed to a fault of the statement: the caller may retry soon.
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  for (
    let e = err as { code?: unknown; message?: unknown; cause?: unknown } | undefined, depth = 0;
    e && depth < 5;
    depth++
  ) {
    if (typeof e.code === 'string' && UNREACHABLE_CODES.has(e.code)) return true;
    if (typeof e.message === 'string' && UNREACHABLE_MESSAGES.test(e.message)) return true;
    if (Array.isArray((e as { errors?: unknown }).errors)) {
      // AggregateError of a connect to several addresses (127.0.0.1 and ::1).
      if ((e as { errors: unknown[] }).errors.some((x) => isDatabaseUnavailable(x))) return true;
    }
    e = e.cause as typeof e;
  }
  return false;
}

/**
 * Logs every failure that is not a deliberate ConnectError; Connect masks those as internal.
 * A database that cannot be reached is no fault of the call: it becomes 503 `service_unavailable`
 * (retry shortly) with one warn line, instead of an api_error 500 with a stack.
 */
export function errorLogger(log: Logger): Interceptor {
  return (next) => async (req) => {
    try {
      return await next(req);
    } catch (err) {
      if (!(err instanceof Error && err.name === 'ConnectError')) {
        if (isDatabaseUnavailable(err)) {
          log.warn(
            { rpc: req.method.name, requestId: req.header.get('request-id'), err: (err as Error).message },
            'database unavailable',
          );
          const unavailable = apiError('service_unavailable');
          unavailable.metadata.set(CALLER_HEADERS.unavailable, 'database');
          throw unavailable;
        }
        log.error({ err, rpc: req.method.name, requestId: req.header.get('request-id') }, 'unexpected error');
      }
      throw err;
    }
  };
}
