import {
  baseEnvSchema,
  booleanFlag,
  duration,
  parseDuration,
  parseEnv,
  positiveDuration,
  servicePort,
  serviceSocket,
} from '@mcs/kit/config';
import addressparser from 'nodemailer/lib/addressparser';
import { z } from 'zod';
import { parseKey } from './domain/secrets.ts';

export const webhooksEnvSchema = baseEnvSchema.extend({
  WEBHOOK_TIMEOUT: positiveDuration.default(10_000),
  /**
   * Added to WEBHOOK_TIMEOUT to make a delivery's lease: how long an attempt holds it, and so how
   * long a delivery whose process died waits before another takes it (delivery/engine.ts).
   */
  WEBHOOK_LEASE_MARGIN: duration.default(5_000),
  /**
   * How long a successful attempt waits to be recorded with others in one statement
   * (delivery/record.ts createSuccessLog; 0: each at once). One an ordered delivery's next change
   * waits on is recorded within 20 ms (or this, if shorter).
   */
  WEBHOOK_RECORD_WINDOW: duration.default(60),
  WEBHOOK_RETRY_SCHEDULE: z
    .string()
    .default('30s,5m,30m,2h,24h')
    .transform((s, ctx) => {
      try {
        const list = s.split(',').map((part) => parseDuration(part));
        if (list.length === 0) throw new Error('needs at least one delay');
        return list;
      } catch (e) {
        ctx.addIssue({ code: 'custom', message: (e as Error).message });
        return z.NEVER;
      }
    }),
  /**
   * The early warning: one e-mail once an endpoint has been failing this long without a success
   * (or has spent half the retries of a delivery), before it turns unhealthy.
   */
  WEBHOOK_WARN_AFTER: duration.default(3_600_000),
  WEBHOOK_ALLOW_HTTP: booleanFlag,
  WEBHOOK_ALLOW_PRIVATE_NETWORKS: booleanFlag,
  /**
   * 32 bytes, base64 or hex: seals endpoint signing secrets at rest. Checked here, with the
   * others, so that a bad key stops `pnpm start` before any part starts (and a part before it
   * connects to anything), rather than the webhooks service once the others are up.
   */
  WEBHOOK_SECRETS_KEY: z
    .string()
    .optional()
    .refine((v) => !v || isSecretsKey(v), 'must be 32 bytes, base64 or hex (e.g. `openssl rand -base64 32`)'),
  SMTP_URL: z
    .string()
    .url()
    .refine((u) => /^smtps?:\/\//i.test(u), 'must be an smtp:// or smtps:// URL')
    .optional(),
  MAIL_FROM: z
    .string()
    .refine(
      isMailbox,
      'must be one e-mail address, e.g. notifications@example.com or Shop <shop@example.com>',
    )
    .default('notifications@localhost'),
  /** Where mail goes without SMTP_URL. */
  MAIL_DIR: z.string().default('.data/mail'),
  /** How often the mailer looks for unsent notifications besides being woken. */
  MAIL_POLL_INTERVAL: positiveDuration.default(5_000),
  /** Sends in flight at once, overall and per endpoint. */
  WEBHOOK_CONCURRENCY: z.coerce.number().int().min(1).default(256),
  WEBHOOK_ENDPOINT_CONCURRENCY: z.coerce.number().int().min(1).default(8),
  /** Deliveries a recovery or bulk resend queues per second (delivery/replayer.ts). */
  WEBHOOK_REPLAY_RATE: z.coerce.number().int().min(1).max(100_000).default(100),
  /**
   * auto_recover: the first probe of an unhealthy endpoint waits this long, each next one twice
   * as long as the one before, up to 24 h (delivery/prober.ts).
   */
  WEBHOOK_PROBE_INTERVAL: positiveDuration.default(5 * 60_000),
  /**
   * per_resource: how long a delivery of a resource's version v waits for the event of version
   * v − 1 when that one has not arrived (a failed publish retried by the outbox poll, replicas
   * whose publishes crossed), counted from when it was recorded; past it, it goes anyway and a
   * warning is logged with the missing version (delivery/engine.ts claimOrdered).
   */
  WEBHOOK_ORDERING_WAIT: duration.default(30_000),
  /**
   * How long the event log, its deliveries and their attempts are kept after the event (and sent
   * e-mails, finished recoveries and resends after they finished): domain/retention.ts.
   */
  WEBHOOK_RETENTION: duration.default(30 * 86_400_000).refine((ms) => ms >= 3_600_000, {
    message: 'WEBHOOK_RETENTION must be at least 1h',
  }),
  /**
   * The niceness of the webhooks process (0–19; 0 leaves it): where the parts share a machine,
   * API requests get the CPU before deliveries (priority.ts). Only in its own process.
   */
  WEBHOOK_NICE: z.coerce.number().int().min(0).max(19).default(10),
});

/** One sender, as a From header takes it: `a@b` or `Name <a@b>`, on one line. */
function isMailbox(text: string): boolean {
  if (/[\r\n]/.test(text)) return false;
  const parsed = addressparser(text);
  const one = parsed.length === 1 ? parsed[0]! : undefined;
  return !!one && 'address' in one && /^[^\s@<>]+@[^\s@<>]+$/.test(one.address ?? '');
}

/** A key loadSecretsKey would take: 64 hex digits, or base64 (or base64url) of 32 bytes. */
function isSecretsKey(text: string): boolean {
  const t = text.trim();
  return /^[0-9a-f]{64}$/i.test(t) || (/^[A-Za-z0-9+/_-]+={0,2}$/.test(t) && parseKey(t).length === 32);
}

/**
 * The webhooks service's environment, as parseEnv checks it, plus the one rule between
 * variables: with NODE_ENV=production, WEBHOOK_SECRETS_KEY is required (each replica would
 * otherwise seal with a key of its own). Also run by `pnpm start` before it starts anything.
 */
export function parseWebhooksEnv(source: NodeJS.ProcessEnv = process.env) {
  const env = parseEnv(webhooksEnvSchema, source);
  if (!env.WEBHOOK_SECRETS_KEY && source.NODE_ENV === 'production') {
    process.stderr.write(
      'invalid environment:\n  WEBHOOK_SECRETS_KEY: required when NODE_ENV=production (32 bytes, base64 or hex)\n',
    );
    process.exit(78); // EX_CONFIG, as parseEnv
  }
  return env;
}

export function loadEnv(source: NodeJS.ProcessEnv = process.env) {
  const env = parseWebhooksEnv(source);
  return { ...env, port: servicePort('webhooks', source), socketPath: serviceSocket('webhooks', source) };
}
export type Env = ReturnType<typeof loadEnv>;
