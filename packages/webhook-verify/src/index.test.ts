import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  verifyServiceSignature,
  verifyStandardSignature,
  verifyWebhook,
  WebhookVerificationError,
} from './index.ts';

const secret = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
const body = JSON.stringify({
  id: 'evt_1',
  object: 'event',
  type: 'order.created',
  created_at: '2026-01-01T00:00:00.000Z',
  data: { id: 'ord_1', object: 'order' },
});
const now = 1_800_000_000_000;
const ts = String(now / 1000);

function headers(over: Record<string, string> = {}) {
  const key = Buffer.from(secret.slice(6), 'base64');
  return {
    'x-service-signature': createHmac('sha256', secret).update(body).digest('hex'),
    'webhook-id': 'evt_1',
    'webhook-timestamp': ts,
    'webhook-signature': `v1,${createHmac('sha256', key).update(`evt_1.${ts}.${body}`).digest('base64')}`,
    ...over,
  };
}

describe('verifyWebhook', () => {
  it('accepts a genuine delivery and returns the event', () => {
    expect(verifyWebhook(secret, body, headers(), { now }).type).toBe('order.created');
  });
  it('accepts Headers objects and Buffers', () => {
    expect(verifyWebhook(secret, Buffer.from(body), new Headers(headers()), { now }).id).toBe('evt_1');
  });
  it('rejects a tampered body', () => {
    expect(() => verifyWebhook(secret, body.replace('order', 'odder'), headers(), { now })).toThrow(
      WebhookVerificationError,
    );
  });
  it('rejects another secret', () => {
    expect(
      verifyServiceSignature(
        `whsec_${Buffer.alloc(32, 8).toString('base64')}`,
        body,
        headers()['x-service-signature'],
      ),
    ).toBe(false);
  });
  it('rejects malformed signatures without throwing', () => {
    expect(verifyServiceSignature(secret, body, 'zz')).toBe(false);
    expect(verifyServiceSignature(secret, body, undefined)).toBe(false);
  });
  it('rejects old timestamps (replay)', () => {
    expect(() => verifyStandardSignature(secret, body, headers(), { now: now + 301_000 })).toThrow(/replay/);
    expect(() => verifyStandardSignature(secret, body, headers(), { now: now + 299_000 })).not.toThrow();
  });
  it('accepts any matching signature in a list', () => {
    const h = headers();
    h['webhook-signature'] = `v1,AAAA ${h['webhook-signature']}`;
    expect(() => verifyStandardSignature(secret, body, h, { now })).not.toThrow();
  });
  it('rejects a webhook-id that is not the event id', () => {
    const h = headers({ 'webhook-id': 'evt_2' });
    expect(() => verifyWebhook(secret, body, h, { now })).toThrow(WebhookVerificationError);
  });
});
