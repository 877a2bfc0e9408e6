// The gateway as a client sees it: authentication, the error envelope, idempotency (including a
// gateway crash after the service committed the write and its answer), rate limits and the docs.
import net from 'node:net';
import { type AccountKeys, type Stack, startStack } from '@mcs/testkit';
import { Agent, fetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

let stack: Stack;
let keys: AccountKeys;
/** Replaced after a gateway restart, so no request rides a connection to the dead process. */
let agent = new Agent();

beforeAll(async () => {
  stack = await startStack();
  keys = await stack.createAccount();
});
afterAll(() => stack?.stop());

interface Res {
  status: number;
  headers: Headers;
  text: string;
  json: any;
}

async function call(
  method: string,
  path: string,
  opts: { key?: string | null; body?: unknown; raw?: string; headers?: Record<string, string> } = {},
): Promise<Res> {
  const headers: Record<string, string> = { 'content-type': 'application/json', ...opts.headers };
  const key = opts.key === undefined ? keys.secret_key : opts.key;
  if (key !== null) headers.authorization = `Bearer ${key}`;
  const res = await fetch(`${stack.baseUrl}${path}`, {
    dispatcher: agent,
    method,
    headers,
    body: opts.raw ?? (opts.body === undefined ? undefined : JSON.stringify(opts.body)),
  });
  const text = await res.text();
  let json: any = null;
  try {
    json = JSON.parse(text);
  } catch {}
  return { status: res.status, headers: res.headers, text, json };
}

const order = (name = 'Ada') => ({
  customer: { name, phone: '+4915112345678' },
  currency: 'EUR',
  items: [{ name: 'Tea', unit_amount: 450, quantity: 2 }],
});

function expectError(res: Res, status: number, type: string, code: string, param?: string) {
  expect(res.status, res.text).toBe(status);
  expect(res.headers.get('request-id')).toMatch(/^req_/);
  expect(res.json.error).toMatchObject({ type, code, doc_url: `${stack.baseUrl}/docs/errors#${code}` });
  expect(typeof res.json.error.message).toBe('string');
  if (param) expect(res.json.error.param).toBe(param);
  else expect(res.json.error.param).toBeUndefined();
}

describe('authentication', () => {
  it('refuses missing, malformed and unknown keys with authentication_error', async () => {
    expectError(
      await call('GET', '/v1/orders', { key: null }),
      401,
      'authentication_error',
      'api_key_missing',
    );
    expectError(
      await call('GET', '/v1/orders', { key: null, headers: { authorization: 'Basic abc' } }),
      401,
      'authentication_error',
      'api_key_invalid',
    );
    expectError(
      await call('GET', '/v1/orders', { key: 'sk_test_short' }),
      401,
      'authentication_error',
      'api_key_invalid',
    );
    expectError(
      await call('GET', '/v1/orders', { key: `sk_test_${'A'.repeat(40)}` }),
      401,
      'authentication_error',
      'api_key_invalid',
    );
  });

  it('lets publishable keys read the product catalog only', async () => {
    const tea = await call('POST', '/v1/products', { body: { name: 'Tea', price: 450, currency: 'EUR' } });
    const pk = { key: keys.publishable_key };
    expect((await call('GET', '/v1/products', pk)).json.data.map((p: any) => p.id)).toContain(tea.json.id);
    expect((await call('GET', `/v1/products/${tea.json.id}`, pk)).json.name).toBe('Tea');
    for (const path of ['/v1/orders', '/v1/payments', '/v1/conversations', '/v1/events', '/v1/webhooks']) {
      const res = await call('GET', path, pk);
      expectError(res, 403, 'permission_error', 'secret_key_required');
      expect(res.json.error.message).toBe(
        `Publishable keys (pk_) can only read the product catalog (GET /v1/products, GET /v1/products/{id}). Use a secret key (sk_) for GET ${path}.`,
      );
    }
    expectError(
      await call('POST', '/v1/orders', { ...pk, body: order() }),
      403,
      'permission_error',
      'secret_key_required',
    );

    // An archived product is withdrawn from the public catalog; the secret key still sees it.
    const old = await call('POST', '/v1/products', {
      body: { name: 'Old tea', price: 300, currency: 'EUR' },
    });
    expect((await call('DELETE', `/v1/products/${old.json.id}`)).json.active).toBe(false);
    expectError(
      await call('GET', `/v1/products/${old.json.id}`, pk),
      404,
      'not_found_error',
      'resource_missing',
      'id',
    );
    const listed = (await call('GET', '/v1/products?limit=100', pk)).json.data.map((p: any) => p.id);
    expect(listed).toContain(tea.json.id);
    expect(listed).not.toContain(old.json.id);
    expectError(
      await call('GET', '/v1/products?active=false', pk),
      400,
      'invalid_request_error',
      'invalid_value',
      'active',
    );
    expect((await call('GET', `/v1/products/${old.json.id}`)).json.active).toBe(false);
  });

  it('keeps test and live data apart', async () => {
    const made = await call('POST', '/v1/orders', { body: order() });
    expect(made.json.livemode).toBe(false);
    expectError(
      await call('GET', `/v1/orders/${made.json.id}`, { key: keys.live_secret_key }),
      404,
      'not_found_error',
      'resource_missing',
      'id',
    );
    const live = await call('POST', '/v1/orders', { key: keys.live_secret_key, body: order() });
    expect(live.json.livemode).toBe(true);
    const testList = await call('GET', '/v1/orders?limit=100');
    expect(testList.json.data.map((o: any) => o.id)).not.toContain(live.json.id);
  });

  it('honours a revocation at once', async () => {
    const other = await stack.createAccount();
    expect((await call('GET', '/v1/orders', { key: other.secret_key })).status).toBe(200); // now cached
    const list = JSON.parse(await stack.cli(['keys', 'list', '--account', other.account.id]));
    const sk = list.data.find((k: any) => k.kind === 'secret' && k.livemode === false);
    await stack.cli(['keys', 'revoke', '--account', other.account.id, '--key', sk.id]);
    const deadline = Date.now() + 1_000;
    let status = 0;
    while (Date.now() < deadline) {
      status = (await call('GET', '/v1/orders', { key: other.secret_key })).status;
      if (status === 401) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(status).toBe(401);
  });
});

describe('errors', () => {
  it('answers unknown routes, wrong methods, bad JSON, big bodies in the envelope', async () => {
    expectError(await call('GET', '/v1/nowhere'), 404, 'not_found_error', 'route_not_found');
    const wrong = await call('PUT', '/v1/orders', { body: {} });
    expectError(wrong, 405, 'invalid_request_error', 'method_not_allowed');
    expect(wrong.headers.get('allow')).toBe('GET, HEAD, POST');
    expectError(
      await call('POST', '/v1/orders', { raw: '{"customer":' }),
      400,
      'invalid_request_error',
      'invalid_json',
    );
    expectError(
      await call('POST', '/v1/orders', { raw: '[1,2]' }),
      400,
      'invalid_request_error',
      'invalid_json',
    );
    // JSON travels as UTF-8 (RFC 8259 8.1): bytes that are not UTF-8 (Latin-1 sent as is) are
    // refused, not stored with U+FFFD in place of what the client wrote.
    const latin1 = Buffer.from(JSON.stringify(order('Zoë')), 'latin1');
    const notUtf8 = await fetch(`${stack.baseUrl}/v1/orders`, {
      dispatcher: agent,
      method: 'POST',
      headers: { authorization: `Bearer ${keys.secret_key}`, 'content-type': 'application/json' },
      body: latin1,
    });
    const notUtf8Text = await notUtf8.text();
    expectError(
      { status: notUtf8.status, headers: notUtf8.headers, text: notUtf8Text, json: JSON.parse(notUtf8Text) },
      400,
      'invalid_request_error',
      'invalid_json',
    );
    expect(JSON.parse(notUtf8Text).error.message).toContain('UTF-8');
    // Nor a lone surrogate, which JSON can spell ("\ud800") but no text can hold.
    const lone = JSON.stringify(order()).replace('"Ada"', '"A\\ud800"');
    expectError(
      await call('POST', '/v1/orders', { raw: lone }),
      400,
      'invalid_request_error',
      'invalid_value',
      'customer.name',
    );
    // A body that is not JSON by its Content-Type is refused by name (a form post, text, none).
    for (const type of [
      'application/x-www-form-urlencoded',
      'text/plain;charset=UTF-8',
      'multipart/form-data; boundary=x',
      null,
    ]) {
      const headers: Record<string, string> = type === null ? {} : { 'content-type': type };
      const res = await fetch(`${stack.baseUrl}/v1/orders`, {
        dispatcher: agent,
        method: 'POST',
        headers: { authorization: `Bearer ${keys.secret_key}`, ...headers },
        // undici types a string body text/plain unless told; bytes carry no type of their own.
        body: type === null ? Buffer.from(JSON.stringify(order())) : 'currency=EUR&customer[name]=Ada',
      });
      const text = await res.text();
      expectError(
        { status: res.status, headers: res.headers, text, json: JSON.parse(text) },
        415,
        'invalid_request_error',
        'unsupported_media_type',
      );
      expect(JSON.parse(text).error.message).toContain('Content-Type: application/json');
    }
    // Content-Type parameters and case do not matter; an empty body needs no type.
    const charset = await call('POST', '/v1/orders', {
      body: order(),
      headers: { 'content-type': 'Application/JSON; charset=utf-8' },
    });
    expect(charset.status, charset.text).toBe(200);
    const bom = await call('POST', '/v1/orders', { raw: `\uFEFF${JSON.stringify(order())}` });
    expect(bom.status, bom.text).toBe(200);
    const big = await call('POST', '/v1/orders', { raw: JSON.stringify({ pad: 'x'.repeat(1024 * 1024) }) });
    expectError(big, 413, 'invalid_request_error', 'body_too_large');
  });

  it("answers requests Node's HTTP parser refuses in the envelope, with a Request-Id", async () => {
    const { port, hostname } = new URL(stack.baseUrl);
    const raw = (request: string) =>
      new Promise<Res>((resolve, reject) => {
        const socket = net.connect(Number(port), hostname);
        let got = '';
        socket.on('data', (d) => {
          got += d.toString();
        });
        socket.on('error', reject);
        socket.on('close', () => {
          const [head = '', body = ''] = got.split('\r\n\r\n');
          const [status, ...lines] = head.split('\r\n');
          const headers = new Headers(lines.map((l) => l.split(/:\s*/, 2) as [string, string]));
          let json: any = null;
          try {
            json = JSON.parse(body);
          } catch {}
          resolve({ status: Number(status!.split(' ')[1]), headers, text: got, json });
        });
        socket.end(request);
      });
    const control = await raw('GET /v1/products HTTP/1.1\r\nHost: x\r\nX-Foo: a\x01b\r\n\r\n');
    expectError(control, 400, 'invalid_request_error', 'malformed_request');
    expect(control.headers.get('connection')).toBe('close');
    const length = await raw('POST /v1/orders HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}');
    expectError(length, 400, 'invalid_request_error', 'malformed_request');
    const big = await raw(`GET /v1/products HTTP/1.1\r\nHost: x\r\nX-Pad: ${'x'.repeat(20_000)}\r\n\r\n`);
    expectError(big, 431, 'invalid_request_error', 'headers_too_large');
    // HTTP/1.1 requires Host (RFC 9112 3.2): refused in the envelope too, not with Node's bare,
    // empty 400.
    const auth = `Authorization: Bearer ${keys.secret_key}\r\n`;
    const hostless = await raw(`GET /v1/products HTTP/1.1\r\n${auth}Connection: close\r\n\r\n`);
    expectError(hostless, 400, 'invalid_request_error', 'malformed_request');
    expect(hostless.json.error.message).toContain('Host');
    expect(hostless.headers.get('connection')).toBe('close');
    // The server goes on answering.
    expect((await call('GET', '/v1/products')).status).toBe(200);
  });

  it('reads a path as its route names it, refuses query parameters on a body route, and 405s the pages', async () => {
    // `/v1/products/` and `/v1//products` are `/v1/products`: the list's url, and an idempotent
    // retry to the same route with a trailing slash replays instead of counting as another request.
    for (const path of ['/v1/products/', '/v1//products', '//v1/products', '/v1/products']) {
      const list = await call('GET', `${path}?limit=1`);
      expect(list.json, path).toMatchObject({ object: 'list', url: '/v1/products' });
    }
    const key = `slash-${Date.now()}`;
    const product = { name: 'Tea', price: 450, currency: 'EUR' };
    const first = await call('POST', '/v1/products', { body: product, headers: { 'idempotency-key': key } });
    const again = await call('POST', '/v1/products/', { body: product, headers: { 'idempotency-key': key } });
    expect(first.status, first.text).toBe(200);
    expect({ status: again.status, text: again.text }).toEqual({ status: 200, text: first.text });
    expect(again.headers.get('idempotent-replayed')).toBe('true');

    // A body route's parameters go in its body: one in the query is refused, not silently lost.
    const query = await call('POST', '/v1/products?name=Coffee', { body: product });
    expectError(query, 400, 'invalid_request_error', 'unknown_parameter', 'name');

    for (const path of ['/v1/openapi.json', '/docs', '/docs/errors']) {
      const res = await call('POST', path, { body: {} });
      expectError(res, 405, 'invalid_request_error', 'method_not_allowed');
      expect(res.headers.get('allow'), path).toBe('GET, HEAD');
    }
  });

  it('names the offending parameter', async () => {
    expectError(
      await call('POST', '/v1/orders', { body: { ...order(), customer: { name: 'A' } } }),
      400,
      'invalid_request_error',
      'missing_required_field',
      'customer.phone',
    );
    expectError(
      await call('POST', '/v1/orders', { body: { ...order(), currency: 5 } }),
      400,
      'invalid_request_error',
      'invalid_type',
      'currency',
    );
    // One code for every currency that is not ISO 4217, on orders and products alike.
    for (const currency of ['ZZZ', 'eur', 'EURO', 'E1']) {
      for (const [path, body] of [
        ['/v1/orders', { ...order(), currency }],
        ['/v1/products', { name: 'Tea', price: 450, currency }],
      ] as const) {
        expectError(
          await call('POST', path, { body }),
          400,
          'invalid_request_error',
          'invalid_currency',
          'currency',
        );
      }
    }
    expectError(
      await call('POST', '/v1/orders', { body: { ...order(), colour: 'red' } }),
      400,
      'invalid_request_error',
      'unknown_parameter',
      'colour',
    );
    expectError(
      await call('POST', '/v1/orders', { body: { ...order(), customer: { name: 'A', phone: '12345' } } }),
      400,
      'invalid_request_error',
      'invalid_phone',
      'customer.phone',
    );
    expectError(
      await call('GET', '/v1/orders?limit=0'),
      400,
      'invalid_request_error',
      'invalid_value',
      'limit',
    );
    expectError(
      await call('GET', '/v1/orders?limit=101'),
      400,
      'invalid_request_error',
      'invalid_value',
      'limit',
    );
    expectError(
      await call('GET', '/v1/orders?color=red'),
      400,
      'invalid_request_error',
      'unknown_parameter',
      'color',
    );
  });

  it('serves a documentation anchor for every doc_url', async () => {
    const page = await fetch(`${stack.baseUrl}/docs/errors`).then((r) => r.text());
    for (const code of [
      'missing_required_field',
      'api_key_invalid',
      'idempotency_key_reused',
      'rate_limited',
      'api_error',
    ]) {
      expect(page).toContain(`id="${code}"`);
    }
  });

  it('serves OpenAPI 3.1 with every route, and the reference page', async () => {
    const doc = (await fetch(`${stack.baseUrl}/v1/openapi.json`).then((r) => r.json())) as any;
    expect(doc.servers[0].url).toBe(stack.baseUrl);
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.paths['/v1/orders'])).toEqual(expect.arrayContaining(['get', 'post']));
    expect(doc.paths['/v1/webhooks'].post.requestBody.content['application/json'].schema.required).toEqual([
      'url',
      'events',
    ]);
    const html = await fetch(`${stack.baseUrl}/docs/reference`).then((r) => r.text());
    expect(html).toContain('id="CreateOrder"');
    expect(html).toContain('<code>/v1/orders</code>');
    const ready = await fetch(`${stack.baseUrl}/readyz`);
    expect(ready.status).toBe(200);
  });

  it('sends the bare address to the API reference', async () => {
    const root = await fetch(`${stack.baseUrl}/`, { redirect: 'manual' });
    expect(root.status).toBe(302);
    expect(root.headers.get('location')).toBe('/docs');
  });

  it('says which setting allows a local http:// endpoint it refuses', async () => {
    const res = await call('POST', '/v1/webhooks', {
      body: { url: 'http://127.0.0.1:3000/hooks', events: ['order.created'] },
    });
    expectError(res, 400, 'invalid_request_error', 'invalid_url', 'url');
    expect(res.json.error.message).toContain('url must use https://.');
    expect(res.json.error.message).toContain('WEBHOOK_ALLOW_HTTP=true');
  });
});

describe('updates', () => {
  it('accepts PATCH as well as POST on a resource', async () => {
    const product = await call('POST', '/v1/products', {
      body: { name: 'Tea', price: 450, currency: 'EUR' },
    });
    expect(product.status, product.text).toBe(200);
    const patched = await call('PATCH', `/v1/products/${product.json.id}`, { body: { price: 500 } });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.json.price).toBe(500);
    const posted = await call('POST', `/v1/products/${product.json.id}`, { body: { name: 'Green tea' } });
    expect(posted.json).toMatchObject({ name: 'Green tea', price: 500 });
    const deleted = await call('DELETE', `/v1/products/${product.json.id}`);
    expect(deleted.json.active).toBe(false);
  });

  it('clears with null what can be cleared, and refuses null, [] and a second id elsewhere', async () => {
    const product = await call('POST', '/v1/products', {
      body: { name: 'Tea', price: 450, currency: 'EUR', description: 'Loose leaf' },
    });
    const path = `/v1/products/${product.json.id}`;
    const cleared = await call('POST', path, { body: { description: null } });
    expect(cleared.status, cleared.text).toBe(200);
    expect(cleared.json).toMatchObject({ name: 'Tea', description: null });
    // null would otherwise be read as "unchanged": the caller is told, nothing changes.
    expectError(
      await call('POST', path, { body: { name: null } }),
      400,
      'invalid_request_error',
      'invalid_type',
      'name',
    );
    const hook = await call('POST', '/v1/webhooks', {
      body: { url: 'https://example.com/hooks', events: ['order.created'], description: 'Shop', max_rate: 5 },
    });
    const hookPath = `/v1/webhooks/${hook.json.id}`;
    const hookCleared = await call('PATCH', hookPath, { body: { description: null, max_rate: null } });
    expect(hookCleared.json).toMatchObject({ description: null, max_rate: null });
    expectError(
      await call('POST', hookPath, { body: { events: [] } }),
      400,
      'invalid_request_error',
      'invalid_value',
      'events',
    );
    // A body or query naming the path's parameter must name the same thing.
    expectError(
      await call('POST', path, { body: { id: 'prod_other', name: 'Stolen' } }),
      400,
      'invalid_request_error',
      'invalid_value',
      'id',
    );
    expect((await call('POST', path, { body: { id: product.json.id, name: 'Green tea' } })).json.name).toBe(
      'Green tea',
    );
    expectError(
      await call('GET', `${path}?id=prod_other`),
      400,
      'invalid_request_error',
      'invalid_value',
      'id',
    );
    // A query parameter given twice is refused, not decided by its last value.
    expectError(
      await call('GET', '/v1/orders?status=pending&status=paid'),
      400,
      'invalid_request_error',
      'invalid_value',
      'status',
    );
  });

  it('counts characters as people do, and says when text is empty', async () => {
    const named = (name: string) =>
      call('POST', '/v1/products', { body: { name, price: 1, currency: 'EUR' } });
    // 200 emoji are 200 characters (400 UTF-16 units), as the document's maxLength counts them.
    const emoji = await named('🍵'.repeat(200));
    expect(emoji.status, emoji.text).toBe(200);
    expectError(await named('🍵'.repeat(201)), 400, 'invalid_request_error', 'invalid_value', 'name');
    const blank = await named('   ');
    expectError(blank, 400, 'invalid_request_error', 'missing_required_field', 'name');
    expect(blank.json.error.message).toBe('name must not be empty.');
  });
});

describe('idempotency', () => {
  it('replays the first answer byte for byte, creating nothing', async () => {
    const key = `k-${Date.now()}`;
    const first = await call('POST', '/v1/orders', { body: order(), headers: { 'idempotency-key': key } });
    expect(first.status).toBe(200);
    const again = await call('POST', '/v1/orders', {
      raw: JSON.stringify(order()),
      headers: { 'idempotency-key': key },
    });
    expect(again.status).toBe(200);
    expect(again.text).toBe(first.text);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    const list = await call('GET', '/v1/orders?limit=100');
    expect(list.json.data.filter((o: any) => o.id === first.json.id)).toHaveLength(1);
  });

  it('keeps a key per account and mode, whichever service owns the route (spec 7.4)', async () => {
    const conversationBody = { customer: { name: 'Ada', phone: '+4915112345678' } };
    const endpointBody = { url: 'https://example.com/key-reuse', events: ['order.created'] };
    const count = async (path: string) => (await call('GET', `${path}?limit=100`)).json.data.length as number;
    const before = { conversations: await count('/v1/conversations'), webhooks: await count('/v1/webhooks') };

    // An order first; then the same key elsewhere, once after the gateway has a replay in memory.
    for (const replayFirst of [false, true]) {
      const headers = { 'idempotency-key': `svc-${replayFirst}-${Date.now()}` };
      expect((await call('POST', '/v1/orders', { body: order(), headers })).status).toBe(200);
      if (replayFirst) {
        const again = await call('POST', '/v1/orders', { body: order(), headers });
        expect(again.headers.get('idempotent-replayed')).toBe('true');
      }
      for (const [path, body] of [
        ['/v1/conversations', conversationBody],
        ['/v1/webhooks', endpointBody],
      ] as const) {
        expectError(
          await call('POST', path, { body, headers }),
          422,
          'invalid_request_error',
          'idempotency_key_reused',
        );
      }
    }
    // A conversation first, then an order: the same.
    const headers = { 'idempotency-key': `svc-conv-${Date.now()}` };
    expect((await call('POST', '/v1/conversations', { body: conversationBody, headers })).status).toBe(200);
    expectError(
      await call('POST', '/v1/orders', { body: order(), headers }),
      422,
      'invalid_request_error',
      'idempotency_key_reused',
    );
    expect(await count('/v1/conversations')).toBe(before.conversations + 1);
    expect(await count('/v1/webhooks')).toBe(before.webhooks);
  });

  it('refuses the key for another request (422) and while the first is in flight (409)', async () => {
    const key = `k2-${Date.now()}`;
    await call('POST', '/v1/orders', { body: order(), headers: { 'idempotency-key': key } });
    expectError(
      await call('POST', '/v1/orders', { body: order('Bob'), headers: { 'idempotency-key': key } }),
      422,
      'invalid_request_error',
      'idempotency_key_reused',
    );

    stack.signal('commerce', 'SIGSTOP');
    try {
      const key3 = `k3-${Date.now()}`;
      const pending = call('POST', '/v1/orders', { body: order(), headers: { 'idempotency-key': key3 } });
      await new Promise((r) => setTimeout(r, 300));
      expectError(
        await call('POST', '/v1/orders', { body: order(), headers: { 'idempotency-key': key3 } }),
        409,
        'invalid_request_error',
        'idempotency_key_in_use',
      );
      stack.signal('commerce', 'SIGCONT');
      expect((await pending).status).toBe(200);
    } finally {
      stack.signal('commerce', 'SIGCONT');
    }
  });

  it('holds PATCH, the other form of an update, to its key as it holds POST', async () => {
    const product = await call('POST', '/v1/products', {
      body: { name: 'Tea', price: 450, currency: 'EUR' },
    });
    const path = `/v1/products/${product.json.id}`;
    const key = `patch-${Date.now()}`;
    const first = await call('PATCH', path, { body: { price: 500 }, headers: { 'idempotency-key': key } });
    expect(first.status, first.text).toBe(200);
    // Another write in between: a retry of the first must not write its price over it again.
    expect((await call('POST', path, { body: { price: 600 } })).status).toBe(200);
    const retry = await call('PATCH', path, { body: { price: 500 }, headers: { 'idempotency-key': key } });
    expect(retry.status, retry.text).toBe(200);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retry.text).toBe(first.text);
    expect((await call('GET', path)).json.price).toBe(600);
    expectError(
      await call('PATCH', path, { body: { price: 700 }, headers: { 'idempotency-key': key } }),
      422,
      'invalid_request_error',
      'idempotency_key_reused',
    );
    expectError(
      await call('PATCH', path, { body: { price: 700 }, headers: { 'idempotency-key': 'x'.repeat(256) } }),
      400,
      'invalid_request_error',
      'invalid_idempotency_key',
    );
    expect((await call('GET', path)).json.price).toBe(600);
  });

  it('checks the key length and does not store failed validation', async () => {
    expectError(
      await call('POST', '/v1/orders', { body: order(), headers: { 'idempotency-key': 'x'.repeat(256) } }),
      400,
      'invalid_request_error',
      'invalid_idempotency_key',
    );
    const key = `k4-${Date.now()}`;
    const bad = await call('POST', '/v1/orders', {
      body: { ...order(), currency: 'euro' },
      headers: { 'idempotency-key': key },
    });
    expect(bad.status).toBe(400);
    const good = await call('POST', '/v1/orders', { body: order(), headers: { 'idempotency-key': key } });
    expect(good.status).toBe(200);
    expect(good.headers.get('idempotent-replayed')).toBeNull();
  });

  it('creates one order when the gateway dies after the service committed', async () => {
    const before = (await call('GET', '/v1/orders?limit=100')).json.data.length;
    stack.env.MCS_FAILPOINT = 'gateway.after_call';
    await stack.kill('gateway');
    await stack.restart('gateway');
    agent = new Agent();
    const key = `crash-${Date.now()}`;
    await expect(
      call('POST', '/v1/orders', { body: order('Crash'), headers: { 'idempotency-key': key } }),
    ).rejects.toThrow();
    delete stack.env.MCS_FAILPOINT;
    await stack.kill('gateway');
    await stack.restart('gateway');
    agent = new Agent();
    // The service stored the answer with the order: the retry is answered from it at once.
    const retry = await call('POST', '/v1/orders', {
      body: order('Crash'),
      headers: { 'idempotency-key': key },
    });
    expect(retry.status, retry.text).toBe(200);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    const after = (await call('GET', '/v1/orders?limit=100')).json.data;
    expect(after.length).toBe(before + 1);
    expect(after.filter((o: any) => o.customer.name === 'Crash').map((o: any) => o.id)).toEqual([
      retry.json.id,
    ]);
    const replay = await call('POST', '/v1/orders', {
      body: order('Crash'),
      headers: { 'idempotency-key': key },
    });
    expect(replay.text).toBe(retry.text);
  });
});

describe('rate limits', () => {
  it('answers 429 with Retry-After over the plan, succeeds after waiting, and keeps the idempotency key free', async () => {
    const limited = JSON.parse(
      await stack.cli(['accounts', 'create', '--email', 'slow@example.com', '--rate-limit', '2']),
    );
    const key = limited.secret_key as string;
    const results = [];
    for (let i = 0; i < 4; i++) results.push(await call('GET', '/v1/orders', { key }));
    const refused = results.find((r) => r.status === 429);
    expect(refused).toBeDefined();
    expectError(refused!, 429, 'rate_limit_error', 'rate_limited');
    const wait = Number(refused!.headers.get('retry-after'));
    expect(Number.isInteger(wait) && wait >= 1).toBe(true);

    const idem = await call('POST', '/v1/orders', {
      key,
      body: order(),
      headers: { 'idempotency-key': 'rl' },
    });
    expect(idem.status).toBe(429);
    await new Promise((r) => setTimeout(r, wait * 1_000));
    const ok = await call('POST', '/v1/orders', { key, body: order(), headers: { 'idempotency-key': 'rl' } });
    expect(ok.status).toBe(200);
    expect(ok.headers.get('idempotent-replayed')).toBeNull();
  });

  it("gives publishable keys a bucket of their own: a public page's traffic never throttles the server", async () => {
    const limited = JSON.parse(
      await stack.cli(['accounts', 'create', '--email', 'shop@example.com', '--rate-limit', '2']),
    );
    const results = [];
    for (let i = 0; i < 5; i++)
      results.push(await call('GET', '/v1/products', { key: limited.publishable_key as string }));
    expect(results.some((r) => r.status === 429)).toBe(true);
    // Right after the publishable key was refused, the secret key's bucket is still full.
    expect((await call('GET', '/v1/orders', { key: limited.secret_key as string })).status).toBe(200);
    expect((await call('GET', '/v1/orders', { key: limited.secret_key as string })).status).toBe(200);
  });
});
