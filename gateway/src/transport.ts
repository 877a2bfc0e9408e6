// The gateway's hop to a service: Connect unary calls in binary, over HTTP/1.1 keep-alive
// connections (undici's dispatcher, the default) or over one HTTP/2 connection (node:http2).
//
// connect-node's transport runs each call through its general machinery: interceptor chain,
// universal request and response objects, async iterables for both bodies, a linked
// AbortController aborted with a DOMException when the call ends, a ConnectError built eagerly.
// Under `pnpm bench ingest` that was about a third of the gateway's CPU per order. The gateway
// only makes unary calls with a message, headers and a deadline, so this transport does just
// that, speaking the same Connect protocol (connectrpc.com/docs/protocol): POST
// /<service>/<method>, `application/proto`, `connect-timeout-ms`, errors as the JSON end of a
// unary call, trailers as `trailer-` headers. Streaming calls go to connect-node's transport.
//
// HTTP/1.1 is the default because of the garbage collector. node:http2's request() binds its
// connect callback with AsyncResource.bind, which defines accessor properties with fresh
// closures on the bound function: that function gets a hidden class of its own, kept in the old
// space, and whatever those closures reach (the stream, its listeners, the call's state, the
// decoded answer) survives every young-generation collection until the next full one. Under
// load each call promoted a few KB and the gateway ran a major GC every few seconds. A call on a
// pooled HTTP/1.1 connection dies young, for less CPU per call. The listeners of a finished
// HTTP/2 call are detached all the same, so a stream that lingers holds only itself.
//
// On one machine (`pnpm start`) the calls go over the service's Unix domain socket instead of
// TCP loopback (kit/config serviceSocket): test/bench/transport.ts, median of three 5 s rounds,
// HTTP/1.1: 0.177 → 0.148 ms of client CPU and 0.243 → 0.207 ms of service CPU per call one at a
// time, 0.085 → 0.072 and 0.116 → 0.099 ms at 64 concurrent calls (2,486 → 2,929 and 8,623 →
// 9,980 calls/s).
//
// Failures of the connection itself (refused, reset, closed before an answer, no socket file)
// are `unavailable`: the service is down or restarting, and the gateway answers 503.
import http2 from 'node:http2';
import net from 'node:net';
import {
  create,
  type DescMessage,
  type DescMethod,
  type DescMethodUnary,
  fromBinary,
  isMessage,
  toBinary,
} from '@bufbuild/protobuf';
import { appendHeaders, Code, ConnectError, type Transport, type UnaryResponse } from '@connectrpc/connect';
import { codeFromHttpStatus, errorFromJsonBytes } from '@connectrpc/connect/protocol-connect';
import { raceCall } from '@mcs/kit/call-race';
import { type Dispatcher, Pool } from 'undici';

/** Answers larger than this are refused (no answer of ours comes near it). */
const READ_MAX_BYTES = 16 * 1024 * 1024;

/** How long a connection to a service may sit without calls before it is closed (HTTP/2). */
const IDLE_CLOSE_MS = 60_000;

/**
 * A call given up on an HTTP/2 connection (its deadline, its client gone) has the connection
 * PINGed; unanswered this long, the connection is taken for dead (its service's host vanished
 * without a FIN or RST, a NAT entry dropped) and closed, so the next call opens a new one instead
 * of waiting on it until its own deadline, and every call after it. Over HTTP/1.1 a call given up
 * closes its own connection already.
 */
export const H2_PING_TIMEOUT_MS = 2_000;

/**
 * HTTP/1.1 over TCP: how long a pooled connection may be silent before TCP probes it (a second
 * apart, ten unanswered end it). A call given up closes its own connection, but the pool's idle
 * ones to a service whose host vanished without a word would each be found dead by one call
 * running into its deadline, 10–30 s apiece; so they go within about 15 s (undici's default: 70).
 */
export const SERVICE_KEEPALIVE_MS = 5_000;

/** Connections per service over HTTP/1.1 (one call at a time each; more calls wait for one). */
const HTTP1_MAX_SOCKETS = 256;

/** The answer's head as Node gives it (HTTP/2 pseudo-headers are skipped). */
type RawHeaders = Record<string, string | string[] | number | undefined>;

/** How one call on the wire ends: the service answered, or the call broke (`unavailable`, …). */
interface CallSink {
  answered(status: number, headers: RawHeaders, bytes: Buffer): void;
  broken(err: ConnectError): void;
}

/** Starts one call (POST `path` with `headers` and `body`); returns its cancel (close or reset it). */
type Send = (path: string, headers: Record<string, string>, body: Uint8Array, sink: CallSink) => () => void;

/** Replaces a finished stream's listeners, so a late error on it is not an unhandled one. */
const ignore = () => {};

export interface UnaryTransportOptions {
  /** `1.1` (default): pooled keep-alive connections; `2`: one multiplexed connection. */
  httpVersion?: '1.1' | '2';
  /** Reach the service over this Unix domain socket (kit/config serviceSocket) instead of TCP. */
  socketPath?: string;
  /** HTTP/1.1 over TCP: silence before a keep-alive probe (SERVICE_KEEPALIVE_MS). */
  keepAliveMs?: number;
}

/**
 * Response headers that describe the connection, not the call: not copied into the call's
 * metadata (each append to a Headers validates and re-sorts; these were most of them).
 */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'date', 'content-length', 'transfer-encoding']);

const paths = new WeakMap<DescMethod, string>();
/** `/<service>/<method>`, built once per method. */
function pathOf(method: DescMethod): string {
  let path = paths.get(method);
  if (path === undefined) {
    path = `/${method.parent.typeName}/${method.name}`;
    paths.set(method, path);
  }
  return path;
}

export function createUnaryTransport(
  baseUrl: string,
  streaming: Transport,
  opts: UnaryTransportOptions = {},
): Transport {
  const origin = new URL(baseUrl).origin;
  const send =
    opts.httpVersion === '2'
      ? http2Sender(origin, opts.socketPath)
      : http1Sender(origin, opts.socketPath, opts.keepAliveMs ?? SERVICE_KEEPALIVE_MS);

  function unary<I extends DescMessage, O extends DescMessage>(
    method: DescMethodUnary<I, O>,
    signal: AbortSignal | undefined,
    timeoutMs: number | undefined,
    header: ConstructorParameters<typeof Headers>[0] | undefined,
    input: Parameters<Transport['unary']>[4],
  ): Promise<UnaryResponse<I, O>> {
    const message = isMessage(input, method.input) ? input : create(method.input, input as never);
    const body = toBinary(method.input, message);
    const outgoing: Record<string, string> = {
      'content-type': 'application/proto',
      'connect-protocol-version': '1',
    };
    if (timeoutMs !== undefined && timeoutMs > 0) outgoing['connect-timeout-ms'] = String(timeoutMs);
    if (header) {
      // The gateway's metadata is a plain object: copied as it is, without a Headers in between.
      if (header instanceof Headers || Array.isArray(header))
        new Headers(header).forEach((value, name) => {
          outgoing[name] = value;
        });
      else for (const name in header) outgoing[name.toLowerCase()] = header[name]!;
    }

    return raceCall<UnaryResponse<I, O>>(signal, timeoutMs, ({ resolve, reject }) =>
      send(pathOf(method), outgoing, body, {
        broken: reject,
        answered(status, raw, bytes) {
          const h = new Headers();
          const t = new Headers();
          for (const name in raw) {
            const value = raw[name];
            if (name.charCodeAt(0) === 58 /* ':' */ || value === undefined || HOP_BY_HOP.has(name)) continue;
            const trailer = name.startsWith('trailer-');
            const target = trailer ? t : h;
            const key = trailer ? name.slice(8) : name;
            if (Array.isArray(value)) for (const v of value) target.append(key, v);
            else target.append(key, String(value));
          }
          const type = h.get('content-type') ?? '';
          if (status !== 200 || type.startsWith('application/json')) {
            const fallback = new ConnectError(
              `HTTP ${status}`,
              codeFromHttpStatus(status),
              appendHeaders(h, t),
            );
            let err: ConnectError;
            try {
              err = type.startsWith('application/json')
                ? errorFromJsonBytes(bytes, appendHeaders(h, t), fallback)
                : fallback;
            } catch (e) {
              err = e instanceof ConnectError ? e : fallback;
            }
            return reject(err);
          }
          if (type !== 'application/proto')
            return reject(new ConnectError(`unexpected content type ${type}`, Code.Internal));
          let output: ReturnType<typeof fromBinary<O>>;
          try {
            output = fromBinary(method.output, bytes);
          } catch (e) {
            return reject(new ConnectError(`parse binary: ${(e as Error).message}`, Code.Internal));
          }
          resolve({ stream: false, service: method.parent, method, header: h, message: output, trailer: t });
        },
      }),
    );
  }

  return { unary, stream: streaming.stream.bind(streaming) } as Transport;
}

/**
 * Calls on pooled HTTP/1.1 keep-alive connections, through undici's dispatcher: the request goes
 * out as one write and the answer comes back to the handler below, with no request, response or
 * stream objects in between. Against a node:http agent this cut the client's CPU per call by a
 * quarter and the service's by a sixth (test/bench/transport.ts, 64 concurrent calls: 0.109 →
 * 0.082 ms and 0.117 → 0.098 ms). A POST is never retried by the pool; an idle connection is
 * unref'd (the process may exit) and closed before the service's keep-alive timeout, which its
 * answers announce.
 */
function http1Sender(origin: string, socketPath: string | undefined, keepAliveMs: number): Send {
  const pool = new Pool(origin, {
    connections: HTTP1_MAX_SOCKETS,
    pipelining: 1,
    connect: socketPath ? { socketPath } : { keepAlive: true, keepAliveInitialDelay: keepAliveMs },
  });
  return (path, headers, body, sink) => {
    let ended = false;
    let status = 0;
    let head: RawHeaders = {};
    const chunks: Buffer[] = [];
    let size = 0;
    let controller: Dispatcher.DispatchController | undefined;
    const broken = (err: ConnectError) => {
      if (ended) return;
      ended = true;
      sink.broken(err);
    };
    const handler: Dispatcher.DispatchHandler = {
      onRequestStart(c) {
        controller = c;
        // Cancelled before the request reached the pool's connection.
        if (ended) c.abort(new Error('the call was cancelled'));
      },
      onResponseStart(_c, statusCode, h) {
        status = statusCode;
        head = h as RawHeaders;
      },
      onResponseData(c, chunk) {
        if (ended) return;
        size += chunk.length;
        if (size > READ_MAX_BYTES) {
          c.abort(new Error('answer too large'));
          broken(new ConnectError(`answer larger than ${READ_MAX_BYTES} bytes`, Code.ResourceExhausted));
        } else chunks.push(chunk);
      },
      onResponseEnd() {
        if (ended) return;
        ended = true;
        sink.answered(status, head, chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));
      },
      // The connection failed or broke (refused, reset, closed): the service is unavailable.
      onResponseError(_c, err) {
        broken(new ConnectError(`${origin}: ${err.message}`, Code.Unavailable, undefined, undefined, err));
      },
    };
    try {
      pool.dispatch({ path, method: 'POST', headers, body }, handler);
    } catch (err) {
      broken(
        new ConnectError(`${origin}: ${(err as Error).message}`, Code.Unavailable, undefined, undefined, err),
      );
    }
    return () => {
      ended = true;
      // A call given up mid-way: its connection goes, and the service sees its client leave.
      controller?.abort(new Error('the call was cancelled'));
    };
  };
}

/** Calls multiplexed on one HTTP/2 connection (node:http2). */
function http2Sender(origin: string, socketPath?: string): Send {
  let session: http2.ClientHttp2Session | undefined;
  let active = 0;
  let idleTimer: NodeJS.Timeout | undefined;

  function connect(): http2.ClientHttp2Session {
    if (session && !session.closed && !session.destroyed) return session;
    const s = socketPath
      ? http2.connect(origin, { createConnection: () => net.connect(socketPath) })
      : http2.connect(origin);
    // A failed connection fails its streams, which report it; the session's own error is the same.
    s.on('error', () => {});
    const forget = () => {
      if (session === s) session = undefined;
    };
    s.once('close', forget);
    s.once('goaway', forget);
    session = s;
    return s;
  }

  /** A call on `s` was given up: is `s` still answering? (H2_PING_TIMEOUT_MS) */
  let pinging: http2.ClientHttp2Session | undefined;
  function check(s: http2.ClientHttp2Session): void {
    if (pinging === s || s.closed || s.destroyed) return;
    pinging = s;
    const dead = () => {
      if (pinging === s) pinging = undefined;
      if (session === s) session = undefined;
      s.destroy();
    };
    const timer = setTimeout(dead, H2_PING_TIMEOUT_MS);
    timer.unref();
    const sent = s.ping((err) => {
      clearTimeout(timer);
      if (err) dead();
      else if (pinging === s) pinging = undefined;
    });
    if (!sent) {
      // Too many PINGs unanswered already: what the timer would decide.
      clearTimeout(timer);
      dead();
    }
  }

  function idle(s: http2.ClientHttp2Session): void {
    if (active > 0) return;
    // Nothing in flight: the process may exit, and the connection closes after a while.
    s.unref();
    clearTimeout(idleTimer);
    idleTimer = setTimeout(() => {
      if (active === 0 && session === s) {
        session = undefined;
        s.close();
      }
    }, IDLE_CLOSE_MS);
    idleTimer.unref();
  }

  return (path, headers, body, sink) => {
    let s: http2.ClientHttp2Session;
    let stream: http2.ClientHttp2Stream;
    try {
      s = connect();
      s.ref();
      stream = s.request({ ':method': 'POST', ':path': path, ...headers });
    } catch (err) {
      sink.broken(new ConnectError(`cannot reach ${origin}: ${(err as Error).message}`, Code.Unavailable));
      return ignore;
    }
    active++;
    clearTimeout(idleTimer);
    let ended = false;
    let status = 0;
    let head: http2.IncomingHttpHeaders = {};
    const chunks: Buffer[] = [];
    let size = 0;
    const onResponse = (h: http2.IncomingHttpHeaders) => {
      status = Number(h[':status']);
      head = h;
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > READ_MAX_BYTES) {
        if (!end()) return;
        stream.close(http2.constants.NGHTTP2_CANCEL);
        sink.broken(new ConnectError(`answer larger than ${READ_MAX_BYTES} bytes`, Code.ResourceExhausted));
      } else chunks.push(chunk);
    };
    const onEnd = () => {
      if (!end()) return;
      if (status === 0)
        sink.broken(new ConnectError(`${origin} closed the call without an answer`, Code.Unavailable));
      else sink.answered(status, head, chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));
    };
    // The connection failed or broke (refused, reset, closed): the service is unavailable.
    const onError = (err: Error) => {
      if (end())
        sink.broken(
          new ConnectError(`${origin}: ${err.message}`, Code.Unavailable, undefined, undefined, err),
        );
    };
    const onClose = () => {
      if (end())
        sink.broken(new ConnectError(`${origin} closed the call without an answer`, Code.Unavailable));
    };
    /** The call is over: its stream lets go of this call (see the file's head). */
    function end(): boolean {
      if (ended) return false;
      ended = true;
      active--;
      idle(s);
      stream.off('response', onResponse);
      stream.off('data', onData);
      stream.off('end', onEnd);
      stream.off('error', onError);
      stream.off('close', onClose);
      stream.on('error', ignore);
      return true;
    }
    stream.on('response', onResponse);
    stream.on('data', onData);
    stream.on('end', onEnd);
    stream.on('error', onError);
    stream.on('close', onClose);
    stream.end(body);
    return () => {
      const given = end();
      if (!stream.closed) stream.close(http2.constants.NGHTTP2_CANCEL);
      if (given) check(s);
    };
  };
}
