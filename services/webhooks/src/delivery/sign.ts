// The two signatures every delivery carries (docs/api.md, "Events and deliveries").
import { createHmac } from 'node:crypto';

/** X-Service-Signature: lowercase hex HMAC-SHA256 of the body, keyed with the whole secret string. */
export function serviceSignature(secret: string, body: string): string {
  return createHmac('sha256', secret).update(body, 'utf8').digest('hex');
}

/** Standard Webhooks `webhook-signature`: key = base64-decoded part after `whsec_`. */
export function standardSignature(secret: string, msgId: string, timestamp: number, body: string): string {
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const mac = createHmac('sha256', key).update(`${msgId}.${timestamp}.${body}`, 'utf8').digest('base64');
  return `v1,${mac}`;
}
