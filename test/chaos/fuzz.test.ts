// Chaos: generated requests to every route of the OpenAPI document (fast-check) — 10,000 per
// route in `pnpm test:chaos`, 25 in `pnpm test` (test/e2e/conformance.test.ts fuzzes every route
// too, sequentially, with shrinking) — sent 8 at a time (32 in the full run: with undici's
// request instead of fetch, about 1,000 a second here, so the 450,000 take minutes, not half an
// hour). Path ids are real ones of the account
// or garbage, query strings and bodies near the route's own schema or anything at all, keys and
// content types sometimes wrong. No answer may be a 5xx, and every error is the envelope.
import { type AccountKeys, type Stack, startStack } from '@mcs/testkit';
import fc from 'fast-check';
import { Agent, type Dispatcher, fetch, request } from 'undici';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { pick } from './lib.ts';

// CHAOS_FUZZ_PER_ROUTE overrides the count (a quicker look at the full run), CHAOS_FUZZ_PARALLEL
// how many are in flight.
const PER_ROUTE = Number(process.env.CHAOS_FUZZ_PER_ROUTE) || pick(25, 10_000);
const PARALLEL = Number(process.env.CHAOS_FUZZ_PARALLEL) || pick(8, 32);

let stack: Stack;
let keys: AccountKeys;
const agent = new Agent({ connections: PARALLEL });
let routes: Array<{ method: string; path: string; op: any }> = [];
const ids: Record<string, string> = {};

beforeAll(async () => {
  stack = await startStack({ env: { LOG_LEVEL: 'error' } });
  keys = JSON.parse(
    await stack.cli([
      'accounts',
      'create',
      '--email',
      `fuzz-${Date.now()}@example.com`,
      '--rate-limit',
      '100000',
    ]),
  );
  const doc = (await (await fetch(`${stack.baseUrl}/v1/openapi.json`, { dispatcher: agent })).json()) as any;
  routes = Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([path, ops]) =>
    Object.entries(ops).map(([method, op]) => ({ method: method.toUpperCase(), path, op })),
  );
  // Real ids, so generated requests also reach the code behind a found resource.
  const make = async (path: string, body: unknown) =>
    (await stack.api(keys.secret_key, 'POST', path, body)).json?.id as string | undefined;
  ids.product = (await make('/v1/products', { name: 'Tea', price: 450, currency: 'EUR' })) ?? '';
  ids.order =
    (await make('/v1/orders', {
      customer: { name: 'Ada', phone: '+4915112345678' },
      currency: 'EUR',
      items: [{ product: ids.product, quantity: 1 }],
    })) ?? '';
  ids.payment = (await make('/v1/payments', { order: ids.order })) ?? '';
  ids.conversation =
    (await make('/v1/conversations', { customer: { name: 'Ada', phone: '+4915112345678' } })) ?? '';
  ids.webhook = (await make('/v1/webhooks', { url: 'https://93.184.215.14/hooks', events: ['*'] })) ?? '';
}, 180_000);

afterAll(async () => {
  await stack?.stop();
  await agent.close();
});

const json = fc.jsonValue({ maxDepth: 3 });
const strings = fc.oneof(
  fc.string(),
  fc.string({ unit: 'grapheme' }),
  fc.string({ unit: 'binary' }),
  fc.constantFrom(
    '',
    ' ',
    '\u0000',
    '💥',
    'null',
    '-1',
    '1e309',
    '%',
    '../',
    'ord_',
    '%00',
    'a'.repeat(3000),
  ),
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

function requestFor(r: { method: string; path: string; op: any }) {
  const props = Object.keys(r.op.requestBody?.content?.['application/json']?.schema?.properties ?? {});
  const queryNames = ((r.op.parameters ?? []) as Array<{ name: string; in: string }>)
    .filter((p) => p.in === 'query')
    .map((p) => p.name);
  const names = fc.oneof(fc.constantFrom(...(props.length ? props : ['x'])), fc.string({ maxLength: 12 }));
  const body = fc.oneof(
    fc.dictionary(names, value, { maxKeys: 6 }).map((o) => JSON.stringify(o)),
    json.map((v) => JSON.stringify(v)),
    strings,
    fc.constantFrom('{', '{"a":', '[]', 'true', '"x"', '{"customer":{"name":{"$gt":""}}}'),
  );
  const id = fc.oneof(fc.constantFrom(...Object.values(ids).filter(Boolean)), strings);
  const query = fc.dictionary(
    fc.oneof(fc.constantFrom(...(queryNames.length ? queryNames : ['limit'])), fc.string({ maxLength: 8 })),
    fc.oneof(fc.string({ maxLength: 20 }), fc.integer().map(String), fc.constantFrom(...Object.values(ids))),
    { maxKeys: 3 },
  );
  return fc.record({
    params: fc.array(id, { minLength: 3, maxLength: 3 }),
    query,
    body,
    contentType: fc.oneof(
      { weight: 8, arbitrary: fc.constant('application/json') },
      { weight: 1, arbitrary: fc.constantFrom('text/plain', 'application/json; charset=latin1', '') },
    ),
    key: fc.oneof(
      { weight: 12, arbitrary: fc.constant(keys.secret_key) },
      {
        weight: 1,
        arbitrary: fc.constantFrom(keys.publishable_key, keys.live_secret_key, 'sk_test_nope', ''),
      },
    ),
    idempotency: fc.option(fc.string({ minLength: 1, maxLength: 40 }), { freq: 4 }),
  });
}

it(
  `${PER_ROUTE} generated requests per route: 0 answers 5xx, every error the envelope`,
  async () => {
    const statuses = new Map<number, number>();
    const failures: string[] = [];
    let sent = 0;
    const t0 = performance.now();
    let sampling = 0;
    for (const r of routes) {
      const ts = performance.now();
      const samples = fc.sample(requestFor(r), { numRuns: PER_ROUTE });
      sampling += performance.now() - ts;
      let next = 0;
      await Promise.all(
        Array.from({ length: PARALLEL }, async () => {
          while (next < samples.length && failures.length < 20) {
            const s = samples[next++]!;
            const values = { id: s.params[0]!, conversation: s.params[1]!, delivery: s.params[2]! };
            let path = r.path.replace(/\{(\w+)\}/g, (_, name) =>
              encodeURIComponent(values[name as 'id'] ?? `x_${name}`),
            );
            const qs = new URLSearchParams(s.query).toString();
            if (qs) path += `?${qs}`;
            const headers: Record<string, string> = {};
            if (s.key) headers.authorization = `Bearer ${s.key}`;
            if (s.contentType) headers['content-type'] = s.contentType;
            if (s.idempotency !== null && r.method === 'POST') headers['idempotency-key'] = s.idempotency;
            const withBody = r.method !== 'GET' && r.method !== 'DELETE';
            let status = 0;
            let text = '';
            try {
              // undici's request, not fetch: the client's own CPU per request is what bounds
              // the rate on a 2-core box, and fetch costs several times more of it.
              const res = await request(`${stack.baseUrl}${path}`, {
                method: r.method as Dispatcher.HttpMethod,
                headers,
                body: withBody ? s.body : undefined,
                dispatcher: agent,
                headersTimeout: 30_000,
                bodyTimeout: 30_000,
              });
              status = res.statusCode;
              text = await res.body.text();
            } catch (err) {
              failures.push(`${r.method} ${path}: no answer (${(err as Error).message})`);
              continue;
            }
            sent++;
            statuses.set(status, (statuses.get(status) ?? 0) + 1);
            let envelope = status < 300;
            if (!envelope) {
              try {
                const e = JSON.parse(text).error;
                envelope =
                  typeof e?.type === 'string' &&
                  typeof e?.code === 'string' &&
                  typeof e?.message === 'string';
              } catch {}
            }
            if (status >= 500 || !envelope)
              failures.push(
                `${r.method} ${path} ${withBody ? s.body.slice(0, 200) : ''} → ${status} ${text.slice(0, 300)}`,
              );
          }
        }),
      );
    }
    const fivexx = [...statuses.entries()].filter(([s]) => s >= 500).reduce((n, [, c]) => n + c, 0);
    console.info(
      `[chaos] generated requests: sent=${sent} over ${routes.length} routes (${PER_ROUTE} each) in ${((performance.now() - t0) / 1000).toFixed(0)} s (generating them ${(sampling / 1000).toFixed(1)} s); ` +
        `5xx=${fivexx}; statuses ${JSON.stringify(Object.fromEntries([...statuses.entries()].sort((a, b) => a[0] - b[0])))}`,
    );
    expect(failures).toEqual([]);
    expect(sent).toBe(routes.length * PER_ROUTE);
  },
  pick(300_000, 3_600_000),
);
