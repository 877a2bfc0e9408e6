// The two signatures every delivery carries (docs/api.md, "Events and deliveries").
import { createHmac, createSecretKey, type KeyObject } from 'node:crypto';

/**
 * HMAC keys by secret, made once: a raw key given to createHmac is turned into a key object on
 * every call, which showed in the webhooks service's profile (two signatures per attempt).
 */
const keys = new Map<string, { service: KeyObject; standard: KeyObject }>();
const KEYS_MAX = 10_000;
function keysOf(secret: string) {
  let k = keys.get(secret);
  if (!k) {
    if (keys.size >= KEYS_MAX) keys.clear();
    k = {
      service: createSecretKey(Buffer.from(secret, 'utf8')),
      standard: createSecretKey(Buffer.from(secret.slice('whsec_'.length), 'base64')),
    };
    keys.set(secret, k);
  }
  return k;
}

/** X-Service-Signature: lowercase hex HMAC-SHA256 of the body, keyed with the whole secret string. */
export function serviceSignature(secret: string, body: string): string {
  return createHmac('sha256', keysOf(secret).service).update(body, 'utf8').digest('hex');
}

/** Standard Webhooks `webhook-signature`: key = base64-decoded part after `whsec_`. */
export function standardSignature(secret: string, msgId: string, timestamp: number, body: string): string {
  const mac = createHmac('sha256', keysOf(secret).standard)
    .update(`${msgId}.${timestamp}.${body}`, 'utf8')
    .digest('base64');
  return `v1,${mac}`;
}
