// `mcs listen`: deliveries to a local server without a public URL. Shared by the webhooks
// service (which sends), the gateway (which holds the CLI's stream) and the CLI.
//
// A listen endpoint is a webhook endpoint whose url is LISTEN_URL (test mode only). The webhooks
// service attempts its deliveries like any other — same engine, leases, retries, health — but an
// attempt is a core NATS request on listenSubject(endpoint) instead of an HTTP POST. The gateway
// that holds the endpoint's stream (GET /v1/webhooks/{id}/listen, NDJSON) is subscribed there: it
// writes the delivery to the stream and answers the request with the CLI's ack (POST
// /v1/webhooks/{id}/listen/ack: what the local server answered). No session connected: NATS
// answers "no responders" at once, and the attempt fails like a refused connection.

/** The url of a listen endpoint: not a network address, never reached over HTTP. */
export const LISTEN_URL = 'mcs-listen:';

/**
 * An endpoint id as one token of a NATS subject. NATS has no escaping: a space, CR or LF in a
 * subject is protocol text on the connection, and `.`, `*` or `>` change what it names. Callers
 * check ids first (isId); this refuses anything else that reaches a subject anyway.
 */
function token(endpointId: string): string {
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(endpointId)) throw new Error('not an endpoint id');
  return endpointId;
}

/** Where the webhooks service sends each attempt to a listen endpoint (a request). */
export function listenSubject(prefix: string, endpointId: string): string {
  return `${prefix}.listen.${token(endpointId)}`;
}

/**
 * Answered by the gateway replica holding a session of the endpoint: a second session of one
 * endpoint is refused (each would forward every delivery, and the first to stop would delete it).
 */
export function listenPresenceSubject(prefix: string, endpointId: string): string {
  return `${prefix}.listen_presence.${token(endpointId)}`;
}

/** Where an ack that reached another gateway replica goes to find the session's holder. */
export function listenAckSubject(prefix: string, endpointId: string): string {
  return `${prefix}.listen_ack.${token(endpointId)}`;
}

/** The request of one attempt (webhooks → gateway), JSON. */
export interface ListenAttempt {
  delivery: string;
  event: string;
  /** The attempt's number in the delivery's log. */
  attempt: number;
  /** The exact body, and the signature headers the service made with the endpoint's secret. */
  body: string;
  headers: Record<string, string>;
}

/** The answer to an attempt (gateway → webhooks), JSON: what the local server did. */
export interface ListenResult {
  status_code: number | null;
  error: string | null;
  latency_ms: number;
  response_excerpt: string | null;
}

/** The NDJSON lines of the stream (gateway → CLI). */
export type ListenFrame =
  | { type: 'ready'; endpoint: unknown; ping_interval_ms: number }
  | ({ type: 'delivery'; ack: string } & ListenAttempt)
  | { type: 'ping' };
