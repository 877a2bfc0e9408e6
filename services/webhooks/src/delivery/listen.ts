// Attempts to listen endpoints (kit/listen.ts): a core NATS request to whichever gateway holds
// the endpoint's `mcs listen` stream, answered with what the developer's local server did. Every
// other URL goes to the HTTP sender. The attempt is recorded like an HTTP one: a 2xx from the
// local server succeeds; anything else, no session (no responders) or no answer within
// WEBHOOK_TIMEOUT fails and follows the retry schedule.
import { LISTEN_URL, type ListenAttempt, type ListenResult, listenSubject } from '@mcs/kit/listen';
import { ErrorCode, type NatsConnection, NatsError } from 'nats';
import type { AttemptResult, Sender } from './sender.ts';

export function createListenSender(opts: {
  nc: NatsConnection;
  prefix: string;
  timeoutMs: number;
  http: Sender;
}): Sender {
  const { nc, prefix, timeoutMs, http } = opts;

  async function sendToSession(
    body: string,
    headers: Record<string, string>,
    to: { endpointId: string; deliveryId: string; attempt: number },
  ): Promise<AttemptResult> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    const request: ListenAttempt = {
      delivery: to.deliveryId,
      event: headers['webhook-id'] ?? '',
      attempt: to.attempt,
      body,
      headers,
    };
    let reply: ListenResult;
    try {
      const msg = await nc.request(listenSubject(prefix, to.endpointId), JSON.stringify(request), {
        timeout: timeoutMs,
      });
      reply = msg.json<ListenResult>();
    } catch (err) {
      const code = err instanceof NatsError ? err.code : undefined;
      const error =
        code === ErrorCode.NoResponders
          ? 'no mcs listen session is connected to this endpoint'
          : code === ErrorCode.Timeout
            ? `timed out after ${timeoutMs} ms (mcs listen)`
            : `mcs listen: ${(err as Error).message}`;
      return { ok: false, statusCode: null, error, latencyMs: elapsed(), excerpt: null, retryAfterMs: null };
    }
    const status = typeof reply.status_code === 'number' ? reply.status_code : null;
    const ok = status !== null && status >= 200 && status < 300;
    return {
      ok,
      statusCode: status,
      error: ok
        ? null
        : (reply.error ?? (status !== null ? `HTTP ${status}` : 'no answer from the local server')),
      // The local server's time as the CLI measured it; the whole hop if it said nothing. It is
      // part of that hop, so never more: a number past what attempts.latency_ms holds (a CLI or
      // a caller of the ack route may send any whole number) failed the attempt's record, and
      // the delivery, never recorded, was sent again and again.
      latencyMs: Math.min(
        typeof reply.latency_ms === 'number' && reply.latency_ms >= 0
          ? Math.round(reply.latency_ms)
          : Infinity,
        elapsed(),
      ),
      excerpt: typeof reply.response_excerpt === 'string' ? reply.response_excerpt : null,
      retryAfterMs: null,
    };
  }

  return {
    send(url, body, headers, to) {
      if (url === LISTEN_URL) {
        if (!to) throw new Error('an attempt to a listen endpoint needs its endpoint and delivery');
        return sendToSession(body, headers, to);
      }
      return http.send(url, body, headers, to);
    },
    close: () => http.close(),
  };
}
