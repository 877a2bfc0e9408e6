// `--events` of mcs listen: what the endpoint is made with.
import { describe, expect, it } from 'vitest';
import { expandEvents } from './listen.ts';

describe('expandEvents', () => {
  it('expands a family against every event type the API accepts, operational ones included', () => {
    expect(expandEvents('payment.*,order.created')).toEqual([
      'order.created',
      'payment.completed',
      'payment.failed',
    ]);
    expect(expandEvents('webhook_endpoint.*')).toEqual([
      'webhook_endpoint.disabled',
      'webhook_endpoint.enabled',
      'webhook_endpoint.unhealthy',
    ]);
  });

  it('keeps "*" as it is: the API reads it as the resource types only', () => {
    expect(expandEvents(undefined)).toEqual(['*']);
    expect(expandEvents('*')).toEqual(['*']);
    expect(expandEvents('order.*,*')).toEqual(['*']);
  });

  it('refuses a family that matches nothing', () => {
    expect(() => expandEvents('refund.*')).toThrow(/"refund\.\*" matches no event type/);
  });
});
