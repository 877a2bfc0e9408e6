// One HTTP attempt: POST the signed bytes, one deadline for connect + TLS + headers + body (a
// 2xx status in time succeeds though its body stalls), no redirects, at most 64 KiB of the
// answer read. Connections are pooled per origin, and every connection is opened to an address
// that passed the target check (target.ts).
import type { LookupAddress } from 'node:dns';
import net from 'node:net';
import { Agent, buildConnector, type Dispatcher } from 'undici';
import { type LookupAll, resolveAllAllowed, resolveAllowed } from './target.ts';

export const RESPONSE_CAP = 64 * 1024;
export const USER_AGENT = 'mcs-webhooks/1.0 (+https://github.com/mcs)';

export interface AttemptResult {
  ok: boolean;
  statusCode: number | null;
  error: string | null;
  latencyMs: number;
  /** The start of the answer's body, as text. */
  excerpt: string | null;
  /** A 429 or 503 answer's Retry-After (seconds or an HTTP date), in ms from now; else null. */
  retryAfterMs: number | null;
}

/** Retry-After's delay in ms: delta-seconds or an HTTP date (RFC 9110 10.2.3); null if neither. */
export function parseRetryAfter(value: string | string[] | undefined, now = Date.now()): number | null {
  const raw = (Array.isArray(value) ? value[0] : value)?.trim();
  if (!raw) return null;
  if (/^\d+$/.test(raw)) return Math.min(Number(raw), 10 ** 9) * 1000;
  // An HTTP date names its month (and day): anything else Date.parse would guess at is refused.
  if (!/[A-Za-z]{3}/.test(raw)) return null;
  const at = Date.parse(raw);
  if (Number.isNaN(at)) return null;
  return Math.max(0, at - now);
}

/** Which attempt a send is (listen endpoints route by it; HTTP ignores it). */
export interface AttemptOf {
  endpointId: string;
  deliveryId: string;
  attempt: number;
}

export interface Sender {
  send(url: string, body: string, headers: Record<string, string>, to?: AttemptOf): Promise<AttemptResult>;
  close(): Promise<void>;
}

export interface SenderOptions {
  timeoutMs: number;
  allowPrivate: boolean;
  /**
   * Connections to one host (scheme, name, port): no fewer than the attempts the process can have
   * in flight at once — the lanes' maxInFlight(WEBHOOK_CONCURRENCY), three times the overall cap
   * since hanging attempts moved to the slow lane keep their connections, plus the prober's batch.
   * The share of one endpoint is the engine's to limit (its lanes); a lower cap here would make
   * the endpoints of one host, whatever their accounts, queue for each other's connections (a
   * healthy one behind hanging ones), and time spent queued counts against the attempt's deadline.
   */
  connectionsPerOrigin: number;
  /** Trust only this CA (tests); by default the system's roots plus NODE_EXTRA_CA_CERTS. */
  ca?: string;
  /** Resolves names (tests); by default the system's resolver. */
  lookup?: LookupAll;
}

export function createSender(opts: SenderOptions): Sender {
  const resolveOpts = { timeoutMs: opts.timeoutMs, ...(opts.lookup ? { lookup: opts.lookup } : {}) };
  // A name is resolved by net.connect through this lookup, which answers only when every address
  // is allowed (the check on what the connection really uses), and with all of them: the socket
  // tries each in turn (autoSelectFamily, 250 ms apart), so a receiver with one address down, or
  // an IPv6 address this host cannot reach, is reached on the next one as any other client would.
  const lookup: net.LookupFunction = (hostname, options, callback) => {
    resolveAllAllowed(hostname, opts.allowPrivate, resolveOpts).then(
      (all) => {
        if (options.all) (callback as (err: null, all: LookupAddress[]) => void)(null, all);
        else callback(null, all[0]!.address, all[0]!.family);
      },
      (err: NodeJS.ErrnoException) => callback(err, '', 0),
    );
  };
  const base = buildConnector({
    timeout: opts.timeoutMs,
    lookup,
    autoSelectFamily: true,
    ...(opts.ca ? { ca: opts.ca } : {}),
  } as buildConnector.BuildOptions);
  const agent = new Agent({
    connections: opts.connectionsPerOrigin,
    keepAliveTimeout: 30_000,
    headersTimeout: opts.timeoutMs,
    bodyTimeout: opts.timeoutMs,
    connect(options, callback) {
      const host = options.hostname;
      const bare = host.startsWith('[') ? host.slice(1, -1) : host;
      // A name: the lookup above resolves and checks it. An address is never looked up: checked here.
      if (!net.isIP(bare)) {
        base(options, callback);
        return;
      }
      resolveAllowed(bare, opts.allowPrivate, resolveOpts).then(
        ({ address }) => base({ ...options, hostname: address } as typeof options, callback),
        (err: Error) => callback(err, null),
      );
    },
  });

  // The attempt is dispatched with a bare handler rather than through undici's request(): its
  // request handler, body stream and abort wiring all outlived the young-generation collections
  // until the next full one (each attempt promoted 2.6–3.4 KB to the old space; bare dispatch 0.6).
  function send(url: string, body: string, headers: Record<string, string>): Promise<AttemptResult> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    return new Promise<AttemptResult>((resolve) => {
      let settled = false;
      let controller: Dispatcher.DispatchController | null = null;
      let timedOut: Error | null = null;
      let statusCode = 0;
      let retryAfter: string | string[] | undefined;
      const chunks: Buffer[] = [];
      let size = 0;
      const settle = (result: AttemptResult) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(result);
      };
      const failed = (error: string) =>
        settle({
          ok: false,
          statusCode: null,
          error,
          latencyMs: elapsed(),
          excerpt: null,
          retryAfterMs: null,
        });
      const answered = () => {
        const ok = statusCode >= 200 && statusCode < 300;
        settle({
          ok,
          statusCode,
          error: ok ? null : `HTTP ${statusCode}`,
          latencyMs: elapsed(),
          excerpt: Buffer.concat(chunks).subarray(0, RESPONSE_CAP).toString('utf8'),
          retryAfterMs: statusCode === 429 || statusCode === 503 ? parseRetryAfter(retryAfter) : null,
        });
      };
      // A 2xx status line that came in time is the answer (spec 6.2: "a 2xx status within 10
      // seconds"), though its body stalls or breaks off: counted as a failure, the event would be
      // sent again to a receiver that had taken it.
      const accepted = () => statusCode >= 200 && statusCode < 300;
      // One deadline for connect + TLS + headers + body.
      const timer = setTimeout(() => {
        timedOut = new Error(`timed out after ${opts.timeoutMs} ms`);
        if (accepted()) answered(); // before the abort, whose error would settle it as failed
        controller?.abort(timedOut);
        failed(timedOut.message);
      }, opts.timeoutMs);
      let target: URL;
      try {
        target = new URL(url);
      } catch (err) {
        failed((err as Error).message);
        return;
      }
      agent.dispatch(
        {
          origin: target.origin,
          path: `${target.pathname}${target.search}`,
          method: 'POST',
          body,
          headers: { 'content-type': 'application/json', 'user-agent': USER_AGENT, ...headers },
        },
        {
          onRequestStart(c) {
            controller = c;
            if (timedOut) c.abort(timedOut);
          },
          onResponseStart(_c, status, head) {
            statusCode = status;
            retryAfter = head['retry-after'];
          },
          onResponseData(c, chunk) {
            if (settled) return;
            chunks.push(chunk);
            size += chunk.length;
            if (size >= RESPONSE_CAP) {
              // Enough of the answer: the rest is not read (its connection goes).
              answered();
              c.abort(new Error('response cap reached'));
            }
          },
          onResponseEnd() {
            answered();
          },
          onResponseError(_c, err) {
            if (accepted()) return answered(); // the body broke off after a 2xx status
            const e = err as Error & { code?: string; errors?: Error[] };
            // Every address of a name refused: an AggregateError, its own message empty.
            const message = e.message || (e.errors ?? []).map((x) => x.message).join('; ');
            failed(
              timedOut
                ? timedOut.message
                : e.code === 'ERR_ASSERTION'
                  ? // undici asserts on some malformed answers (a status below 100): the receiver's
                    // fault, not an internal error, and its multi-line text is no last_error.
                    'invalid HTTP response'
                  : e.code
                    ? `${e.code}: ${message}`
                    : message,
            );
          },
        },
      );
    });
  }

  return { send, close: () => agent.close() };
}
