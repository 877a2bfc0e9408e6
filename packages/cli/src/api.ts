// The REST client every API command uses: Bearer key, JSON in and out, and failures turned
// into errors that keep what the API said (type, code, param, message) and its Request-Id.
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
  /** A raw request (streams): the Response, after the same error handling for non-2xx. */
  open(
    path: string,
    init: { method?: string; signal?: AbortSignal; headers?: Record<string, string> },
  ): Promise<Response>;
}

const TIMEOUT_MS = 30_000;

export function createApi(baseUrl: string, apiKey: string): Api {
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
    try {
      res = await fetch(`${baseUrl}${path}`, {
        method,
        ...init,
        headers: { ...headers, ...(init.headers as Record<string, string> | undefined) },
        signal: init.signal ?? AbortSignal.timeout(TIMEOUT_MS),
      });
    } catch (err) {
      const e = err as Error & { cause?: { code?: string; errors?: Array<{ code?: string }> } };
      if (e.name === 'TimeoutError')
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
    open(path, init) {
      return send(init.method ?? 'GET', path, {
        ...(init.signal ? { signal: init.signal } : {}),
        ...(init.headers ? { headers: init.headers } : {}),
      });
    },
  };
}
