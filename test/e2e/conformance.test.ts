// Every route of the API, enumerated from the OpenAPI document the gateway derives from proto:
// publishable keys cannot write, live keys cannot use test helpers, another account's ids are
// 404 on every {id} route, and thousands of random, malformed requests never get a 5xx.
import { type AccountKeys, type Stack, startStack } from '@mcs/testkit';
import fc from 'fast-check';
import { Agent, fetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

let stack: Stack;
let a: AccountKeys;
let b: AccountKeys;
const agent = new Agent({ connections: 8 });
let routes: Array<{ method: string; path: string; op: any }> = [];

async function call(key: string | null, method: string, path: string, body?: string) {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (key) headers.authorization = `Bearer ${key}`;
  const res = await fetch(`${stack.baseUrl}${path}`, { method, headers, body, dispatcher: agent });
  const text = await res.text();
  let json: any = null;
  try {
    json = JSON.parse(text);
  } catch {}
  return { status: res.status, headers: res.headers, text, json };
}

const fill = (path: string, values: Record<string, string>) =>
  path.replace(/\{(\w+)\}/g, (_, name) => encodeURIComponent(values[name] ?? `x_${name}`));

beforeAll(async () => {
  stack = await startStack({ env: { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'false' } });
  a = JSON.parse(
    await stack.cli(['accounts', 'create', '--email', 'a@example.com', '--rate-limit', '100000']),
  );
  b = JSON.parse(
    await stack.cli(['accounts', 'create', '--email', 'b@example.com', '--rate-limit', '100000']),
  );
  const doc = (await (await fetch(`${stack.baseUrl}/v1/openapi.json`, { dispatcher: agent })).json()) as any;
  routes = Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([path, ops]) =>
    Object.entries(ops).map(([method, op]) => ({ method: method.toUpperCase(), path, op })),
  );
});
afterAll(() => stack?.stop());

function expectEnvelope(
  res: { status: number; headers: Headers; json: any; text: string },
  where: string,
  op?: any,
) {
  expect(res.status, `${where}: ${res.text}`).toBeLessThan(500);
  expect(res.headers.get('request-id'), where).toMatch(/^req_/);
  if (res.status >= 300) {
    expect(res.json?.error, `${where}: ${res.text}`).toMatchObject({
      type: expect.any(String),
      code: expect.any(String),
      message: expect.any(String),
      doc_url: expect.stringContaining('/docs/errors#'),
    });
    // As the document promises: the status is one the operation lists, the code one of its
    // x-errors for that status.
    if (op) {
      const status = String(res.status);
      expect(Object.keys(op.responses), `${where}: ${res.text}`).toContain(status);
      expect(op['x-errors']?.[status] ?? [], `${where}: ${res.text}`).toContain(res.json.error.code);
    }
  }
}

describe('every route', () => {
  it('is listed', () => {
    expect(routes.length).toBeGreaterThanOrEqual(6);
  });

  it('lets publishable keys read the product catalog and nothing else (403 permission_error)', async () => {
    const catalog = new Set(['GET /v1/products', 'GET /v1/products/{id}']);
    const ids = await fixtures(a.secret_key);
    for (const r of routes) {
      const path = fill(r.path, { id: ids.products ?? 'x' });
      const res = await call(a.publishable_key, r.method, path, r.method === 'GET' ? undefined : '{}');
      if (catalog.has(`${r.method} ${r.path}`)) {
        expect(res.status, `${r.method} ${path}: ${res.text}`).toBe(200);
        continue;
      }
      expect(res.status, `${r.method} ${r.path}`).toBe(403);
      expect(res.json.error).toMatchObject({ type: 'permission_error', code: 'secret_key_required' });
      expect(res.json.error.message).toContain(`${r.method} ${r.path}`);
    }
  });

  it('answers 400 param starting_after to a cursor that is not an id of the list on every list', async () => {
    const ids = await fixtures(a.secret_key);
    const lists = routes.filter(
      (r) => r.method === 'GET' && (r.op.parameters ?? []).some((p: any) => p.name === 'starting_after'),
    );
    expect(lists.length).toBeGreaterThanOrEqual(8);
    for (const r of lists) {
      const values: Record<string, string> = {};
      for (const [, name] of r.path.matchAll(/\{(\w+)\}/g)) values[name!] = ids[collectionOf(r.path, name!)]!;
      const path = fill(r.path, values);
      expect((await call(a.secret_key, 'GET', path)).status, `${path}`).toBe(200);
      for (const cursor of ['garbage', 'zzz_01kaaaaaaaaaaaaaaaaaaaaaaa', `${ids.orders}x`]) {
        const res = await call(a.secret_key, 'GET', `${path}?starting_after=${cursor}`);
        expect(res.status, `${path}?starting_after=${cursor}: ${res.text}`).toBe(400);
        expect(res.json.error).toMatchObject({ type: 'invalid_request_error', param: 'starting_after' });
      }
    }
  });

  it('refuses test helpers with live keys', async () => {
    for (const r of routes.filter((r) => r.path.startsWith('/v1/test_helpers/'))) {
      const res = await call(a.live_secret_key, r.method, fill(r.path, {}), '{}');
      expect(res.status, `${r.method} ${r.path}`).toBe(403);
      expect(res.json.error.code).toBe('test_mode_only');
    }
  });

  it('refuses requests without a key (401) everywhere', async () => {
    for (const r of routes) {
      const res = await call(null, r.method, fill(r.path, {}), r.method === 'GET' ? undefined : '{}');
      expect(res.status, `${r.method} ${r.path}`).toBe(401);
    }
  });

  it("answers 404 for another account's ids on every route with an {id}", async () => {
    const ids = await fixtures(a.secret_key);
    for (const r of routes.filter((r) => r.path.includes('{'))) {
      const names = [...r.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!);
      const values: Record<string, string> = {};
      for (const name of names) {
        const collection = collectionOf(r.path, name);
        const id = ids[collection];
        expect(
          id,
          `no fixture for "${collection}" (${r.method} ${r.path}): add one in fixtures()`,
        ).toBeDefined();
        values[name] = id!;
      }
      const path = fill(r.path, values);
      // A body with what the route requires besides the ids (the listen ack's token), else none.
      const media = r.op.requestBody?.content['application/json'];
      const body =
        r.method === 'GET' || r.method === 'DELETE'
          ? undefined
          : JSON.stringify(media?.schema.required?.length ? media.example : {});
      const theirs = await call(b.secret_key, r.method, path, body);
      expect(theirs.status, `${r.method} ${path} as another account: ${theirs.text}`).toBe(404);
      expect(theirs.json.error.type).toBe('not_found_error');
    }
  });
});

/** The collection a path parameter names: the literal segment before it (`/v1/orders/{id}` → orders). */
function collectionOf(path: string, param: string): string {
  const segs = path.split('/').filter(Boolean);
  const i = segs.indexOf(`{${param}}`);
  return segs[i - 1]!;
}

/** One resource of each kind, owned by the account of `key`; keyed by collection name. */
async function fixtures(key: string): Promise<Record<string, string>> {
  const post = async (path: string, body: unknown) => {
    const res = await call(key, 'POST', path, JSON.stringify(body));
    expect(res.status, `${path}: ${res.text}`).toBe(200);
    return res.json;
  };
  const ids: Record<string, string> = {};
  const endpoint = await post('/v1/webhooks', { url: 'https://93.184.215.14/hook', events: ['*'] });
  ids.webhooks = endpoint.id;
  const order = await post('/v1/orders', {
    customer: { name: 'Ada', phone: '+4915112345678' },
    currency: 'EUR',
    items: [{ name: 'Tea', unit_amount: 450, quantity: 1 }],
  });
  ids.orders = order.id;
  const has = (p: string) => routes.some((r) => r.path === p && r.method === 'POST');
  if (has('/v1/products')) {
    ids.products = (await post('/v1/products', { name: 'Tea', price: 450, currency: 'EUR' })).id;
  }
  if (has('/v1/payments')) ids.payments = (await post('/v1/payments', { order: order.id })).id;
  if (has('/v1/conversations')) {
    const conv = await post('/v1/conversations', { customer: { name: 'Ada', phone: '+4915112345678' } });
    ids.conversations = conv.id;
    if (has('/v1/conversations/{conversation}/messages')) {
      ids.messages = (await post(`/v1/conversations/${conv.id}/messages`, { text: 'hi' })).id;
    } else if (has('/v1/conversations/{id}/messages')) {
      ids.messages = (await post(`/v1/conversations/${conv.id}/messages`, { text: 'hi' })).id;
    }
  }
  if (routes.some((r) => r.path === '/v1/events')) {
    for (let i = 0; i < 100 && !ids.events; i++) {
      const list = await call(key, 'GET', '/v1/events?limit=1');
      if (list.json?.data?.[0]) ids.events = list.json.data[0].id;
      else await new Promise((r) => setTimeout(r, 50));
    }
  }
  if (has('/v1/webhooks/{id}/recover')) {
    const since = new Date(Date.now() - 60_000).toISOString();
    ids.recoveries = (await post(`/v1/webhooks/${endpoint.id}/recover`, { since })).id;
  }
  if (has('/v1/event_resends')) {
    // One bulk resend runs at a time per account: an empty range ends at once; wait out a 429.
    for (let i = 0; i < 30 && !ids.event_resends; i++) {
      const res = await call(
        key,
        'POST',
        '/v1/event_resends',
        JSON.stringify({ since: new Date().toISOString() }),
      );
      if (res.status === 200) ids.event_resends = res.json.id;
      else if (res.status === 429) await new Promise((r) => setTimeout(r, 500));
      else expect(res.status, `/v1/event_resends: ${res.text}`).toBe(200);
    }
  }
  const deliveriesPath = routes.find((r) => r.path.endsWith('/deliveries') && r.method === 'GET')?.path;
  if (deliveriesPath) {
    for (let i = 0; i < 100 && !ids.deliveries; i++) {
      const list = await call(key, 'GET', fill(deliveriesPath, { id: endpoint.id }));
      if (list.json?.data?.[0]) ids.deliveries = list.json.data[0].id;
      else await new Promise((r) => setTimeout(r, 50));
    }
  }
  return ids;
}

describe('Idempotency-Key on every POST route', () => {
  /**
   * For each POST route, how to make a valid first request (with whatever it needs created
   * first). A POST route missing here fails the test: every write must be proven keyed.
   */
  let phone = 4915100000000;
  const setups: Record<
    string,
    (post: (path: string, body: unknown) => Promise<any>) => Promise<[string, unknown]>
  > = {
    '/v1/products': async () => ['/v1/products', { name: 'Tea', price: 450, currency: 'EUR' }],
    '/v1/products/{id}': async (post) => {
      const p = await post('/v1/products', { name: 'Tea', price: 450, currency: 'EUR' });
      return [`/v1/products/${p.id}`, { name: 'Green tea' }];
    },
    '/v1/orders': async () => ['/v1/orders', orderBody()],
    '/v1/orders/{id}/cancel': async (post) => [
      `/v1/orders/${(await post('/v1/orders', orderBody())).id}/cancel`,
      {},
    ],
    '/v1/orders/{id}/fulfill': async (post) => [`/v1/orders/${(await paidOrder(post)).id}/fulfill`, {}],
    '/v1/orders/{id}/refund': async (post) => [`/v1/orders/${(await paidOrder(post)).id}/refund`, {}],
    '/v1/payments': async (post) => ['/v1/payments', { order: (await post('/v1/orders', orderBody())).id }],
    '/v1/test_helpers/payments/{id}/complete': async (post) => [
      `/v1/test_helpers/payments/${(await payment(post)).id}/complete`,
      {},
    ],
    '/v1/test_helpers/payments/{id}/fail': async (post) => [
      `/v1/test_helpers/payments/${(await payment(post)).id}/fail`,
      {},
    ],
    '/v1/conversations': async () => [
      '/v1/conversations',
      { customer: { name: 'Ada', phone: `+${++phone}` } },
    ],
    '/v1/conversations/{id}/close': async (post) => [
      `/v1/conversations/${(await conversation(post)).id}/close`,
      {},
    ],
    '/v1/conversations/{conversation}/messages': async (post) => [
      `/v1/conversations/${(await conversation(post)).id}/messages`,
      { text: 'Your order is ready' },
    ],
    '/v1/test_helpers/conversations/{conversation}/inbound_messages': async (post) => [
      `/v1/test_helpers/conversations/${(await conversation(post)).id}/inbound_messages`,
      { text: 'Thanks' },
    ],
    '/v1/webhooks': async () => ['/v1/webhooks', { url: 'https://93.184.215.14/keyed', events: ['*'] }],
    '/v1/webhooks/{id}': async (post) => [
      `/v1/webhooks/${(await endpoint(post)).id}`,
      { description: 'erp' },
    ],
    '/v1/webhooks/{id}/enable': async (post) => [`/v1/webhooks/${(await endpoint(post)).id}/enable`, {}],
    '/v1/webhooks/{id}/rotate_secret': async (post) => [
      `/v1/webhooks/${(await endpoint(post)).id}/rotate_secret`,
      {},
    ],
    '/v1/webhook_settings': async () => ['/v1/webhook_settings', { retry_schedule: ['5s', '30s'] }],
    '/v1/webhooks/{id}/recover': async (post) => [
      `/v1/webhooks/${(await endpoint(post)).id}/recover`,
      { since: new Date(Date.now() - 60_000).toISOString() },
    ],
    '/v1/events/{id}/resend': async (post) => {
      await endpoint(post);
      const product = await post('/v1/products', { name: 'Tea', price: 450, currency: 'EUR' });
      for (let i = 0; i < 100; i++) {
        const list = await call(a.secret_key, 'GET', '/v1/events?type=product.created&limit=10');
        const event = list.json?.data?.find((e: any) => e.data.id === product.id);
        if (event) return [`/v1/events/${event.id}/resend`, {}];
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error('no product.created event to resend');
    },
    '/v1/event_resends': async () => {
      // One bulk resend at a time per account: let the fixtures' (empty) ones finish.
      await new Promise((r) => setTimeout(r, 1_500));
      return [
        '/v1/event_resends',
        { since: new Date(Date.now() - 60_000).toISOString(), type: 'product.created' },
      ];
    },
    '/v1/webhooks/{id}/test': async (post) => [`/v1/webhooks/${(await endpoint(post)).id}/test`, {}],
    '/v1/webhooks/{id}/deliveries/{delivery}/retry': async (post) => {
      const ep = await endpoint(post);
      const d = await post(`/v1/webhooks/${ep.id}/test`, {});
      return [`/v1/webhooks/${ep.id}/deliveries/${d.id}/retry`, {}];
    },
  };
  /** The same request with one parameter changed to another valid value, where the route has one. */
  const anotherValidBody = (body: Record<string, unknown>): Record<string, unknown> | undefined => {
    const b = structuredClone(body) as any;
    if (typeof b.name === 'string') b.name += ' 2';
    else if (typeof b.text === 'string') b.text += ' 2';
    else if (typeof b.description === 'string') b.description += ' 2';
    else if (typeof b.url === 'string') b.url += '2';
    else if (Array.isArray(b.items)) b.items[0].quantity += 1;
    else if (b.customer) b.customer.name += ' 2';
    else if (Array.isArray(b.retry_schedule)) b.retry_schedule = ['10s'];
    else if (typeof b.since === 'string') b.since = new Date(Date.parse(b.since) - 1_000).toISOString();
    else return undefined;
    return b;
  };
  const orderBody = () => ({
    customer: { name: 'Ada', phone: '+4915112345678' },
    currency: 'EUR',
    items: [{ name: 'Tea', unit_amount: 450, quantity: 1 }],
  });
  type Post = (path: string, body: unknown) => Promise<any>;
  const payment = async (post: Post) =>
    post('/v1/payments', { order: (await post('/v1/orders', orderBody())).id });
  const paidOrder = async (post: Post) => {
    const pay = await payment(post);
    await post(`/v1/test_helpers/payments/${pay.id}/complete`, {});
    return { id: pay.order };
  };
  const conversation = (post: Post) =>
    post('/v1/conversations', { customer: { name: 'Ada', phone: `+${++phone}` } });
  const endpoint = (post: Post) =>
    post('/v1/webhooks', { url: 'https://93.184.215.14/keyed', events: ['*'] });

  it('replays the first answer byte for byte, and refuses the key for another body', async () => {
    const post: Post = async (path, body) => {
      const res = await call(a.secret_key, 'POST', path, JSON.stringify(body));
      expect(res.status, `${path}: ${res.text}`).toBe(200);
      return res.json;
    };
    const keyed = async (path: string, body: unknown, key: string) => {
      const res = await fetch(`${stack.baseUrl}${path}`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${a.secret_key}`,
          'content-type': 'application/json',
          'idempotency-key': key,
        },
        body: JSON.stringify(body),
        dispatcher: agent,
      });
      return { status: res.status, replayed: res.headers.get('idempotent-replayed'), text: await res.text() };
    };
    // Every POST the document says takes an Idempotency-Key (all but the ack of `mcs listen`).
    const posts = routes.filter(
      (r) =>
        r.method === 'POST' &&
        (r.op.parameters ?? []).some((p: any) => p.$ref === '#/components/parameters/IdempotencyKey'),
    );
    expect(posts.length).toBeGreaterThanOrEqual(15);
    let reusedChecked = 0;
    for (const r of posts) {
      const setup = setups[r.path];
      expect(setup, `no idempotency scenario for POST ${r.path}: add one`).toBeDefined();
      const [path, body] = await setup!(post);
      const key = `conformance-${r.path}-${Date.now()}`;
      const first = await keyed(path, body, key);
      expect(first.status, `POST ${path}: ${first.text}`).toBe(200);
      expect(first.replayed).toBeNull();
      const again = await keyed(path, body, key);
      expect(again, `POST ${path} replayed`).toEqual({ status: 200, replayed: 'true', text: first.text });
      const changed = anotherValidBody(body as Record<string, unknown>);
      if (changed) {
        const other = await keyed(path, changed, key);
        expect(other.status, `POST ${path} with another body: ${other.text}`).toBe(422);
        expect(JSON.parse(other.text).error.code).toBe('idempotency_key_reused');
        reusedChecked++;
      } else {
        // No other valid body for this route (an action without parameters): a body it does not
        // take is refused as such, and the key is not spent on it either way.
        const other = await keyed(path, { ...(body as object), description: 'another request' }, key);
        expect([400, 422], `POST ${path} with another body: ${other.text}`).toContain(other.status);
        expect(JSON.parse(other.text).error.code).toBe(
          other.status === 422 ? 'idempotency_key_reused' : 'unknown_parameter',
        );
      }
    }
    expect(reusedChecked, 'routes whose key was refused for another valid body').toBeGreaterThanOrEqual(10);
  });
});

describe('fuzzing every route', () => {
  const json = fc.jsonValue({ maxDepth: 3 });
  const strings = fc.oneof(
    fc.string(),
    fc.string({ unit: 'grapheme' }),
    fc.string({ unit: 'binary' }),
    fc.constantFrom('', ' ', '\u0000', '💥', 'null', '-1', '1e309', '%', '../', 'ord_'),
  );
  const value = fc.oneof(
    json,
    strings,
    fc.integer(),
    fc.double(),
    fc.boolean(),
    fc.constant(null),
    fc.array(json, { maxLength: 5 }),
  );

  /** Bodies near the valid shape: the route's own field names with random values. */
  function bodyFor(op: any) {
    const props = Object.keys(op.requestBody?.content?.['application/json']?.schema?.properties ?? {});
    const names = fc.oneof(fc.constantFrom(...(props.length ? props : ['x'])), fc.string({ maxLength: 12 }));
    return fc.oneof(
      fc.dictionary(names, value, { maxKeys: 6 }).map((o) => JSON.stringify(o)),
      json.map((v) => JSON.stringify(v)),
      strings,
      fc.constantFrom(
        '{',
        '{"a":',
        '[]',
        'true',
        '"x"',
        '{"customer":{"name":{"$gt":""}}}',
        `{"k":"${'x'.repeat(20000)}"}`,
      ),
    );
  }

  it('never answers 5xx, always answers the error envelope', async () => {
    let requests = 0;
    for (const r of routes) {
      const runs = r.method === 'GET' ? 60 : 200;
      await fc.assert(
        fc.asyncProperty(
          fc.array(strings, { minLength: 3, maxLength: 3 }),
          bodyFor(r.op),
          fc.dictionary(fc.string({ maxLength: 10 }), fc.string({ maxLength: 20 }), { maxKeys: 3 }),
          async (params, body, query) => {
            const values = { id: params[0]!, conversation: params[1]!, delivery: params[2]! };
            let path = fill(r.path, values);
            if (r.method === 'GET') path += `?${new URLSearchParams(query)}`;
            const res = await call(
              a.secret_key,
              r.method,
              path,
              r.method === 'GET' || r.method === 'DELETE' ? undefined : body,
            );
            requests++;
            // A path parameter that is empty or a dot segment names another route (or none).
            const sameRoute = params.every((p) => p !== '' && p !== '.' && p !== '..');
            expectEnvelope(res, `${r.method} ${path} ${body.slice(0, 200)}`, sameRoute ? r.op : undefined);
          },
        ),
        { numRuns: runs },
      );
    }
    expect(requests).toBeGreaterThanOrEqual(1_000);
  }, 300_000);
});
