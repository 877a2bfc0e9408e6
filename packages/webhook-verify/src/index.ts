// Receiver-side verification of mcs webhook deliveries, for integrators. No dependencies.
//
//   const event = verifyWebhook(secret, rawBody, req.headers); // throws WebhookVerificationError
//
// Both signatures are checked in constant time: X-Service-Signature (hex HMAC-SHA256 of the raw
// body keyed with the whole `whsec_…` string) and the Standard Webhooks headers (webhook-id,
// webhook-timestamp, webhook-signature), whose timestamp gives replay protection.
import { createHmac, timingSafeEqual } from 'node:crypto';

export class WebhookVerificationError extends Error {
  override name = 'WebhookVerificationError';
}

export type HeaderBag = Record<string, string | string[] | undefined> | Headers;

function header(headers: HeaderBag, name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  const bag = headers as Record<string, string | string[] | undefined>;
  const v =
    bag[name] ?? bag[name.toLowerCase()] ?? Object.entries(bag).find(([k]) => k.toLowerCase() === name)?.[1];
  return Array.isArray(v) ? v[0] : v;
}

function safeEqual(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

const bytes = (body: string | Uint8Array) =>
  typeof body === 'string' ? Buffer.from(body, 'utf8') : Buffer.from(body);

/** True when `signature` is the hex HMAC-SHA256 of `body` keyed with the whole secret. */
export function verifyServiceSignature(
  secret: string,
  body: string | Uint8Array,
  signature: string | undefined,
): boolean {
  if (!signature || !/^[0-9a-f]{64}$/.test(signature)) return false;
  const expected = createHmac('sha256', secret).update(bytes(body)).digest();
  return safeEqual(expected, Buffer.from(signature, 'hex'));
}

export interface StandardOptions {
  /** Largest accepted distance between the timestamp and now, in seconds (default 300). */
  toleranceSeconds?: number;
  /** Current time in ms (tests). */
  now?: number;
}

/** Checks the Standard Webhooks headers; throws WebhookVerificationError saying what is wrong. */
export function verifyStandardSignature(
  secret: string,
  body: string | Uint8Array,
  headers: HeaderBag,
  opts: StandardOptions = {},
): void {
  const id = header(headers, 'webhook-id');
  const timestamp = header(headers, 'webhook-timestamp');
  const signatures = header(headers, 'webhook-signature');
  if (!id || !timestamp || !signatures)
    throw new WebhookVerificationError('missing webhook-id, -timestamp or -signature');
  const ts = Number(timestamp);
  if (!/^\d+$/.test(timestamp) || !Number.isSafeInteger(ts))
    throw new WebhookVerificationError('bad webhook-timestamp');
  const now = Math.floor((opts.now ?? Date.now()) / 1000);
  if (Math.abs(now - ts) > (opts.toleranceSeconds ?? 300)) {
    throw new WebhookVerificationError('webhook-timestamp is too far from now (possible replay)');
  }
  if (!secret.startsWith('whsec_')) throw new WebhookVerificationError('secret must start with whsec_');
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const expected = createHmac('sha256', key)
    .update(Buffer.concat([Buffer.from(`${id}.${timestamp}.`, 'utf8'), bytes(body)]))
    .digest();
  // The header may list several space-separated "v1,<base64>" signatures (during key rotation).
  for (const entry of signatures.split(' ')) {
    const [version, value] = entry.split(',', 2);
    if (version === 'v1' && value && safeEqual(expected, Buffer.from(value, 'base64'))) return;
  }
  throw new WebhookVerificationError('no webhook-signature matches');
}

export interface WebhookEvent {
  id: string;
  object: 'event';
  type: string;
  created_at: string;
  livemode?: boolean;
  data: Record<string, unknown> & { id: string; object: string };
}

/**
 * Verifies both signatures of a delivery and returns the parsed event. Pass the raw body
 * exactly as received (not re-serialized JSON).
 */
export function verifyWebhook(
  secret: string,
  body: string | Uint8Array,
  headers: HeaderBag,
  opts: StandardOptions = {},
): WebhookEvent {
  if (!verifyServiceSignature(secret, body, header(headers, 'x-service-signature'))) {
    throw new WebhookVerificationError('X-Service-Signature does not match');
  }
  verifyStandardSignature(secret, body, headers, opts);
  const event = JSON.parse(
    typeof body === 'string' ? body : Buffer.from(body).toString('utf8'),
  ) as WebhookEvent;
  if (event.id !== header(headers, 'webhook-id'))
    throw new WebhookVerificationError('webhook-id differs from the event id');
  return event;
}
