// The OpenAPI document against what the API really sends: a journey through every operation of
// the served /v1/openapi.json records each answer and validates it with ajv (JSON Schema
// 2020-12) against the schema of its operation and status, with undocumented fields refused;
// every webhook payload a real HTTPS receiver gets is validated against the document's
// `webhooks` entry of its type. The journey must reach every operation with a 2xx and every
// event type, so a route or event added without being documented (or exercised) fails here.
import {
  type AccountKeys,
  createTestCerts,
  type Receiver,
  type Stack,
  startReceiver,
  startStack,
  type TestCerts,
  until,
} from '@mcs/testkit';
import { verifyWebhook } from '@mcs/webhook-verify';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

type Json = Record<string, any>;
let stack: Stack;
let certs: TestCerts;
let keys: AccountKeys;
let doc: Json;
let ajv: Ajv2020;
const receivers: Receiver[] = [];
/** "METHOD /template" → number of 2xx answers validated. */
const covered = new Map<string, number>();
const statusesSeen = new Set<string>();
const failures: string[] = [];

/** Every object schema that lists properties refuses others: the document must name every field. */
function strict(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(strict);
  if (node === null || typeof node !== 'object') return node;
  const out: Json = {};
  for (const [k, v] of Object.entries(node)) {
    out[k] = k === 'example' || k === 'examples' ? v : strict(v);
  }
  if (out.properties && typeof out.properties === 'object' && out.additionalProperties === undefined) {
    out.unevaluatedProperties = false;
  }
  return out;
}

const esc = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1');
const validators = new Map<string, ValidateFunction>();
function validator(pointer: string): ValidateFunction {
  let v = validators.get(pointer);
  if (!v) {
    v = ajv.getSchema(`openapi.json#${pointer}`);
    if (!v) throw new Error(`no schema at ${pointer}`);
    validators.set(pointer, v);
  }
  return v;
}

function operationOf(method: string, path: string): { template: string; op: Json } | undefined {
  const bare = path.split('?')[0]!;
  let best: { template: string; op: Json; literals: number } | undefined;
  for (const [template, ops] of Object.entries(doc.paths as Record<string, Json>)) {
    const op = ops[method.toLowerCase()];
    if (!op) continue;
    const re = new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`);
    if (!re.test(bare)) continue;
    const literals = template.split('/').filter((s) => s && !s.startsWith('{')).length;
    if (!best || literals > best.literals) best = { template, op, literals };
  }
  return best;
}

interface Res {
  status: number;
  headers: Headers;
  json: any;
  text: string;
}

/** Checks one answer against the document; collects failures so one run lists them all. */
function check(method: string, path: string, res: Res): void {
  const where = `${method} ${path} → ${res.status}`;
  // A 405 answers a method the path lacks: it is declared on the path's operations.
  const found =
    operationOf(method, path) ??
    (res.status === 405 ? (operationOf('GET', path) ?? operationOf('POST', path)) : undefined);
  if (!found) {
    failures.push(`${where}: no operation in the document`);
    return;
  }
  const { template, op } = found;
  const status = String(res.status);
  statusesSeen.add(status);
  const declared = op.responses[status] as Json | undefined;
  if (!declared) {
    failures.push(`${where}: status ${status} not declared for ${method} ${template}`);
    return;
  }
  if (!/^req_/.test(res.headers.get('request-id') ?? '')) failures.push(`${where}: no Request-Id`);
  if (status === '429' && !/^\d+$/.test(res.headers.get('retry-after') ?? ''))
    failures.push(`${where}: 429 without Retry-After`);
  const opMethod =
    found.op === operationOf(method, path)?.op
      ? method.toLowerCase()
      : res.status === 405 && operationOf('GET', path)
        ? 'get'
        : 'post';
  const pointer = declared.$ref
    ? `${(declared.$ref as string).slice(1)}/content/application~1json/schema`
    : `/paths/${esc(template)}/${opMethod}/responses/${status}/content/application~1json/schema`;
  const v = validator(pointer);
  if (!v(res.json)) {
    failures.push(`${where}: ${ajv.errorsText(v.errors)}\n  body: ${res.text.slice(0, 600)}`);
    return;
  }
  if (res.status < 300) {
    const key = `${method.toUpperCase()} ${template}`;
    covered.set(key, (covered.get(key) ?? 0) + 1);
  }
}

async function call(
  key: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Res> {
  const res = await fetch(`${stack.baseUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let json: any = null;
  try {
    json = JSON.parse(text);
  } catch {}
  const out = { status: res.status, headers: res.headers, json, text };
  check(method, path, out);
  return out;
}

/** A call that must succeed: its body for the next step. */
async function ok(method: string, path: string, body?: unknown, key = keys.secret_key): Promise<any> {
  const res = await call(key, method, path, body);
  expect(res.status, `${method} ${path}: ${res.text}`).toBe(200);
  return res.json;
}

/** The event types a receiver got, e.g. for a time-out's detail. */
const typesAt = (r: Receiver) => new Set(r.received.map((g) => JSON.parse(g.body).type as string));

beforeAll(async () => {
  certs = createTestCerts();
  stack = await startStack({
    env: {
      NODE_EXTRA_CA_CERTS: certs.caFile,
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
      // A first retry late enough to see a pending delivery with its next_attempt_at.
      WEBHOOK_RETRY_SCHEDULE: '2s,100ms,100ms,100ms,100ms',
      WEBHOOK_TIMEOUT: '1s',
      WEBHOOK_LEASE_MARGIN: '1s',
    },
  });
  keys = JSON.parse(
    await stack.cli(['accounts', 'create', '--email', 'doc@example.com', '--rate-limit', '100000']),
  );
  doc = (await (await fetch(`${stack.baseUrl}/v1/openapi.json`)).json()) as Json;
  ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats.default(ajv);
  ajv.addSchema({ ...(strict(doc) as Json), $id: 'openapi.json' });
}, 120_000);

afterAll(async () => {
  await stack?.stop();
  await Promise.all(receivers.map((r) => r.close()));
});

async function receiver(status = 200): Promise<Receiver> {
  const r = await startReceiver({ certs });
  r.reply = () => ({ status, body: status === 200 ? 'ok' : 'nope' });
  receivers.push(r);
  return r;
}

describe('every answer and every webhook payload validates against /v1/openapi.json', () => {
  it('runs a journey through every operation', async () => {
    // The event types (ping, the auto_recover probe, is checked in webhooks-replay.test.ts).
    const types = Object.keys(doc.webhooks).filter((t) => t !== 'ping');
    const resourceTypes = types.filter((t) => !t.startsWith('webhook_endpoint.'));
    const operational = types.filter((t) => t.startsWith('webhook_endpoint.'));

    // Endpoints: one for everything, one failing, one nobody listens on (no status code), and
    // one for the operational types when the API has them.
    const all = await receiver();
    const failing = await receiver(500);
    const ops = await receiver();
    const hookAll = await ok('POST', '/v1/webhooks', { url: all.url, events: ['*'], description: 'all' });
    const hookFailing = await ok('POST', '/v1/webhooks', { url: failing.url, events: ['order.created'] });
    const hookOps =
      operational.length > 0
        ? await ok('POST', '/v1/webhooks', { url: ops.url, events: operational, description: 'ops' })
        : undefined;
    expect(hookFailing.description).toBeNull();
    await ok('GET', `/v1/webhooks/${hookAll.id}`);
    await ok('GET', '/v1/webhooks?limit=100');
    await ok('POST', `/v1/webhooks/${hookAll.id}`, { description: 'everything' });

    // Products: with and without description, update, list, archive; idempotent replay.
    const idem = { 'idempotency-key': `doc-${Date.now()}` };
    const tea = await call(
      keys.secret_key,
      'POST',
      '/v1/products',
      { name: 'Tea', price: 450, currency: 'EUR' },
      idem,
    );
    const replay = await call(
      keys.secret_key,
      'POST',
      '/v1/products',
      { name: 'Tea', price: 450, currency: 'EUR' },
      idem,
    );
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.json.id).toBe(tea.json.id);
    const cup = await ok('POST', '/v1/products', {
      name: 'Cup',
      description: 'Porcelain, 200 ml.',
      price: 1200,
      currency: 'EUR',
    });
    await ok('GET', `/v1/products/${tea.json.id}`);
    await ok('GET', `/v1/products/${tea.json.id}`, undefined, keys.publishable_key);
    await ok('POST', `/v1/products/${cup.id}`, { price: 1300 });
    await ok('GET', '/v1/products?limit=1');
    await ok('GET', '/v1/products?active=true', undefined, keys.publishable_key);

    // Orders and payments through every transition.
    const order = (body?: Json) =>
      ok('POST', '/v1/orders', {
        customer: { name: 'Ada', phone: '+4915112345678' },
        currency: 'EUR',
        items: [
          { product: tea.json.id, quantity: 2 },
          { name: 'Gift wrap', unit_amount: 250, quantity: 1 },
        ],
        ...body,
      });
    const o1 = await order();
    expect(o1.items[1].product).toBeNull();
    await ok('GET', `/v1/orders/${o1.id}`);
    await ok('GET', '/v1/orders?status=pending&limit=5');
    const p1 = await ok('POST', '/v1/payments', { order: o1.id });
    await ok('GET', `/v1/payments/${p1.id}`);
    await ok('GET', `/v1/payments?order=${o1.id}`);
    await ok('POST', `/v1/test_helpers/payments/${p1.id}/complete`, {});
    await ok('POST', `/v1/orders/${o1.id}/fulfill`, {});
    const o2 = await order();
    const p2 = await ok('POST', '/v1/payments', { order: o2.id });
    const failed = await ok('POST', `/v1/test_helpers/payments/${p2.id}/fail`, {
      failure_message: 'Declined.',
    });
    expect(failed.failure_message).toBe('Declined.');
    await ok('POST', `/v1/orders/${o2.id}/cancel`, {});
    const o3 = await order();
    const p3 = await ok('POST', '/v1/payments', { order: o3.id });
    await ok('POST', `/v1/test_helpers/payments/${p3.id}/complete`, {});
    await ok('POST', `/v1/orders/${o3.id}/refund`, {});
    await ok('GET', '/v1/payments');
    await ok('DELETE', `/v1/products/${cup.id}`);

    // Conversations and messages.
    const conv = await ok('POST', '/v1/conversations', {
      customer: { name: 'Ada', phone: '+4915112345678' },
    });
    expect(conv.closed_at).toBeNull();
    await ok('GET', `/v1/conversations/${conv.id}`);
    const sent = await ok('POST', `/v1/conversations/${conv.id}/messages`, { text: 'Hello!' });
    await ok('POST', `/v1/test_helpers/conversations/${conv.id}/inbound_messages`, { text: 'Hi!' });
    await ok('GET', `/v1/conversations/${conv.id}/messages?limit=10`);
    await ok('GET', `/v1/messages/${sent.id}`);
    const closed = await ok('POST', `/v1/conversations/${conv.id}/close`, {});
    expect(closed.closed_at).not.toBeNull();
    await ok('GET', '/v1/conversations?status=closed');

    // Events.
    const events = await ok('GET', '/v1/events?limit=100');
    await ok('GET', `/v1/events/${events.data[0].id}`);
    await ok('GET', '/v1/events?type=order.created');

    // Deliveries: succeeded, failing until the endpoint is unhealthy, and without any answer.
    await all.waitFor(resourceTypes.length, 30_000);
    await until(
      'every resource event type at the receiver',
      () => resourceTypes.every((t) => typesAt(all).has(t)),
      {
        timeoutMs: 30_000,
        detail: () => `got: ${[...typesAt(all)].join(', ')}`,
      },
    );
    await ok('GET', `/v1/webhooks/${hookAll.id}/deliveries`);
    const unhealthy = await until(
      'the failing endpoint to become unhealthy',
      async () => {
        const e = await ok('GET', `/v1/webhooks/${hookFailing.id}`);
        return e.status === 'unhealthy' && e;
      },
      30_000,
    );
    expect(unhealthy.failing_since).not.toBeNull();
    expect(unhealthy.last_error).not.toBeNull();
    const hookDead = await ok('POST', '/v1/webhooks', {
      url: 'https://127.0.0.1:9/hooks',
      events: ['product.created'],
    });
    await ok('POST', '/v1/products', { name: 'Spoon', price: 300, currency: 'EUR' });
    const dead = await until(
      'attempts to the endpoint nobody listens on',
      async () => {
        const l = await ok('GET', `/v1/webhooks/${hookDead.id}/deliveries?limit=100`);
        return l.data.some((d: Json) => d.attempts.length > 0 && d.next_attempt_at !== null) && l;
      },
      30_000,
    );
    expect(dead.data[0].attempts[0].status_code).toBeNull();
    const failingDeliveries = await ok('GET', `/v1/webhooks/${hookFailing.id}/deliveries?status=failed`);
    await ok('POST', `/v1/webhooks/${hookFailing.id}/enable`, {});
    failing.reply = () => ({ status: 200, body: 'ok' });
    await ok('POST', `/v1/webhooks/${hookFailing.id}/deliveries/${failingDeliveries.data[0].id}/retry`, {});
    // A test event of every type: its sample data is validated with the real deliveries below.
    const beforeTests = all.received.length;
    for (const type of types) await ok('POST', `/v1/webhooks/${hookAll.id}/test`, { type });
    await until('every test event delivered', () => all.received.length >= beforeTests + types.length, {
      timeoutMs: 30_000,
    });
    await ok('POST', `/v1/webhooks/${hookFailing.id}/rotate_secret`, {});
    await ok('POST', `/v1/webhooks/${hookFailing.id}`, { disabled: true });
    await ok('DELETE', `/v1/webhooks/${hookDead.id}`);

    // mcs listen: the NDJSON stream of a listen endpoint, each line a ListenFrame, and the ack.
    const listenHook = await ok('POST', '/v1/webhooks', { url: 'mcs-listen:', events: ['product.created'] });
    const abort = new AbortController();
    const stream = await fetch(`${stack.baseUrl}/v1/webhooks/${listenHook.id}/listen`, {
      headers: { authorization: `Bearer ${keys.secret_key}` },
      signal: abort.signal,
    });
    expect(stream.status).toBe(200);
    expect(stream.headers.get('request-id')).toMatch(/^req_/);
    const reader = stream.body!.getReader();
    const decoder = new TextDecoder();
    let buffered = '';
    const frame = validator('/components/schemas/ListenFrame');
    const nextFrame = async (): Promise<Json> => {
      for (;;) {
        const nl = buffered.indexOf('\n');
        if (nl >= 0) {
          const line = buffered.slice(0, nl);
          buffered = buffered.slice(nl + 1);
          const value = JSON.parse(line) as Json;
          if (!frame(value)) failures.push(`listen frame: ${ajv.errorsText(frame.errors)}\n  ${line}`);
          return value;
        }
        const { value, done } = await reader.read();
        if (done) throw new Error('the listen stream ended');
        buffered += decoder.decode(value, { stream: true });
      }
    };
    expect((await nextFrame()).type).toBe('ready');
    covered.set('GET /v1/webhooks/{id}/listen', 1);
    await ok('POST', '/v1/products', { name: 'Kettle', price: 2500, currency: 'EUR' });
    let delivery: Json;
    do delivery = await nextFrame();
    while (delivery.type !== 'delivery');
    const listened = JSON.parse(delivery.body) as Json;
    const asEvent = validator(
      `/webhooks/${esc(listened.type)}/post/requestBody/content/application~1json/schema`,
    );
    if (!asEvent(listened)) failures.push(`listen delivery body: ${ajv.errorsText(asEvent.errors)}`);
    await ok('POST', `/v1/webhooks/${listenHook.id}/listen/ack`, {
      ack: delivery.ack,
      status_code: 200,
      error: null,
      latency_ms: 3,
      response_excerpt: 'ok',
    });
    abort.abort();
    await reader.cancel().catch(() => {});

    // A bulk resend (its example's endpoint would have to subscribe to its type) and its progress.
    const bulk = await ok('POST', '/v1/event_resends', {
      since: new Date(Date.now() - 3_600_000).toISOString(),
      type: 'product.created',
    });
    await ok('GET', `/v1/event_resends/${bulk.id}`);

    // Operations added beyond these (recover, resend, …): called with their request example, its
    // ids swapped for real ones of the same kind, and path parameters filled with ids at hand or
    // made by an earlier call (writes first, then reads); each must answer 2xx like any other.
    const byPrefix: Record<string, string> = {
      we: hookAll.id,
      evt: events.data[0].id,
      prod: tea.json.id,
      ord: o1.id,
      pay: p1.id,
      conv: conv.id,
      msg: sent.id,
      dlv: failingDeliveries.data[0].id,
    };
    const byName: Record<string, string> = { webhooks: hookAll.id, events: events.data[0].id };
    const realIds = (v: unknown): unknown =>
      typeof v === 'string'
        ? v.replace(/^([a-z]+)_01jdq7kx3m5w8n2c4v6b9t0r1s$/, (m, prefix: string) => byPrefix[prefix] ?? m)
        : Array.isArray(v)
          ? v.map(realIds)
          : v && typeof v === 'object'
            ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, realIds(x)]))
            : v;
    const rest = Object.entries(doc.paths as Record<string, Json>)
      .flatMap(([template, opsOf]) =>
        Object.keys(opsOf).map((method) => ({ template, method, op: opsOf[method] })),
      )
      .filter(({ template, method }) => !covered.has(`${method.toUpperCase()} ${template}`))
      .sort((x, y) => Number(x.method === 'get') - Number(y.method === 'get'));
    for (const { template, method, op } of rest) {
      const parts = template.split('/');
      const path = parts
        .map((seg, i) => {
          if (!seg.startsWith('{')) return seg;
          const name = seg.slice(1, -1);
          return byName[name] ?? byName[parts[i - 1] ?? ''] ?? 'missing';
        })
        .join('/');
      const example = (Object.values(op.requestBody?.content ?? {})[0] as Json | undefined)?.example;
      const res = await call(
        keys.secret_key,
        method.toUpperCase(),
        path,
        method === 'get' ? undefined : realIds(example ?? {}),
      );
      // What a write made names the path parameters of later reads (`{recovery}`, `event_resends/{id}`).
      if (res.status === 200 && typeof res.json?.id === 'string') {
        if (typeof res.json.object === 'string') byName[res.json.object] = res.json.id;
        const collection = parts.filter((seg) => seg && !seg.startsWith('{')).at(-1);
        if (collection) byName[collection] = res.json.id;
      }
    }

    // Errors answer with the envelope and a declared status.
    await call(keys.secret_key, 'POST', '/v1/orders', { currency: 'EUR' });
    await call('sk_test_nope', 'GET', '/v1/orders');
    await call(keys.publishable_key, 'POST', '/v1/products', { name: 'x', price: 1, currency: 'EUR' });
    await call(keys.secret_key, 'GET', '/v1/orders/ord_00000000000000000000000000');
    await call(keys.secret_key, 'POST', '/v1/products', { name: 'Other', price: 1, currency: 'EUR' }, idem);
    await call(keys.live_secret_key, 'POST', `/v1/test_helpers/payments/${p1.id}/complete`, {});
    await call(keys.publishable_key, 'GET', '/v1/orders');
    await call(keys.secret_key, 'PUT', '/v1/orders');
    const form = await fetch(`${stack.baseUrl}/v1/products`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${keys.secret_key}`,
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: 'name=Tea&price=450&currency=EUR',
    });
    const formText = await form.text();
    check('POST', '/v1/products', {
      status: form.status,
      headers: form.headers,
      text: formText,
      json: JSON.parse(formText),
    });
    const slow: AccountKeys = JSON.parse(
      await stack.cli(['accounts', 'create', '--email', 'slow@example.com', '--rate-limit', '1']),
    );
    const burst = await Promise.all(
      Array.from({ length: 6 }, () => call(slow.secret_key, 'GET', '/v1/products')),
    );
    expect(burst.some((r) => r.status === 429)).toBe(true);
    for (const s of ['400', '401', '403', '404', '415', '422', '429']) expect(statusesSeen).toContain(s);

    // Operational events, when the API has them: the failing endpoint went unhealthy, was
    // enabled and disabled.
    if (hookOps) {
      await until('every operational event type', () => operational.every((t) => typesAt(ops).has(t)), {
        timeoutMs: 30_000,
        detail: () => `got: ${[...typesAt(ops)].join(', ')}`,
      });
    }

    // Every webhook payload: signed, and valid against the webhooks entry of its type.
    const got = new Set<string>();
    for (const [r, secret] of [
      ...all.received.map((r) => [r, hookAll.secret] as const),
      ...ops.received.map((r) => [r, hookOps?.secret] as const),
    ]) {
      const event = verifyWebhook(secret, Buffer.from(r.body), r.headers) as Json;
      const type = event.type as string;
      got.add(type);
      if (!doc.webhooks[type]) {
        failures.push(`webhook ${type}: not in the document's webhooks`);
        continue;
      }
      const v = validator(`/webhooks/${esc(type)}/post/requestBody/content/application~1json/schema`);
      if (!v(event)) failures.push(`webhook ${type}: ${ajv.errorsText(v.errors)}\n  body: ${r.body}`);
    }
    expect([...got].sort()).toEqual([...types].sort());

    const missing = Object.entries(doc.paths as Record<string, Json>)
      .flatMap(([template, opsOf]) => Object.keys(opsOf).map((m) => `${m.toUpperCase()} ${template}`))
      .filter((k) => !covered.has(k));
    expect(failures).toEqual([]);
    expect(missing, 'operations the journey never got a 2xx from').toEqual([]);
  }, 240_000);
});
