// The fetch every request goes through: one Idempotency-Key per POST (kept across its retries, so a
// retry after a lost answer replays the first answer instead of writing twice), and retries with
// exponential backoff on connection errors, 409 (the same key still in flight), 429 and 5xx,
// waiting what Retry-After says when the server says it.
import { ConnectionError } from './errors.ts';

export interface RetryOptions {
  /** Retries after the first attempt (default 2). */
  maxRetries: number;
  /** First backoff delay; doubles per retry, up to `maxDelayMs` (defaults 500 ms, 8 s). */
  initialDelayMs: number;
  maxDelayMs: number;
  /** The longest Retry-After honoured; a longer one ends the retries (default 60 s). */
  maxRetryAfterMs: number;
  /** Per-attempt time limit (default 60 s). */
  timeoutMs: number;
}

export const DEFAULT_RETRY: RetryOptions = {
  maxRetries: 2,
  initialDelayMs: 500,
  maxDelayMs: 8_000,
  maxRetryAfterMs: 60_000,
  timeoutMs: 60_000,
};

const RETRYABLE = new Set([409, 429, 500, 502, 503, 504]);

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });

/** Retry-After in whole seconds (or an HTTP date), in ms; undefined when absent or unreadable. */
function retryAfterMs(response: Response): number | undefined {
  const value = response.headers.get('retry-after');
  if (value === null) return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

/** A new key per POST: unique, and opaque to the server. */
export function newIdempotencyKey(): string {
  return `mcs-${globalThis.crypto.randomUUID()}`;
}

export function createRetryingFetch(
  base: (request: Request) => Promise<Response>,
  opts: RetryOptions,
  onRetry?: (info: {
    attempt: number;
    status: number | undefined;
    delayMs: number;
    request: Request;
  }) => void,
): (request: Request) => Promise<Response> {
  return async (request) => {
    const headers = new Headers(request.headers);
    if (request.method === 'POST' && !headers.has('idempotency-key'))
      headers.set('idempotency-key', newIdempotencyKey());
    // The body is read once and sent again as is on every attempt.
    const body =
      request.method === 'GET' || request.method === 'HEAD' ? undefined : await request.arrayBuffer();
    for (let attempt = 0; ; attempt++) {
      const signal = AbortSignal.any([request.signal, AbortSignal.timeout(opts.timeoutMs)]);
      const attemptRequest = new Request(request.url, { method: request.method, headers, body, signal });
      let response: Response;
      try {
        response = await base(attemptRequest);
      } catch (err) {
        if (request.signal.aborted) throw err;
        const delayMs = backoff(attempt, opts);
        if (attempt >= opts.maxRetries) {
          throw new ConnectionError({
            message: `No answer from ${new URL(request.url).origin}: ${err instanceof Error ? err.message : String(err)}`,
            type: 'connection_error',
            cause: err,
          });
        }
        onRetry?.({ attempt: attempt + 1, status: undefined, delayMs, request: attemptRequest });
        await sleep(delayMs, request.signal);
        continue;
      }
      if (!RETRYABLE.has(response.status) || attempt >= opts.maxRetries) return response;
      const asked = retryAfterMs(response);
      if (asked !== undefined && asked > opts.maxRetryAfterMs) return response;
      const delayMs = asked ?? backoff(attempt, opts);
      await response.body?.cancel();
      onRetry?.({ attempt: attempt + 1, status: response.status, delayMs, request: attemptRequest });
      await sleep(delayMs, request.signal);
    }
  };
}

/** Exponential backoff with jitter (50–100 % of the step), so clients that failed together spread out. */
function backoff(attempt: number, opts: RetryOptions): number {
  const step = Math.min(opts.maxDelayMs, opts.initialDelayMs * 2 ** attempt);
  return Math.round(step * (0.5 + Math.random() / 2));
}
