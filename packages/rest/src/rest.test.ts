import { create } from '@bufbuild/protobuf';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import { commerce, events, webhooks } from '@mcs/proto';
import { describe, expect, it } from 'vitest';
import { DecodeError, decodeObject, decodeParams, render, renderList } from './index.ts';

const order = create(commerce.OrderSchema, {
  id: 'ord_1',
  status: commerce.OrderStatus.PENDING,
  customer: { name: 'Ada', phone: '+4915112345678' },
  total: 1200n,
  currency: 'EUR',
  items: [{ name: 'Tea', unitAmount: 600n, quantity: 2n, amount: 1200n }],
  livemode: false,
  createdAt: timestampFromMs(Date.UTC(2026, 0, 2, 3, 4, 5)),
});

describe('render', () => {
  it('puts id and object first, snake_case names, numbers for int64, words for enums, ISO times', () => {
    const json = render(commerce.OrderSchema, order);
    expect(Object.keys(json).slice(0, 2)).toEqual(['id', 'object']);
    expect(json).toEqual({
      id: 'ord_1',
      object: 'order',
      status: 'pending',
      customer: { name: 'Ada', phone: '+4915112345678' },
      total: 1200,
      currency: 'EUR',
      items: [{ product: null, name: 'Tea', unit_amount: 600, quantity: 2, amount: 1200 }],
      livemode: false,
      created_at: '2026-01-02T03:04:05.000Z',
      updated_at: null,
    });
  });

  it('renders an event envelope with its data oneof as `data` and hides internal fields', () => {
    const event = create(events.EventSchema, {
      id: 'evt_1',
      type: events.EventType.ORDER_CREATED,
      createdAt: timestampFromMs(0),
      data: { case: 'order', value: order },
      livemode: false,
      accountId: 'acct_secret',
    });
    const json = render(events.EventSchema, event);
    expect(Object.keys(json)).toEqual(['id', 'object', 'type', 'created_at', 'data', 'livemode']);
    expect(json.type).toBe('order.created');
    expect(json.data).toEqual(render(commerce.OrderSchema, order));
    expect(JSON.stringify(json)).not.toContain('acct_secret');
  });

  it('renders lists Stripe-style', () => {
    const list = create(webhooks.ListWebhookEndpointsResponseSchema, { data: [], hasMore: true });
    expect(renderList(webhooks.ListWebhookEndpointsResponseSchema, list, '/v1/webhooks')).toEqual({
      object: 'list',
      data: [],
      has_more: true,
      url: '/v1/webhooks',
    });
  });
});

describe('decode', () => {
  const decodeOrder = (v: unknown) => decodeObject(commerce.CreateOrderRequestSchema, v);
  const failure = (fn: () => unknown) => {
    try {
      fn();
    } catch (e) {
      if (e instanceof DecodeError) return { code: e.code, param: e.param };
      throw e;
    }
    throw new Error('did not fail');
  };

  it('accepts a well-typed body', () => {
    const init = decodeOrder({
      customer: { name: 'A', phone: '+4915112345678' },
      currency: 'EUR',
      items: [{ name: 'x', unit_amount: 5, quantity: 1 }],
    });
    const msg = create(commerce.CreateOrderRequestSchema, init);
    expect(msg.items[0]!.unitAmount).toBe(5n);
  });

  it('names the missing field', () => {
    expect(failure(() => decodeOrder({ currency: 'EUR', items: [] }))).toEqual({
      code: 'missing_required_field',
      param: 'customer',
    });
    expect(failure(() => decodeOrder({ customer: { name: 'A' }, currency: 'EUR', items: [] }))).toEqual({
      code: 'missing_required_field',
      param: 'customer.phone',
    });
  });

  it('names wrong types, with list indexes', () => {
    expect(failure(() => decodeOrder({ customer: { name: 1, phone: 'x' } }))).toEqual({
      code: 'invalid_type',
      param: 'customer.name',
    });
    expect(
      failure(() =>
        decodeOrder({ customer: { name: 'A', phone: '+1' }, currency: 'EUR', items: [{ quantity: '2' }] }),
      ),
    ).toEqual({ code: 'invalid_type', param: 'items[0].quantity' });
    expect(
      failure(() =>
        decodeOrder({ customer: { name: 'A', phone: '+1' }, currency: 'EUR', items: [{ quantity: 1.5 }] }),
      ),
    ).toEqual({ code: 'invalid_type', param: 'items[0].quantity' });
  });

  it('refuses unknown parameters', () => {
    expect(failure(() => decodeOrder({ bogus: 1 }))).toEqual({ code: 'unknown_parameter', param: 'bogus' });
  });

  it('refuses text that is not Unicode (a lone surrogate), which storage would turn into U+FFFD', () => {
    const order = (name: string) => ({
      customer: { name, phone: '+4915112345678' },
      currency: 'EUR',
      items: [{ name: 'x', unit_amount: 5, quantity: 1 }],
    });
    for (const name of ['a\ud800b', 'a\udc00', '\ud83d']) {
      expect(failure(() => decodeOrder(order(name)))).toEqual({
        code: 'invalid_value',
        param: 'customer.name',
      });
    }
    // A pair is one character, as JSON's "\ud83d\udca5" is.
    expect(decodeOrder(order('a\ud83d\udca5'))).toBeTruthy();
    expect(
      failure(() => decodeParams(commerce.ListOrdersRequestSchema, { starting_after: 'ord_\ud800' })),
    ).toEqual({ code: 'invalid_value', param: 'starting_after' });
  });

  it('refuses integers beyond the safe range', () => {
    expect(
      failure(() =>
        decodeOrder({
          customer: { name: 'A', phone: '+1' },
          currency: 'EUR',
          items: [{ quantity: 2 ** 60 }],
        }),
      ),
    ).toEqual({ code: 'invalid_value', param: 'items[0].quantity' });
  });

  it('in an update, null clears a clearable field and is refused for any other; [] is refused', () => {
    const update = (v: unknown) =>
      decodeObject(webhooks.UpdateWebhookEndpointRequestSchema, { id: 'we_1', ...(v as object) }, '', {
        update: true,
      });
    // Cleared: reaches the service as its zero value, which it reads as "none".
    expect(update({ description: null, max_rate: null })).toEqual({
      id: 'we_1',
      description: '',
      maxRate: 0,
    });
    for (const field of ['url', 'disabled', 'ordering', 'auto_recover', 'disable_on_gone']) {
      expect(
        failure(() => update({ [field]: null })),
        field,
      ).toEqual({ code: 'invalid_type', param: field });
    }
    expect(failure(() => update({ events: [] }))).toEqual({ code: 'invalid_value', param: 'events' });
    expect(update({})).toEqual({ id: 'we_1' });
    // Outside an update, null is as absent (a create's default).
    const created = decodeObject(webhooks.CreateWebhookEndpointRequestSchema, {
      url: 'https://example.com/hooks',
      events: ['*'],
      description: null,
      max_rate: null,
    });
    expect(created).toEqual({ url: 'https://example.com/hooks', events: ['*'] });
  });

  it('takes times in ISO 8601 from 1970 on, and nothing else', () => {
    const resend = (since: unknown) => decodeObject(webhooks.ResendEventsRequestSchema, { since });
    const at = (ms: number) => ({ since: timestampFromMs(ms) });
    expect(resend('2026-11-29T14:00:00.5+02:00')).toEqual(at(Date.UTC(2026, 10, 29, 12, 0, 0, 500)));
    expect(resend('1970-01-01T00:00:00Z')).toEqual(at(0));
    // Other ISO 8601 shapes: a date alone (midnight UTC), minutes only, offsets without a colon,
    // a space for the T, no offset at all (UTC, whatever the server's zone).
    expect(resend('2026-11-29')).toEqual(at(Date.UTC(2026, 10, 29)));
    expect(resend('2026-11-29T14:00Z')).toEqual(at(Date.UTC(2026, 10, 29, 14)));
    expect(resend('2026-11-29T14:00:00+0200')).toEqual(at(Date.UTC(2026, 10, 29, 12)));
    expect(resend('2026-11-29 14:00:00.123456789')).toEqual(at(Date.UTC(2026, 10, 29, 14, 0, 0, 123)));
    for (const shape of [
      'Nov 29 2026',
      '2020',
      '2026-02-30',
      '2026-11-29T24:00:00Z',
      '+010000-01-01T00:00:00Z',
      5,
    ]) {
      expect(
        failure(() => resend(shape)),
        String(shape),
      ).toEqual({ code: 'invalid_type', param: 'since' });
    }
    // Before 1970 nothing was recorded, and ids (cursors) count from it: refused, not read as "all".
    for (const early of ['1969-12-31T23:59:59Z', '0001-01-01T00:00:00Z', '1970-01-01T00:30:00+01:00']) {
      expect(
        failure(() => resend(early)),
        early,
      ).toEqual({ code: 'invalid_value', param: 'since' });
    }
  });

  it('coerces query parameters by field type', () => {
    expect(decodeParams(commerce.ListOrdersRequestSchema, { limit: '5', starting_after: 'ord_1' })).toEqual({
      limit: 5,
      startingAfter: 'ord_1',
    });
    expect(failure(() => decodeParams(commerce.ListOrdersRequestSchema, { limit: 'ten' }))).toEqual({
      code: 'invalid_type',
      param: 'limit',
    });
  });
});
