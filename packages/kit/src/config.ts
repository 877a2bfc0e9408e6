// Environment shared by every part of the stack. Each part parses its own env once at start-up
// (see its src/env.ts) and fails fast; this module holds the pieces they have in common, so the
// orchestrator, the CLI, the gateway and the services agree on addresses without talking.
import { z } from 'zod';
import { parseNatsUrl } from './nats-url.ts';

export const SERVICES = ['accounts', 'commerce', 'messaging', 'webhooks'] as const;

/**
 * The young generation of every part, wherever it runs (also the image's ENTRYPOINT):
 * `--max-semi-space-size=16`, two 16 MB semi-spaces, Node's default before V8 sized them from the
 * machine's memory (two 64 MB on a machine with a 4 GB heap limit: up to 128 MB of nursery per
 * process, all of it touched and resident once a part has taken some traffic, and the old space's
 * limits sized after it). Measured at 300 keyed orders/s (one endpoint on "*"): gateway,
 * commerce and webhooks at 175–194 MiB RSS instead of 344–347, flat from the first minute (±1.2 %)
 * where the machine-sized default still grew 5–14 % between the first and the last minute of a
 * 5-minute soak (issue 9 target 7); GC time per order about doubled (+0.05 ms over the three
 * parts, ~2.5 % of their CPU per order).
 */
export const YOUNG_GENERATION_FLAG = '--max-semi-space-size=16';

/**
 * Node flags of every part `pnpm start` (and the test stack) runs: YOUNG_GENERATION_FLAG, above;
 * also the image's ENTRYPOINT. Tried and left out:
 *
 * - `--single-threaded-gc`. With 64 MB semi-spaces it cut CPU per order 5–9 % (parallel GC
 *   helpers waiting behind six other busy processes on two cores), but without concurrent
 *   sweeping the webhooks service's memory outside the V8 heap (Buffers) rose to 283 MiB and fell
 *   back only minutes later — a 5-minute soak saw it move 13 % — and with 16 MB semi-spaces the
 *   CPU difference was within the noise of paired runs.
 * - `--no-allocation-site-pretenuring`. V8 had tenured the allocation sites of per-request
 *   objects (protobuf's decoded strings, in the gateway and commerce): at 1,100 keyed orders/s
 *   (--trace-gc-nvp) the gateway allocated 790–870 KB/s in the old space directly and commerce
 *   1.1–1.3 MB/s; without pretenuring 170–200 and 620–640 KB/s, no full collection in 6-second
 *   runs, CPU per order 5–15 % lower in both (`pnpm bench idempotency-cost`, A B A B). But with
 *   full collections that rare, RSS became a slow sawtooth: in two 5-minute soaks at 300 orders/s
 *   the gateway's last minute was 14 % below its first and webhooks' 13 % above (target 7: flat
 *   within ±10 %); the same soak without the flag, +0.4 and +1.7 %.
 * - The same with `--no-memory-reducer` (0c37601, reverted). Full collections are what set
 *   scenario 2's tail (docs/performance.md), and the pair cut them from 17 to 6 in 30 s
 *   across gateway, commerce and webhooks at 1,391 keyed orders/s; `pnpm bench ingest-latency`,
 *   alternating, three runs each: p99 ratio medians 1.55, 1.97, 2.42 against 2.88, 2.19, 2.78.
 *   A soak run alone stayed flat (+1.3 to +4.2 %), but in full `pnpm bench` runs scenario 2
 *   still failed (2.50 and 2.92 ×) and memory did not hold: with nothing shrinking the heap, the
 *   young generation's doublings as load came (1 → 8 → 16 → 32 MB) and the old space's climb
 *   to its limit were steps of RSS that stayed (soak: gateway +10 %, commerce +12 %, webhooks
 *   +13 %). Adding `--min-semi-space-size=16` removed the steps under load (soak +3 to +5 %),
 *   but an idle webhooks process then touched its 32 MB young generation page by page: +19 %
 *   over scenario 5's 300 idle seconds (target: ≤ +10 %).
 * - `--no-allocation-site-pretenuring` with `--heap-growing-percent=35` or `=20` (a fixed old
 *   generation limit over the live size, so rare full collections cannot let it grow far):
 *   old-generation bytes per keyed order (test/bench/gc-per-request.ts) gateway 720 → 190,
 *   commerce 525 → 60, webhooks 1,490 → 710; `pnpm bench ingest-latency`, alternating: medians
 *   2.23 and 2.37 against 3.08 and 2.48. The soak's RSS still moved: gateway 0.87 and 0.92 of
 *   its first minute, commerce 0.88 and 0.96, webhooks 1.02 and 1.08 (target 7 failed with 35),
 *   as the first full collection of the soak, minutes in, shrank the young generation left
 *   grown by the warm-up.
 * - Pretenuring off only while a part boots (a preload turning it back on after 8 s): V8 makes
 *   its tenure decisions at boot (docs/performance.md), so this alone gives the numbers of
 *   off-for-good above (gateway 180, commerce 59, webhooks 700 B per keyed order). Soak: gateway
 *   0.91, commerce 0.96, webhooks 1.03 — a pass at the edge, for the same reason. In a full
 *   `pnpm bench` (flag at start, `v8.setFlagsFromString('--allocation-site-pretenuring')` after
 *   settleHeap): scenario 2 2.03× (FAIL), soak commerce 1.11× and webhooks 1.17× (FAIL: young
 *   generations doubled under the soak's load and no full collection came to shrink them).
 */
export const PART_NODE_FLAGS: readonly string[] = [YOUNG_GENERATION_FLAG];
export type ServiceName = (typeof SERVICES)[number];

/** Offset of each service's port from the gateway's PORT, when its *_URL is not given. */
const PORT_OFFSET: Record<ServiceName, number> = { accounts: 1, commerce: 2, messaging: 3, webhooks: 4 };

export const DEFAULT_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/postgres';
export const DEFAULT_NATS_URL = 'nats://127.0.0.1:4222';

const port = z.coerce.number().int().min(1).max(65535);

/**
 * A part cannot start for a reason its message says whole (a store it cannot reach): logged as
 * that one line, without a stack (kit/server runProcess).
 */
export class PartStartError extends Error {}

/** Parses a duration like `250ms`, `30s`, `5m`, `2h`, `30d` into milliseconds. */
export function parseDuration(text: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$/.exec(text);
  if (!m) throw new Error(`not a duration: "${text}" (use a number and one of ms, s, m, h, d)`);
  const unit = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }[
    m[2] as 'ms' | 's' | 'm' | 'h' | 'd'
  ];
  return Math.round(Number(m[1]) * unit);
}

export const duration = z.string().transform((s, ctx) => {
  try {
    return parseDuration(s);
  } catch (e) {
    ctx.addIssue({ code: 'custom', message: (e as Error).message });
    return z.NEVER;
  }
});

/**
 * A service's `<NAME>_URL`: the service binds the port it names and the gateway calls it there,
 * so the port must be written out (without one the service would bind a random port while the
 * gateway called 80 or 443).
 */
const serviceUrlVar = z
  .string()
  .superRefine((u, ctx) => {
    let url: URL;
    try {
      url = new URL(u);
    } catch {
      ctx.addIssue({ code: 'custom', message: 'Invalid URL' });
      return;
    }
    if (!/^https?:$/.test(url.protocol)) {
      ctx.addIssue({ code: 'custom', message: 'must be an http:// or https:// URL' });
    } else if (url.port === '') {
      ctx.addIssue({ code: 'custom', message: 'must name its port, e.g. http://accounts:8081' });
    }
  })
  .optional();

/** An address to bind: an IPv4 or IPv6 address or a host name, nothing else (no URL, no spaces). */
const bindHost = z
  .string()
  .regex(
    /^(?:[A-Za-z0-9._-]+|\[?[0-9A-Fa-f:.]+(?:%[A-Za-z0-9_.-]+)?\]?)$/,
    'must be an IP address or a host name',
  );

/** A duration that must be more than zero (a time-out, a poll or ack interval, a back-off base). */
export const positiveDuration = duration.refine((ms) => ms > 0, 'must be more than 0');

export const baseEnvSchema = z.object({
  HOST: bindHost.default('127.0.0.1'),
  /** Where the services bind (kit/server); read there, listed here so a bad value stops every part. */
  SERVICE_HOST: bindHost.optional(),
  PORT: port.default(8080),
  DATABASE_URL: z
    .string()
    .url()
    .refine((u) => /^postgres(?:ql)?:\/\//i.test(u), 'must be a postgres:// or postgresql:// URL')
    .default(DEFAULT_DATABASE_URL),
  /** One server or a cluster's, comma separated, with credentials in the URL (kit/nats-url). */
  NATS_URL: z
    .string()
    .superRefine((u, ctx) => {
      try {
        parseNatsUrl(u);
      } catch (e) {
        ctx.addIssue({ code: 'custom', message: (e as Error).message });
      }
    })
    .default(DEFAULT_NATS_URL),
  /** Prefix of every JetStream stream, subject and consumer name; tests use a unique one per run. */
  MCS_NATS_PREFIX: z
    .string()
    .regex(/^[a-z][a-z0-9_]*$/, 'lower-case letters, digits and _')
    .default('mcs'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** `json` keeps JSON lines on a terminal too (kit/log, scripts/lib/proc); read there. */
  LOG_FORMAT: z.enum(['json', '']).optional(),
  /**
   * Services that publish events: under load (250 events/s or more) how long the outbox relay
   * holds events to publish them together (kit/linger.ts); `0ms` publishes each at once.
   */
  EVENT_PUBLISH_LINGER: duration.default(10),
  /**
   * Under load, how long after a publish the relay may hold events when fewer than a batch
   * (kit/linger LINGER_BATCH_EVENTS) came within EVENT_PUBLISH_LINGER; at most that means never.
   */
  EVENT_PUBLISH_LINGER_MAX: duration.default(25),
  // Read where they are used (kit/db, kit/nats, serviceUrl); listed here so that a bad value
  // stops every part, and `pnpm start` before it starts any, with one line naming it.
  DATABASE_POOL_SIZE: z.coerce.number().int().min(1).max(1000).optional(),
  NATS_STREAM_REPLICAS: z.coerce.number().int().min(1).max(5).optional(),
  WEBHOOK_ACK_WAIT: positiveDuration.optional(),
  /** Services: also serve GET /metrics alone on this port (deploy/ admits Prometheus to it only). */
  SERVICE_METRICS_PORT: port.optional(),
  ACCOUNTS_URL: serviceUrlVar,
  COMMERCE_URL: serviceUrlVar,
  MESSAGING_URL: serviceUrlVar,
  WEBHOOKS_URL: serviceUrlVar,
});
export type BaseEnv = z.infer<typeof baseEnvSchema>;

/**
 * Parses `source` with `schema`, or exits the process with one clear line per bad variable.
 * Config is read once, at start-up: a bad value should stop the process before it serves anything.
 */
export function parseEnv<S extends z.ZodType>(
  schema: S,
  source: NodeJS.ProcessEnv = process.env,
): z.infer<S> {
  const result = schema.safeParse(source);
  const issues = result.success ? derivedPortIssues(source) : result.error.issues;
  if (result.success && issues.length === 0) return result.data;
  const lines = issues.map((i) => `  ${i.path.join('.')}: ${i.message}`);
  process.stderr.write(`invalid environment:\n${lines.join('\n')}\n`);
  process.exit(78); // EX_CONFIG
}

/**
 * The ports derived from PORT (a service without its `<NAME>_URL`: PORT+1 … PORT+4; the
 * gateway's metrics without METRICS_PORT: PORT+5) must be ports too: one past 65535 is a bad
 * PORT, said as such, not an invalid URL thrown later.
 */
function derivedPortIssues(source: NodeJS.ProcessEnv): { path: string[]; message: string }[] {
  const base = Number(source.PORT || 8080);
  if (!Number.isInteger(base)) return [];
  const derived = [
    ...SERVICES.filter((name) => !source[`${name.toUpperCase()}_URL`]).map(
      (name) => base + PORT_OFFSET[name],
    ),
    ...(source.METRICS_PORT ? [] : [base + 5]),
  ];
  const highest = Math.max(...derived);
  if (highest <= 65535) return [];
  return [
    {
      path: ['PORT'],
      message: `${base} leaves no room for the ports derived from it (the services' PORT+1 … PORT+4, the gateway's metrics PORT+5: ${highest} is past 65535); use a lower PORT, or set every *_URL and METRICS_PORT`,
    },
  ];
}

/** Where each service listens: `<NAME>_URL` if set, else http://127.0.0.1:(PORT + offset). */
export function serviceUrl(name: ServiceName, env: NodeJS.ProcessEnv = process.env): string {
  const explicit = env[`${name.toUpperCase()}_URL`];
  if (explicit) return explicit;
  const gatewayPort = Number(env.PORT ?? 8080);
  return `http://127.0.0.1:${gatewayPort + PORT_OFFSET[name]}`;
}

/** Longest Unix domain socket path Linux takes (sun_path is 108 bytes with its NUL). */
const SOCKET_PATH_MAX = 107;

/**
 * The Unix domain socket a service also listens on, and the gateway calls it over, when both run
 * on one machine: `SERVICE_SOCKET_DIR/<port>.sock` (the port of the service's URL, so replicas
 * and stacks side by side each get their own). Unset, or a path too long for a socket: none, and
 * calls go over TCP to the service's URL.
 */
export function serviceSocket(name: ServiceName, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const dir = env.SERVICE_SOCKET_DIR;
  if (!dir) return undefined;
  const path = `${dir.replace(/\/+$/, '')}/${servicePort(name, env)}.sock`;
  return path.length <= SOCKET_PATH_MAX ? path : undefined;
}

/** The port a service binds, taken from its URL. */
export function servicePort(name: ServiceName, env: NodeJS.ProcessEnv = process.env): number {
  return Number(new URL(serviceUrl(name, env)).port);
}

export const booleanFlag = z
  .enum(['true', 'false', '1', '0', ''])
  .default('false')
  .transform((v) => v === 'true' || v === '1');
