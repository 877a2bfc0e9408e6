// One HTTP attempt: POST the signed bytes, one deadline for connect + TLS + headers + body,
// no redirects, at most 64 KiB of the answer read. Connections are pooled per origin, and every
// connection is opened to an address that passed the target check (target.ts).
import net from 'node:net';
import { Agent, buildConnector, request } from 'undici';
import { resolveAllowed } from './target.ts';

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
  connectionsPerOrigin: number;
  /** Trust only this CA (tests); by default the system's roots plus NODE_EXTRA_CA_CERTS. */
  ca?: string;
}

export function createSender(opts: SenderOptions): Sender {
  const base = buildConnector({ timeout: opts.timeoutMs, ...(opts.ca ? { ca: opts.ca } : {}) });
  const agent = new Agent({
    connections: opts.connectionsPerOrigin,
    keepAliveTimeout: 30_000,
    headersTimeout: opts.timeoutMs,
    bodyTimeout: opts.timeoutMs,
    connect(options, callback) {
      const host = options.hostname;
      resolveAllowed(host.startsWith('[') ? host.slice(1, -1) : host, opts.allowPrivate, {
        timeoutMs: opts.timeoutMs,
      }).then(
        ({ address }) => {
          base(
            {
              ...options,
              hostname: address,
              servername: options.servername ?? (net.isIP(host) ? undefined : host),
            } as typeof options,
            callback,
          );
        },
        (err: Error) => callback(err, null),
      );
    },
  });

  async function send(url: string, body: string, headers: Record<string, string>): Promise<AttemptResult> {
    const started = performance.now();
    const ac = new AbortController();
    const timer = setTimeout(
      () => ac.abort(new Error(`timed out after ${opts.timeoutMs} ms`)),
      opts.timeoutMs,
    );
    const elapsed = () => Math.round(performance.now() - started);
    try {
      const res = await request(url, {
        method: 'POST',
        body,
        headers: { 'content-type': 'application/json', 'user-agent': USER_AGENT, ...headers },
        dispatcher: agent,
        signal: ac.signal,
      });
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of res.body) {
        const buf = chunk as Buffer;
        chunks.push(buf);
        size += buf.length;
        if (size >= RESPONSE_CAP) break; // leaving the loop destroys the rest of the body
      }
      const excerpt = Buffer.concat(chunks).subarray(0, RESPONSE_CAP).toString('utf8');
      const ok = res.statusCode >= 200 && res.statusCode < 300;
      return {
        ok,
        statusCode: res.statusCode,
        error: ok ? null : `HTTP ${res.statusCode}`,
        latencyMs: elapsed(),
        excerpt,
        retryAfterMs:
          res.statusCode === 429 || res.statusCode === 503
            ? parseRetryAfter(res.headers['retry-after'])
            : null,
      };
    } catch (err) {
      const e = err as Error & { code?: string };
      const reason = ac.signal.aborted
        ? (ac.signal.reason as Error).message
        : e.code
          ? `${e.code}: ${e.message}`
          : e.message;
      return {
        ok: false,
        statusCode: null,
        error: reason,
        latencyMs: elapsed(),
        excerpt: null,
        retryAfterMs: null,
      };
    } finally {
      clearTimeout(timer);
    }
  }

  return { send, close: () => agent.close() };
}
