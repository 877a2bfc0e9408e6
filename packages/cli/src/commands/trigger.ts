// mcs trigger TYPE: makes the real event of TYPE happen in test mode, by creating the resources
// it needs through the public API (no fake events: the same path as an integration's calls),
// then waits until the event is in the account's event log.
import { randomBytes } from 'node:crypto';
import type { Api, Json } from '../api.ts';
import { CliError, flag, usageError } from '../args.ts';
import type { Command } from '../context.ts';
import { fields, when } from '../output.ts';

/** The event types of spec 6.1, each with the calls that make it fire. */
export const TRIGGER_TYPES = [
  'order.created',
  'order.updated',
  'payment.completed',
  'payment.failed',
  'product.created',
  'product.updated',
  'conversation.created',
  'message.sent',
  'message.received',
] as const;
export type TriggerType = (typeof TRIGGER_TYPES)[number];

/**
 * A customer of its own for each run: messaging keeps one open conversation per customer, so a
 * second conversation with the same phone would be the first one again, and fire nothing.
 */
function customer() {
  const digits = String(randomBytes(4).readUInt32BE() % 100_000_000).padStart(8, '0');
  return { name: 'Ada Lovelace', phone: `+49151${digits}` };
}

interface Made {
  /** What was created, by kind. */
  resources: Record<string, string>;
  /** The id of the resource the awaited event carries as `data`. */
  subject: string;
}

async function order(api: Api, key: string): Promise<Json> {
  return api.post(
    '/v1/orders',
    { customer: customer(), currency: 'EUR', items: [{ name: 'Tea', unit_amount: 450, quantity: 2 }] },
    { idempotencyKey: `${key}-order` },
  );
}

async function payment(api: Api, key: string, outcome: 'complete' | 'fail'): Promise<Made> {
  const o = await order(api, key);
  const p = await api.post('/v1/payments', { order: o.id }, { idempotencyKey: `${key}-payment` });
  await api.post(`/v1/test_helpers/payments/${p.id}/${outcome}`);
  return { resources: { order: o.id, payment: p.id }, subject: p.id };
}

async function conversation(api: Api, key: string): Promise<Json> {
  return api.post('/v1/conversations', { customer: customer() }, { idempotencyKey: `${key}-conversation` });
}

async function product(api: Api, key: string): Promise<Json> {
  return api.post(
    '/v1/products',
    { name: 'Sample tea', price: 450, currency: 'EUR', description: 'made by mcs trigger' },
    { idempotencyKey: `${key}-product` },
  );
}

async function make(api: Api, type: TriggerType): Promise<Made> {
  // One run's writes share a random key prefix: a retried call never makes a second resource.
  const key = `mcs-trigger-${randomBytes(8).toString('hex')}`;
  switch (type) {
    case 'order.created': {
      const o = await order(api, key);
      return { resources: { order: o.id }, subject: o.id };
    }
    case 'order.updated': {
      const o = await order(api, key);
      await api.post(`/v1/orders/${o.id}/cancel`);
      return { resources: { order: o.id }, subject: o.id };
    }
    case 'payment.completed':
      return payment(api, key, 'complete');
    case 'payment.failed':
      return payment(api, key, 'fail');
    case 'product.created': {
      const p = await product(api, key);
      return { resources: { product: p.id }, subject: p.id };
    }
    case 'product.updated': {
      const p = await product(api, key);
      await api.post(`/v1/products/${p.id}`, { price: 500 });
      return { resources: { product: p.id }, subject: p.id };
    }
    case 'conversation.created': {
      const c = await conversation(api, key);
      return { resources: { conversation: c.id }, subject: c.id };
    }
    case 'message.sent': {
      const c = await conversation(api, key);
      const m = await api.post(`/v1/conversations/${c.id}/messages`, { text: 'Hello from mcs trigger' });
      return { resources: { conversation: c.id, message: m.id }, subject: m.id };
    }
    case 'message.received': {
      const c = await conversation(api, key);
      const m = await api.post(`/v1/test_helpers/conversations/${c.id}/inbound_messages`, {
        text: 'Hi, is my order on its way?',
      });
      return { resources: { conversation: c.id, message: m.id }, subject: m.id };
    }
    default: {
      const never: never = type;
      throw new Error(`unhandled type ${String(never)}`);
    }
  }
}

/** Polls the event log until the event of `type` about `subject` is there. */
async function awaitEvent(api: Api, type: string, subject: string, timeoutMs: number): Promise<Json | null> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const list = await api.get('/v1/events', { type, limit: 20 });
    const hit = (list.data as Json[]).find((e) => e.data?.id === subject);
    if (hit) return hit;
    if (Date.now() > deadline) return null;
    await new Promise((r) => setTimeout(r, 200));
  }
}

const trigger: Command = {
  name: 'trigger',
  usage: 'mcs trigger TYPE [--no-wait]',
  summary:
    'Makes a real TYPE event happen in test mode: creates the resources it needs through the API,\n' +
    'then waits until the event is recorded and prints its id.',
  options: { 'no-wait': { type: 'boolean', description: 'do not wait for the event to be recorded' } },
  positionals: [{ name: 'TYPE', description: `one of: ${TRIGGER_TYPES.join(', ')}` }],
  api: true,
  details:
    'What each type creates: order.created an order; order.updated an order, then cancels it;\n' +
    'payment.completed / payment.failed an order and a payment, then completes / fails it;\n' +
    'product.created a product; product.updated a product, then changes its price;\n' +
    'conversation.created a conversation; message.sent a conversation and a message to the customer;\n' +
    'message.received a conversation and a message from the customer. Test-mode keys only.',
  async run(ctx, p) {
    const type = p.positionals[0]!;
    if (!(TRIGGER_TYPES as readonly string[]).includes(type)) {
      throw usageError(`unknown event type "${type}" (one of: ${TRIGGER_TYPES.join(', ')})`, this);
    }
    const api = await ctx.api();
    if (api.livemode) throw new CliError('mcs trigger runs in test mode only: use a sk_test_ key');
    const made = await ctx.progress(`Triggering ${type}`, () => make(api, type as TriggerType));
    const event = flag(p, 'no-wait')
      ? null
      : await ctx.progress(`Waiting for the ${type} event`, () =>
          awaitEvent(api, type, made.subject, 15_000),
        );
    if (!flag(p, 'no-wait') && !event) {
      throw new CliError(
        `created ${Object.entries(made.resources)
          .map(([k, v]) => `${k} ${v}`)
          .join(', ')}, but no ${type} event about ${made.subject} was recorded within 15 s`,
      );
    }
    ctx.print({ type, resources: made.resources, event }, () => {
      const rows: Array<[string, string]> = Object.entries(made.resources);
      if (event) rows.unshift(['event', `${event.id} (${when(event.created_at)})`]);
      return `Triggered ${type}\n${fields(rows)}`;
    });
    return 0;
  },
};

export const TRIGGER_COMMANDS: Command[] = [trigger];
