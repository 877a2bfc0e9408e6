// The REST client every API command uses: Bearer key, JSON in and out, and failures turned
// into errors that keep what the API said (type, code, param, message) and its Request-Id.
import http from 'node:http';
import https from 'node:https';
import { Readable } from 'node:stream';
import { CliError } from './args.ts';

/** An answer of the API that was not 2xx: the spec's error body, plus status and Request-Id. */
export class ApiError extends Error {
  readonly status: number;
  readonly type: string;
  readonly code: string;
  readonly param: string | undefined;
  readonly requestId: string | undefined;
  readonly body: unknown;
  constructor(status: number, body: unknown, requestId: string | undefined) {
    const e = ((body as { error?: Record<string, unknown> } | null)?.error ?? {}) as Record<string, unknown>;
    super(typeof e.message === 'string' ? e.message : `HTTP ${status} without an error body`);
    this.status = status;
    this.type = typeof e.type === 'string' ? e.type : 'api_error';
    this.code = typeof e.code === 'string' ? e.code : 'unknown';
    this.param = typeof e.param === 'string' ? e.param : undefined;
    this.requestId = requestId;
    this.body = body;
  }

  /** One line for a terminal: the message, then code, param, status and Request-Id. */
  describe(): string {
    const bits = [`code ${this.code}`];
    if (this.param) bits.push(`param ${this.param}`);
    bits.push(`HTTP ${this.status}`);
    if (this.requestId) bits.push(`Request-Id ${this.requestId}`);
    return `${this.message} (${bits.join(', ')})`;
  }
}

// biome-ignore lint/suspicious/noExplicitAny: API answers are JSON the commands read by field
export type Json = any;

export interface Api {
  baseUrl: string;
  livemode: boolean;
  get(path: string, query?: Record<string, string | number | undefined>): Promise<Json>;
  post(path: string, body?: unknown, opts?: { idempotencyKey?: string }): Promise<Json>;
  del(path: string): Promise<Json>;
  /**
   * A raw request (streams): the Response, after the same error handling for non-2xx. Each goes
   * over a connection of its own, never one of the pool the other requests share: a stream given
   * up because its connection died without a word (a laptop's sleep, a new network) must not open
   * its next attempt on another connection of that same dead pool.
   */
  open(
    path: string,
    init: { method?: string; signal?: AbortSignal; headers?: Record<string, string> },
  ): Promise<Response>;
  /**
   * The same API over connections of its own (a keep-alive agent), which `reset()` drops: for a
   * long-running command (`mcs listen`) that learns its connections died without a word, so that
   * its next requests do not each wait out their time-out on one of them.
   */
  withOwnConnections(): Api & { reset(): void };
}

const TIMEOUT_MS = 30_000;

/** How a request reaches the API: fetch (its shared pool), or node:http on an agent of our own. */
type Transport = (url: string, init: RequestInit & { headers: Record<string, string> }) => Promise<Response>;

const viaFetch: Transport = (url, init) => fetch(url, init);

export function createApi(baseUrl: string, apiKey: string, transport: Transport = viaFetch): Api {
  const headers = { authorization: `Bearer ${apiKey}`, 'user-agent': 'mcs-cli/1' };

  async function fail(res: Response): Promise<never> {
    const text = await res.text().catch(() => '');
    let body: unknown = null;
    try {
      body = JSON.parse(text);
    } catch {}
    throw new ApiError(res.status, body, res.headers.get('request-id') ?? undefined);
  }

  async function send(method: string, path: string, init: RequestInit = {}): Promise<Response> {
    let res: Response;
    const signal = init.signal ?? AbortSignal.timeout(TIMEOUT_MS);
    try {
      res = await transport(`${baseUrl}${path}`, {
        method,
        ...init,
        headers: { ...headers, ...(init.headers as Record<string, string> | undefined) },
        signal,
      });
    } catch (err) {
      const e = err as Error & { cause?: { code?: string; errors?: Array<{ code?: string }> } };
      if (e.name === 'TimeoutError' || (signal.reason as Error | undefined)?.name === 'TimeoutError')
        throw new CliError(`the API at ${baseUrl} did not answer in ${TIMEOUT_MS / 1000} s`);
      if (e.name === 'AbortError') throw err;
      const why = e.cause?.code ?? e.cause?.errors?.[0]?.code ?? e.message;
      throw new CliError(`cannot reach the API at ${baseUrl} (${why}): is the stack running (pnpm start)?`);
    }
    if (!res.ok) await fail(res);
    return res;
  }

  async function json(method: string, path: string, init: RequestInit = {}): Promise<Json> {
    const res = await send(method, path, init);
    const text = await res.text();
    try {
      return JSON.parse(text);
    } catch {
      throw new CliError(`the API at ${baseUrl} answered ${method} ${path} with something that is not JSON`);
    }
  }

  return {
    baseUrl,
    livemode: apiKey.startsWith('sk_live_') || apiKey.startsWith('pk_live_'),
    get(path, query = {}) {
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(query)) if (v !== undefined) q.set(k, String(v));
      const qs = q.toString();
      return json('GET', qs ? `${path}?${qs}` : path);
    },
    post(path, body = {}, opts = {}) {
      return json('POST', path, {
        body: JSON.stringify(body),
        headers: {
          'content-type': 'application/json',
          ...(opts.idempotencyKey ? { 'idempotency-key': opts.idempotencyKey } : {}),
        },
      });
    },
    del(path) {
      return json('DELETE', path);
    },
    withOwnConnections() {
      let agent = keepAliveAgent(baseUrl);
      const api = createApi(baseUrl, apiKey, (url, init) => viaNode(url, init, agent));
      return Object.assign(api, {
        reset() {
          agent.destroy();
          agent = keepAliveAgent(baseUrl);
        },
      });
    },
    async open(path, init) {
      let res: Response;
      try {
        res = await viaNode(
          `${baseUrl}${path}`,
          {
            method: init.method ?? 'GET',
            headers: { ...headers, ...init.headers },
            signal: init.signal ?? null,
          },
          false,
        );
      } catch (err) {
        const e = err as Error & { code?: string };
        if (e.name === 'AbortError') throw err;
        throw new CliError(
          `cannot reach the API at ${baseUrl} (${e.code ?? e.message}): is the stack running (pnpm start)?`,
        );
      }
      if (!res.ok) await fail(res);
      return res;
    },
  };
}

function keepAliveAgent(baseUrl: string): http.Agent {
  return baseUrl.startsWith('https:')
    ? new https.Agent({ keepAlive: true })
    : new http.Agent({ keepAlive: true });
}

/**
 * One request over node:http(s) on `agent` (false: a new connection, no pool), answered as a
 * fetch Response. No redirect is followed (the API answers none).
 */
function viaNode(
  url: string,
  init: RequestInit & { headers: Record<string, string> },
  agent: http.Agent | false,
): Promise<Response> {
  const target = new URL(url);
  const client = target.protocol === 'https:' ? https : http;
  const signal = init.signal ?? undefined;
  return new Promise((resolve, reject) => {
    const req = client.request(
      target,
      { method: init.method ?? 'GET', headers: init.headers, agent, ...(signal ? { signal } : {}) },
      (res) => {
        const answer = new Headers();
        for (const [name, value] of Object.entries(res.headers)) {
          if (value !== undefined) answer.set(name, Array.isArray(value) ? value.join(', ') : value);
        }
        const status = res.statusCode ?? 502;
        const empty = status === 204 || status === 304;
        if (empty) res.resume();
        resolve(
          new Response(empty ? null : (Readable.toWeb(res) as ReadableStream<Uint8Array>), {
            status,
            headers: answer,
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(typeof init.body === 'string' ? init.body : undefined);
  });
}
