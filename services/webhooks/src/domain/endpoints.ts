// Webhook endpoints: validation of URL and event types, creation with a sealed secret, reads.
import { apiError } from '@mcs/errors';
import type { Caller } from '@mcs/kit/caller';
import type { Tx } from '@mcs/kit/db';
import { newId } from '@mcs/kit/ids';
import { listLimit, optionalText } from '@mcs/kit/validate';
import { events as eventsProto } from '@mcs/proto';
import { enumValueName } from '@mcs/rest';
import { and, desc, eq, lt } from 'drizzle-orm';
import { type EndpointStatus, endpoints } from '../db/schema.ts';
import { ForbiddenTargetError, hostOf, isLocalName, resolveAllowed } from '../delivery/target.ts';
import { newSigningSecret, type SecretBox } from './secrets.ts';

/** Every event type of spec 6.1, from the one enum. */
export const EVENT_TYPES: readonly string[] = eventsProto.EventTypeSchema.values
  .map((v) => enumValueName(eventsProto.EventTypeSchema, v.number))
  .filter((n): n is string => n !== null);

export interface EndpointPolicy {
  allowHttp: boolean;
  allowPrivate: boolean;
}

export type Endpoint = typeof endpoints.$inferSelect;

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
        message: `Unknown event type "${type}". Use "*" or some of: ${EVENT_TYPES.join(', ')}.`,
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
    throw apiError('invalid_url', { param, message: 'url must use https://.' });
  }
  if (url.username || url.password) {
    throw apiError('invalid_url', { param, message: 'url must not contain credentials.' });
  }
  if (url.hash) throw apiError('invalid_url', { param, message: 'url must not contain a fragment.' });
  const host = hostOf(url);
  if (!policy.allowPrivate) {
    if (isLocalName(host))
      throw apiError('invalid_url', { param, message: 'url must point at a public host.' });
    try {
      await resolveAllowed(host, false);
    } catch (err) {
      if (err instanceof ForbiddenTargetError) {
        throw apiError('invalid_url', { param, message: 'url must point at a public host.' });
      }
      // A name that does not resolve yet is accepted; each attempt checks again.
    }
  }
  return url.toString();
}

export interface CreateEndpointInput {
  url: string;
  events: string[];
  description?: string | undefined;
}

export async function createEndpoint(
  tx: Tx,
  caller: Caller,
  input: CreateEndpointInput,
  deps: { box: SecretBox; policy: EndpointPolicy },
  now = new Date(),
): Promise<{ endpoint: Endpoint; secret: string; created: boolean }> {
  const url = await validateUrl(input.url, deps.policy);
  const events = validateEvents(input.events);
  const description = optionalText(input.description, 'description', 500);
  const secret = newSigningSecret();
  const [row] = await tx
    .insert(endpoints)
    .values({
      id: newId('we', now.getTime()),
      accountId: caller.accountId,
      livemode: caller.livemode,
      url,
      events,
      description: description ?? null,
      status: 'enabled',
      secretSealed: deps.box.seal(secret),
      idempotencyKey: caller.idempotencyKey ?? null,
      createdAt: now,
      updatedAt: now,
    })
    .onConflictDoNothing()
    .returning();
  if (row) return { endpoint: row, secret, created: true };
  // The same idempotency key created it before: answer as then, secret included.
  const [existing] = await tx
    .select()
    .from(endpoints)
    .where(
      and(
        eq(endpoints.accountId, caller.accountId),
        eq(endpoints.livemode, caller.livemode),
        eq(endpoints.idempotencyKey, caller.idempotencyKey ?? ''),
      ),
    );
  if (!existing) throw new Error('endpoint insert conflicted but no endpoint holds the idempotency key');
  return { endpoint: existing, secret: deps.box.open(existing.secretSealed), created: false };
}

export async function getEndpoint(tx: Tx, caller: Caller, id: string): Promise<Endpoint> {
  const [row] = await tx
    .select()
    .from(endpoints)
    .where(
      and(
        eq(endpoints.id, id),
        eq(endpoints.accountId, caller.accountId),
        eq(endpoints.livemode, caller.livemode),
      ),
    );
  if (!row) throw apiError('resource_missing', { param: 'id', message: `No such webhook endpoint: ${id}.` });
  return row;
}

export async function listEndpoints(
  tx: Tx,
  caller: Caller,
  opts: { limit?: number; startingAfter?: string },
): Promise<{ data: Endpoint[]; hasMore: boolean }> {
  const limit = listLimit(opts.limit);
  const rows = await tx
    .select()
    .from(endpoints)
    .where(
      and(
        eq(endpoints.accountId, caller.accountId),
        eq(endpoints.livemode, caller.livemode),
        opts.startingAfter ? lt(endpoints.id, opts.startingAfter) : undefined,
      ),
    )
    .orderBy(desc(endpoints.id))
    .limit(limit + 1);
  return { data: rows.slice(0, limit), hasMore: rows.length > limit };
}

export type { EndpointStatus };
