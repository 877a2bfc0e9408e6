// Webhook endpoints: validation of URL and event types, creation with a sealed secret, reads,
// updates, deletion, re-enabling (spec 3.1) and secret rotation. Disabling and re-enabling
// record their operational event (webhook_endpoint.disabled / .enabled, operational.ts) in the
// same transaction.
import { apiError } from '@mcs/errors';
import type { Caller } from '@mcs/kit/caller';
import type { Tx } from '@mcs/kit/db';
import { newId } from '@mcs/kit/ids';
import { LISTEN_URL } from '@mcs/kit/listen';
import { EVENT_TYPES } from '@mcs/kit/outbox';
import { changedAt, pageLimit, pageStart } from '@mcs/kit/resources';
import { optionalText } from '@mcs/kit/validate';
import { and, count, desc, eq, lt, sql } from 'drizzle-orm';
import { deliveries, type EndpointStatus, endpoints, type Ordering } from '../db/schema.ts';
import {
  ForbiddenTargetError,
  hostOf,
  isLocalName,
  type LookupAll,
  resolveAllowed,
} from '../delivery/target.ts';
import type { QueuedDelivery } from './fanout.ts';
import { recordEndpointEvent } from './operational.ts';
import { newSigningSecret, type SecretBox } from './secrets.ts';

export { EVENT_TYPES };

export interface EndpointPolicy {
  allowHttp: boolean;
  allowPrivate: boolean;
  /** Resolver for the URL check (tests inject a slow one); default the system's. */
  lookup?: LookupAll;
  /**
   * Whether a refused URL names the setting that would allow it. On outside production
   * (NODE_ENV), where the person adding an endpoint is the one running the stack.
   */
  hints?: boolean;
}

/**
 * How long creating or updating an endpoint waits for DNS. A name that has not resolved by then
 * is accepted like one that does not resolve at all: every attempt checks its address again.
 */
export const URL_LOOKUP_TIMEOUT_MS = 2_000;

export type Endpoint = typeof endpoints.$inferSelect;

/**
 * Where a write that records operational events puts their deliveries, for the caller to queue
 * after commit (leaseMs: how long they are this process's to send). Without one they are
 * recorded due at once, and the poller sends them.
 */
export interface EventSink {
  leaseMs: number;
  queued: QueuedDelivery[];
}

async function emit(
  tx: Tx,
  kind: 'disabled' | 'enabled',
  endpoint: Endpoint,
  now: Date,
  sink: EventSink | undefined,
): Promise<void> {
  const queued = await recordEndpointEvent(tx, kind, endpoint, sink?.leaseMs ?? 0, now);
  sink?.queued.push(...queued);
}

export const MAX_RATE_LIMIT = 10_000;

/** A max_rate from a request: 1–10000 deliveries per second; 0 (on update) removes the limit. */
export function validateMaxRate(value: number, allowZero: boolean): number | null {
  if (allowZero && value === 0) return null;
  if (!Number.isInteger(value) || value < 1 || value > MAX_RATE_LIMIT) {
    throw apiError('invalid_value', {
      param: 'max_rate',
      message: `max_rate must be a whole number of deliveries per second from 1 to ${MAX_RATE_LIMIT}${
        allowZero ? ' (or 0 to remove the limit)' : ''
      }.`,
    });
  }
  return value;
}

export function validateEvents(list: string[]): string[] {
  if (list.length === 0) {
    throw apiError('missing_required_field', {
      param: 'events',
      message: 'events must list at least one event type, or "*".',
    });
  }
  for (const type of list) {
    if (type !== '*' && !EVENT_TYPES.includes(type)) {
      throw apiError('invalid_event_type', {
        param: 'events',
        message: `Unknown event type "${type}". Use "*" (the resource events) or some of: ${EVENT_TYPES.join(', ')}.`,
      });
    }
  }
  return [...new Set(list)];
}

/**
 * Checks a URL an account wants deliveries sent to. The host is checked here, and the address
 * really used is checked again at every attempt (delivery/target.ts).
 */
export async function validateUrl(raw: string, policy: EndpointPolicy): Promise<string> {
  const param = 'url';
  if (raw.trim() === '')
    throw apiError('missing_required_field', { param, message: 'Missing required parameter: url.' });
  if (raw.length > 2048)
    throw apiError('invalid_url', { param, message: 'url must be at most 2048 characters.' });
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw apiError('invalid_url', {
      param,
      message: 'url must be an absolute URL, e.g. https://example.com/webhooks.',
    });
  }
  if (url.protocol !== 'https:' && !(policy.allowHttp && url.protocol === 'http:')) {
    const hint =
      policy.hints && url.protocol === 'http:'
        ? ' To try a local http:// receiver, start the stack with WEBHOOK_ALLOW_HTTP=true (and WEBHOOK_ALLOW_PRIVATE_NETWORKS=true for 127.0.0.1 or localhost); never in production.'
        : '';
    // Name every scheme this stack takes: "https://" alone would be wrong where http is allowed.
    const schemes = policy.allowHttp ? 'https:// or http://' : 'https://';
    throw apiError('invalid_url', { param, message: `url must use ${schemes}.${hint}` });
  }
  if (url.username || url.password) {
    throw apiError('invalid_url', { param, message: 'url must not contain credentials.' });
  }
  if (url.hash) throw apiError('invalid_url', { param, message: 'url must not contain a fragment.' });
  // Port 0 names no service: nothing could ever answer there.
  if (url.port === '0') throw apiError('invalid_url', { param, message: 'url must not use port 0.' });
  const host = hostOf(url);
  if (!policy.allowPrivate) {
    const notPublic = `url must point at a public host.${
      policy.hints
        ? ' To try a receiver on this machine or a private network, start the stack with WEBHOOK_ALLOW_PRIVATE_NETWORKS=true; never in production.'
        : ''
    }`;
    if (isLocalName(host)) throw apiError('invalid_url', { param, message: notPublic });
    try {
      await resolveAllowed(host, false, {
        timeoutMs: URL_LOOKUP_TIMEOUT_MS,
        ...(policy.lookup ? { lookup: policy.lookup } : {}),
      });
    } catch (err) {
      if (err instanceof ForbiddenTargetError) {
        throw apiError('invalid_url', { param, message: notPublic });
      }
      // A name that does not resolve yet (or not within URL_LOOKUP_TIMEOUT_MS) is accepted;
      // each attempt checks again.
    }
  }
  return url.toString();
}

/**
 * Where deliveries go: a URL validateUrl accepts, or LISTEN_URL — an `mcs listen` session
 * (kit/listen.ts), in test mode only.
 */
export async function targetUrl(raw: string, livemode: boolean, policy: EndpointPolicy): Promise<string> {
  if (raw !== LISTEN_URL) return validateUrl(raw, policy);
  if (livemode) {
    throw apiError('test_mode_only', {
      param: 'url',
      message: `Listen endpoints (url "${LISTEN_URL}", for mcs listen) exist in test mode only.`,
    });
  }
  return LISTEN_URL;
}

export interface CreateEndpointInput {
  url: string;
  events: string[];
  description?: string | undefined;
  /** Default true. */
  disableOnGone?: boolean | undefined;
  maxRate?: number | undefined;
  ordering?: Ordering | undefined;
  autoRecover?: boolean | undefined;
}

/** Endpoints an account may have in each mode: each one multiplies every event's deliveries. */
export const MAX_ENDPOINTS = 100;

/**
 * Refuses a new endpoint of an account that has MAX_ENDPOINTS in the mode. Two creates at once
 * could both pass the count; the account's advisory lock makes them take turns.
 */
async function checkEndpointRoom(tx: Tx, caller: Caller): Promise<void> {
  await tx.execute(
    sql`select pg_advisory_xact_lock(hashtextextended(${`webhooks.endpoints:${caller.accountId}:${caller.livemode}`}, 0))`,
  );
  const [row] = await tx
    .select({ n: count() })
    .from(endpoints)
    .where(and(eq(endpoints.accountId, caller.accountId), eq(endpoints.livemode, caller.livemode)));
  if ((row?.n ?? 0) >= MAX_ENDPOINTS) {
    throw apiError('too_many_endpoints', {
      message: `This account has ${MAX_ENDPOINTS} webhook endpoints in ${caller.livemode ? 'live' : 'test'} mode, the most it may have. Delete one it no longer uses, or subscribe an existing one to more event types.`,
    });
  }
}

export async function createEndpoint(
  tx: Tx,
  caller: Caller,
  input: CreateEndpointInput,
  deps: { box: SecretBox; policy: EndpointPolicy },
  now = new Date(),
): Promise<{ endpoint: Endpoint; secret: string }> {
  const url = await targetUrl(input.url, caller.livemode, deps.policy);
  const events = validateEvents(input.events);
  await checkEndpointRoom(tx, caller);
  const description = optionalText(input.description, 'description', 500);
  const maxRate = input.maxRate === undefined ? null : validateMaxRate(input.maxRate, false);
  const secret = newSigningSecret();
  const [row] = await tx
    .insert(endpoints)
    .values({
      id: newId('we', now.getTime()),
      accountId: caller.accountId,
      livemode: caller.livemode,
      url,
      events,
      // No description is null, as an update with "" leaves it.
      description: description || null,
      status: 'enabled',
      disableOnGone: input.disableOnGone ?? true,
      maxRate,
      ordering: input.ordering ?? 'none',
      autoRecover: input.autoRecover ?? false,
      secretSealed: deps.box.seal(secret),
      createdAt: now,
      updatedAt: now,
    })
    .returning();
  if (!row) throw new Error('endpoint insert returned no row');
  return { endpoint: row, secret };
}

const ofCaller = (caller: Caller, id: string) =>
  and(
    eq(endpoints.id, id),
    eq(endpoints.accountId, caller.accountId),
    eq(endpoints.livemode, caller.livemode),
  );

const missing = (id: string) =>
  apiError('resource_missing', { param: 'id', message: `No such webhook endpoint: ${id}.` });

/** The caller's endpoint `id`; with `lock`, row-locked until the transaction ends. */
export async function getEndpoint(
  tx: Tx,
  caller: Caller,
  id: string,
  opts: { lock?: boolean } = {},
): Promise<Endpoint> {
  const query = tx.select().from(endpoints).where(ofCaller(caller, id));
  const [row] = opts.lock ? await query.for('update') : await query;
  if (!row) throw missing(id);
  return row;
}

/**
 * The caller's endpoint named in a request's body as `param`: one that does not exist is a bad
 * value of that parameter (400 invalid_value, as a missing order or product in a body is), not a
 * missing route resource (404).
 */
export async function referencedEndpoint(
  tx: Tx,
  caller: Caller,
  id: string,
  param: string,
): Promise<Endpoint> {
  const [row] = await tx.select().from(endpoints).where(ofCaller(caller, id));
  if (!row) throw apiError('invalid_value', { param, message: `No such webhook endpoint: ${id}.` });
  return row;
}

export interface UpdateEndpointInput {
  url?: string | undefined;
  /** Empty: unchanged (a repeated field cannot say "absent"). */
  events?: string[] | undefined;
  /** "" clears it. */
  description?: string | undefined;
  /** true → disabled (reason "manual"); false → enabled (as re-enabling does). */
  disabled?: boolean | undefined;
  disableOnGone?: boolean | undefined;
  /** 0 removes the limit. */
  maxRate?: number | undefined;
  /** For deliveries recorded from now on. */
  ordering?: Ordering | undefined;
  autoRecover?: boolean | undefined;
}

export async function updateEndpoint(
  tx: Tx,
  caller: Caller,
  id: string,
  input: UpdateEndpointInput,
  deps: { policy: EndpointPolicy },
  when?: Date,
  sink?: EventSink,
): Promise<Endpoint> {
  const current = await getEndpoint(tx, caller, id, { lock: true });
  // Taken once the row is locked: the change (and its event) follows the one it waited for.
  const now = changedAt(current.updatedAt, when);
  const patch: Partial<typeof endpoints.$inferInsert> = { updatedAt: now };
  if (input.url !== undefined) patch.url = await targetUrl(input.url, caller.livemode, deps.policy);
  if (input.events !== undefined && input.events.length > 0) patch.events = validateEvents(input.events);
  if (input.description !== undefined) {
    patch.description = input.description === '' ? null : optionalText(input.description, 'description', 500);
  }
  if (input.disableOnGone !== undefined) patch.disableOnGone = input.disableOnGone;
  if (input.maxRate !== undefined) patch.maxRate = validateMaxRate(input.maxRate, true);
  // Disabling a disabled endpoint keeps its reason (a "gone" one stays gone).
  if (input.disabled === true && current.status !== 'disabled') {
    Object.assign(patch, { status: 'disabled', disabledReason: 'manual', probeAt: null });
  }
  if (input.ordering !== undefined) patch.ordering = input.ordering;
  if (input.autoRecover !== undefined) {
    patch.autoRecover = input.autoRecover;
    // Turned on while unhealthy: the first probe is due now; turned off: none is.
    if (input.autoRecover && current.status === 'unhealthy' && current.probeAt === null) patch.probeAt = now;
    if (!input.autoRecover) patch.probeAt = null;
  }
  if (input.disabled === false && current.status !== 'enabled') Object.assign(patch, ENABLED);
  const [row] = await tx.update(endpoints).set(patch).where(eq(endpoints.id, current.id)).returning();
  if (!row) throw missing(id);
  if (row.status === 'disabled') await skipPending(tx, row.id);
  if (row.status !== current.status && row.status !== 'unhealthy') {
    await emit(tx, row.status, row, now, sink);
  }
  return row;
}

/** What re-enabling sets: a clean bill of health. */
const ENABLED = {
  status: 'enabled',
  disabledReason: null,
  failingSince: null,
  lastError: null,
  warnedAt: null,
  pausedUntil: null,
  probeAt: null,
  probes: 0,
} as const;

/**
 * Re-enables an unhealthy or disabled endpoint (the API twin of Settings → API). New events
 * flow to it again; deliveries skipped meanwhile stay listed as skipped and can be resent.
 * Enabling an enabled endpoint changes nothing.
 */
export async function enableEndpoint(
  tx: Tx,
  caller: Caller,
  id: string,
  when?: Date,
  sink?: EventSink,
): Promise<Endpoint> {
  const current = await getEndpoint(tx, caller, id, { lock: true });
  if (current.status === 'enabled') return current;
  const now = changedAt(current.updatedAt, when);
  const [row] = await tx
    .update(endpoints)
    .set({ ...ENABLED, updatedAt: now })
    .where(eq(endpoints.id, current.id))
    .returning();
  if (!row) throw missing(id);
  await emit(tx, 'enabled', row, now, sink);
  return row;
}

/** A new signing secret; the old one signs nothing from now on. */
export async function rotateSecret(
  tx: Tx,
  caller: Caller,
  id: string,
  deps: { box: SecretBox },
  when?: Date,
): Promise<{ endpoint: Endpoint; secret: string }> {
  const current = await getEndpoint(tx, caller, id, { lock: true });
  const secret = newSigningSecret();
  const [row] = await tx
    .update(endpoints)
    .set({ secretSealed: deps.box.seal(secret), updatedAt: changedAt(current.updatedAt, when) })
    .where(eq(endpoints.id, current.id))
    .returning();
  if (!row) throw missing(id);
  return { endpoint: row, secret };
}

/**
 * Deletes an endpoint and its sealed secret. Its deliveries stay (the event log is the
 * account's), and those still pending become skipped; an attempt already in flight finds the
 * endpoint gone and records nothing.
 */
export async function deleteEndpoint(tx: Tx, caller: Caller, id: string): Promise<string> {
  const [row] = await tx.delete(endpoints).where(ofCaller(caller, id)).returning({ id: endpoints.id });
  if (!row) throw missing(id);
  await skipPending(tx, row.id);
  return row.id;
}

async function skipPending(tx: Tx, endpointId: string): Promise<void> {
  await tx
    .update(deliveries)
    .set({ status: 'skipped', nextAttemptAt: null })
    .where(and(eq(deliveries.endpointId, endpointId), eq(deliveries.status, 'pending')));
}

export async function listEndpoints(
  tx: Tx,
  caller: Caller,
  opts: { limit?: number; startingAfter?: string },
): Promise<{ data: Endpoint[]; hasMore: boolean }> {
  const limit = pageLimit(opts.limit);
  const after = pageStart('we', opts.startingAfter);
  const rows = await tx
    .select()
    .from(endpoints)
    .where(
      and(
        eq(endpoints.accountId, caller.accountId),
        eq(endpoints.livemode, caller.livemode),
        after ? lt(endpoints.id, after) : undefined,
      ),
    )
    .orderBy(desc(endpoints.id))
    .limit(limit + 1);
  return { data: rows.slice(0, limit), hasMore: rows.length > limit };
}

export type { EndpointStatus };
