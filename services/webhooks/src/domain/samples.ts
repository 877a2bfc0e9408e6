// Sample data for test events (POST /v1/webhooks/{id}/test): a resource of the kind the event
// type names, rendered like any other. The member of the Event's `data` oneof is found by the
// resource's `object` name (`order.created` → the member whose message is `order`), so a kind
// added to the oneof gets test events with no change here; the sample values below only make
// them look real, and any that no longer fit the message are dropped.
import { create, type DescMessage, getOption, hasOption, type Message } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { newId } from '@mcs/kit/ids';
import { api, events as eventsProto } from '@mcs/proto';
import { decodeObject, type JsonObject, objectName } from '@mcs/rest';

const customer = { name: 'Jenny Rosen', phone: '+4915112345678' };

/** REST-shaped sample fields per object and event type; the id, mode and times are added. */
function sampleFields(object: string, type: string): JsonObject {
  switch (object) {
    case 'order':
      return {
        status: type === 'order.updated' ? 'paid' : 'pending',
        customer,
        total: 1200,
        currency: 'EUR',
        items: [{ name: 'Sample item', unit_amount: 600, quantity: 2, amount: 1200 }],
      };
    case 'payment':
      return {
        order: newId('ord'),
        amount: 1200,
        currency: 'EUR',
        status: type === 'payment.failed' ? 'failed' : 'succeeded',
        ...(type === 'payment.failed' ? { failure_message: 'The sample card was declined.' } : {}),
      };
    case 'product':
      return {
        name: 'Sample product',
        description: 'A test event sample.',
        price: 1200,
        currency: 'EUR',
        active: true,
      };
    case 'conversation':
      return { customer, status: 'open' };
    case 'message':
      return {
        conversation: newId('conv'),
        direction: type === 'message.received' ? 'inbound' : 'outbound',
        status: type === 'message.received' ? 'received' : 'sent',
        text: 'Hello! This is a test event from mcs.',
      };
    case 'webhook_endpoint': {
      const status = type.split('.')[1] ?? 'enabled';
      return {
        url: 'https://example.com/webhooks',
        events: ['order.created'],
        status,
        ...(status === 'disabled' ? { disabled_reason: 'gone' } : {}),
        ...(status === 'enabled'
          ? {}
          : {
              last_error: status === 'disabled' ? 'HTTP 410' : 'HTTP 500',
              failing_since: '2026-01-01T00:00:00Z',
            }),
        disable_on_gone: true,
        ordering: 'none',
      };
    }
    default:
      return {};
  }
}

/** The `data` of a test event of `type` (a REST name, e.g. `order.created`). */
export function sampleData(type: string, livemode: boolean, now: Date): eventsProto.Event['data'] {
  const object = type.split('.')[0] ?? '';
  const oneof = eventsProto.EventSchema.oneofs.find((o) => o.name === 'data');
  const member = oneof?.fields.find((f) => f.message && objectName(f.message) === object);
  if (!member?.message) return { case: undefined };
  const desc: DescMessage = member.message;
  const known = Object.fromEntries(
    Object.entries(sampleFields(object, type)).filter(([k]) => desc.fields.some((f) => f.name === k)),
  );
  let init: Record<string, unknown>;
  try {
    init = decodeObject(desc, known);
  } catch {
    init = {}; // the message changed shape: a bare resource is still a valid sample
  }
  const set = (name: string, value: unknown) => {
    const field = desc.fields.find((f) => f.name === name);
    if (field) init[field.localName] = value;
  };
  const prefix = hasOption(desc, api.resource) ? getOption(desc, api.resource).idPrefix : object;
  set('id', newId(prefix, now.getTime()));
  set('livemode', livemode);
  set('created_at', timestampFromDate(now));
  set('updated_at', timestampFromDate(now));
  const value: Message = create(desc, init);
  return { case: member.localName, value } as eventsProto.Event['data'];
}
