import { baseEnvSchema, duration, parseEnv, positiveDuration } from '@mcs/kit/config';
import { z } from 'zod';
import { parseTrustedProxies } from './client-address.ts';

export const gatewayEnvSchema = baseEnvSchema.extend({
  /** Base of every error's doc_url; default http://HOST:PORT/docs. */
  DOCS_URL: z.string().url().optional(),
  /** How long the gateway trusts a verified API key; revocations also arrive at once over NATS. */
  AUTH_CACHE_TTL: duration.default(30_000),
  /**
   * Gateway replicas sharing the traffic. Limits are shared through PostgreSQL; only while it
   * cannot be reached does each replica allow rate/N per account on its own.
   */
  RATE_LIMIT_REPLICAS: z.coerce.number().int().min(1).default(1),
  /**
   * How the gateway calls the services: Connect unary calls on its own lean transport over
   * HTTP/1.1 keep-alive (`http1`) or HTTP/2 (`http2`), or connect-node's HTTP/2 transport
   * (`connect-node`).
   */
  SERVICE_TRANSPORT: z.enum(['http1', 'http2', 'connect-node']).default('http1'),
  /** Port of the gateway's Prometheus /metrics (on SERVICE_HOST); default PORT + 5, 0 turns it off. */
  METRICS_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  /**
   * Reverse proxies (addresses, CIDR blocks) whose X-Forwarded-For names the client for the
   * sign-in throttle per address (client-address.ts); unset: the connection's peer.
   */
  TRUSTED_PROXIES: z
    .string()
    .optional()
    .superRefine((value, ctx) => {
      if (value === undefined) return;
      try {
        parseTrustedProxies(value);
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: (err as Error).message });
      }
    }),
  /**
   * How often an open `mcs listen` stream gets a ping line; the CLI takes three intervals without
   * a line for a connection that died without a word, and reconnects.
   */
  LISTEN_PING_INTERVAL: duration.default(15_000).refine((ms) => ms >= 1_000 && ms <= 60_000, {
    message: 'must be between 1s and 60s',
  }),
  /**
   * How long a client has to send a whole request (head and body); its head must come within
   * 20 s, or this if shorter. Past it: 408 request_timeout and the connection closed, so a client
   * that sends a byte now and then cannot hold a connection for long (Node's defaults: 5 minutes,
   * and 60 s for the head). Answers and `mcs listen` streams are not bounded by it.
   */
  REQUEST_TIMEOUT: positiveDuration.default(60_000),
  /** Fault injection for crash tests only (see http.ts). */
  MCS_FAILPOINT: z.string().optional(),
});

export function loadEnv(source: NodeJS.ProcessEnv = process.env) {
  const env = parseEnv(gatewayEnvSchema, source);
  return {
    ...env,
    docsUrl: (env.DOCS_URL ?? `http://${env.HOST}:${env.PORT}/docs`).replace(/\/$/, ''),
    metricsPort: env.METRICS_PORT ?? env.PORT + 5,
  };
}
export type Env = ReturnType<typeof loadEnv>;
