// The gateway's in-process hop (kit/in-process, one-process mode) against the same server's port:
// every case is called over HTTP/1.1 in binary, as the gateway calls a service in a process of its
// own (that takes kit/fast-unary's short path), and through createInProcessTransport(server), and
// the caller must not be able to tell them apart — message, headers and trailers the handler set,
// error code, message, details, metadata and whether it came from the service (`isWireError`,
// which the gateway's circuit and error rendering read), the masking of unexpected errors, the
// errorLogger's database-unavailable answer, deadlines, cancellation and unknown methods.
import http from 'node:http';
import { create, type DescMethodUnary, toJsonString } from '@bufbuild/protobuf';
import { FloatValueSchema, Int64ValueSchema, StructSchema } from '@bufbuild/protobuf/wkt';
import { Code, ConnectError, type ConnectRouter, createClient, type Transport } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { apiError, renderConnectError } from '@mcs/errors';
import { api, commerce, grpcHealth } from '@mcs/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { changedByWire, createInProcessTransport } from './in-process.ts';
import { createLogger } from './log.ts';
import { errorLogger, type ServerHandle, startConnectServer } from './server.ts';

/** What each call's handler saw, by the call's `x-case` header. */
interface Seen {
  /** Resolves with the reason once the handler's context signal is aborted. */
  aborted: Promise<unknown>;
  /** The request headers the caller set, as the handler read them. */
  account: string | null;
  timeoutMs: number | undefined;
}
const seen = new Map<string, Seen>();

function routes(router: ConnectRouter) {
  router.service(commerce.OrderService, {
    async createOrder(req, ctx) {
      const id = ctx.requestHeader.get('x-case') ?? '';
      seen.set(id, {
        aborted: new Promise((r) => ctx.signal.addEventListener('abort', () => r(ctx.signal.reason))),
        account: ctx.requestHeader.get('mcs-account'),
        timeoutMs: ctx.timeoutMs(),
      });
      ctx.responseHeader.set('x-echo', `${ctx.requestHeader.get('mcs-account')}/${id}`);
      ctx.responseHeader.append('x-multi', 'a');
      ctx.responseHeader.append('x-multi', 'b');
      ctx.responseTrailer.set('x-trailer', 'bye');
      switch (req.customer?.name) {
        case 'refuse': {
          const e = apiError('resource_missing', { message: 'No such order: ord_x.', param: 'id' });
          e.metadata.set('x-why', 'gone');
          throw e;
        }
        case 'limit': {
          const e = apiError('rate_limited');
          e.metadata.set('retry-after', '7');
          throw e;
        }
        case 'conflict':
          // A bare code: Aborted from the service is an api_error, from the client a broken hop.
          throw new ConnectError('could not serialize access', Code.Aborted);
        case 'relayed': {
          // An error read from another call and thrown on: its metadata is not sent again.
          const e = new ConnectError('from upstream', Code.FailedPrecondition, { 'x-upstream': 'yes' });
          e.isWireError = true;
          throw e;
        }
        case 'crash':
          throw new Error('a bug: select * from secrets');
        case 'db-down':
          throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
        case 'hang':
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, 5_000);
            ctx.signal.addEventListener('abort', () => {
              clearTimeout(timer);
              resolve();
            });
          });
          return {};
        default:
          return {
            id: 'ord_1',
            status: commerce.OrderStatus.PENDING,
            customer: req.customer,
            currency: req.currency,
            total: req.items.reduce((sum, i) => sum + (i.unitAmount ?? 0n) * i.quantity, 0n),
            items: req.items.map((i) => ({
              product: i.product,
              name: i.name ?? '',
              unitAmount: i.unitAmount ?? 0n,
              quantity: i.quantity,
              amount: (i.unitAmount ?? 0n) * i.quantity,
            })),
            createdAt: { seconds: 1_700_000_000n, nanos: 5 },
          };
      }
    },
    // getOrder, listOrders, … are not implemented: Connect answers Unimplemented for them.
  });
}

let server: ServerHandle;
let agent: http.Agent;
let wire: Transport;
let local: Transport;
beforeAll(async () => {
  server = await startConnectServer({
    routes,
    port: 0,
    interceptors: [errorLogger(createLogger('in-process-test', 'silent'))],
  });
  const baseUrl = `http://127.0.0.1:${server.port}`;
  agent = new http.Agent({ keepAlive: true });
  wire = createConnectTransport({
    baseUrl,
    httpVersion: '1.1',
    useBinaryFormat: true,
    nodeOptions: { agent },
  });
  // Streaming calls are not this transport's: they go over the port.
  local = createInProcessTransport(server, wire);
});
afterAll(async () => {
  agent.destroy();
  await server.close();
});

const order = (name: string, product?: string) =>
  create(commerce.CreateOrderRequestSchema, {
    customer: { name, phone: '+15550001111' },
    currency: 'usd',
    items: [
      { name: 'Tea', unitAmount: 350n, quantity: 2n },
      { product: product ?? 'prod_1', quantity: 1n, unitAmount: 100n },
    ],
  });

/** Headers a transport or HTTP itself adds; the rest were set by the handler or its error. */
const PROTOCOL = new Set(['content-type', 'content-length', 'date', 'connection', 'keep-alive']);
const own = (h: Headers) => [...h].filter(([name]) => !PROTOCOL.has(name));

/** Calls `createOrder` through `transport`; returns everything its caller can see. */
async function call(
  transport: Transport,
  name: string,
  opts: { signal?: AbortSignal; timeoutMs?: number } = {},
) {
  const id = `${encodeURIComponent(name.toWellFormed())}-${Math.random()}`;
  let header: Headers | undefined;
  let trailer: Headers | undefined;
  const started = performance.now();
  try {
    const message = await createClient(commerce.OrderService, transport).createOrder(order(name), {
      headers: { 'mcs-account': 'acct_1', 'x-case': id },
      onHeader: (h) => {
        header = h;
      },
      onTrailer: (t) => {
        trailer = t;
      },
      ...opts,
    });
    return {
      id,
      ms: performance.now() - started,
      message,
      json: toJsonString(commerce.OrderSchema, message),
      header: own(header ?? new Headers()),
      trailer: own(trailer ?? new Headers()),
    };
  } catch (err) {
    const e = ConnectError.from(err);
    return {
      id,
      ms: performance.now() - started,
      error: {
        code: e.code,
        rawMessage: e.rawMessage,
        details: e.findDetails(api.ErrorDetailSchema),
        metadata: own(e.metadata),
        isWireError: e.isWireError,
        rendered: renderConnectError(e, 'http://docs'),
      },
    };
  }
}

/** The same case both ways; what the caller sees must be the same. */
async function both(name: string) {
  const a = await call(wire, name);
  const b = await call(local, name);
  // Each call's own id is echoed: compare the rest.
  const strip = (r: typeof a) =>
    JSON.parse(
      JSON.stringify({ ...r, id: '', ms: 0 }, (_, v) => (typeof v === 'bigint' ? `${v}n` : v)).replaceAll(
        r.id,
        'ID',
      ),
    );
  return { a, b, same: () => expect(strip(b)).toEqual(strip(a)) };
}

describe('the in-process hop answers as the service port does', () => {
  it('a success: the same message, and the headers and trailers the handler set', async () => {
    const { a, b, same } = await both('ok');
    same();
    expect(b.message).toEqual(a.message);
    expect(b.json).toBe(a.json);
    expect(b.message).toMatchObject({
      id: 'ord_1',
      total: 800n,
      currency: 'usd',
      customer: { name: 'ok', phone: '+15550001111' },
      items: [
        { name: 'Tea', amount: 700n },
        { product: 'prod_1', amount: 100n },
      ],
    });
    expect(b.header).toEqual([
      ['x-echo', `acct_1/${b.id}`],
      ['x-multi', 'a, b'],
    ]);
    expect(b.trailer).toEqual([['x-trailer', 'bye']]);
    // The handler saw the caller's headers and no deadline.
    expect(seen.get(b.id)).toMatchObject({ account: 'acct_1', timeoutMs: undefined });
  });

  it('a string the wire would repair (a lone surrogate): the handler gets what it gets over the port', async () => {
    // Binary encoding writes UTF-8, so an ill-formed string arrives as U+FFFD over the port; handed
    // over as is, PostgreSQL refused it (jsonb: "Unicode low surrogate must follow a high surrogate").
    const { b, same } = await both('A\ud800B');
    same();
    expect(b.message?.customer?.name).toBe('A\ufffdB');
  });

  it('a catalog error: the same code, message, detail, metadata and rendered envelope', async () => {
    const { a, b, same } = await both('refuse');
    same();
    expect(b.error).toMatchObject({
      code: Code.NotFound,
      rawMessage: 'No such order: ord_x.',
      isWireError: true,
      rendered: { status: 404, body: { error: { code: 'resource_missing', param: 'id' } } },
    });
    expect(b.error?.details).toHaveLength(1);
    expect(b.error?.details[0]).toMatchObject({ type: 'not_found_error', code: 'resource_missing' });
    // Headers and trailers the handler set before it threw, and the error's own metadata.
    expect(new Map(b.error?.metadata)).toEqual(
      new Map([
        ['x-echo', `acct_1/${b.id}`],
        ['x-multi', 'a, b'],
        ['x-trailer', 'bye'],
        ['x-why', 'gone'],
      ]),
    );
    expect(a.error?.details[0]?.code).toBe('resource_missing');
  });

  it('a rate limit: Retry-After survives as metadata', async () => {
    const { b, same } = await both('limit');
    same();
    expect(new Map(b.error?.metadata).get('retry-after')).toBe('7');
    expect(b.error?.rendered.body.error.code).toBe('rate_limited');
  });

  it("a service's Aborted is its answer (api_error), not a broken hop", async () => {
    const { b, same } = await both('conflict');
    same();
    expect(b.error).toMatchObject({ code: Code.Aborted, isWireError: true, rendered: { status: 500 } });
  });

  it('an error relayed from another call: its metadata is not passed on', async () => {
    const { b, same } = await both('relayed');
    same();
    expect(b.error?.code).toBe(Code.FailedPrecondition);
    expect(new Map(b.error?.metadata).has('x-upstream')).toBe(false);
  });

  it('an unexpected exception: internal, the same masked message', async () => {
    const { b, same } = await both('crash');
    same();
    expect(b.error).toMatchObject({ code: Code.Internal, rawMessage: 'internal error', details: [] });
    expect(JSON.stringify(b)).not.toContain('secrets');
  });

  it("a database that cannot be reached: errorLogger's 503 with mcs-unavailable: database", async () => {
    const { b, same } = await both('db-down');
    same();
    expect(b.error).toMatchObject({
      code: Code.Unavailable,
      isWireError: true,
      rendered: { status: 503, body: { error: { code: 'service_unavailable' } } },
    });
    expect(new Map(b.error?.metadata).get('mcs-unavailable')).toBe('database');
  });

  it('many calls at once: each gets its own answer and headers', async () => {
    const all = await Promise.all(Array.from({ length: 100 }, () => call(local, 'ok')));
    for (const r of all) expect(r.header).toContainEqual(['x-echo', `acct_1/${r.id}`]);
  });

  it('grpc.health.v1 (the gateway circuit probe) is served in process too', async () => {
    const ask = (t: Transport) =>
      createClient(grpcHealth.Health, t).check({ service: '' }, { timeoutMs: 1_000 });
    const [a, b] = await Promise.all([ask(wire), ask(local)]);
    expect(b).toEqual(a);
    expect(b.status).toBe(grpcHealth.HealthCheckResponse_ServingStatus.SERVING);
  });
});

describe.each(['wire', 'local'] as const)('time and cancellation (%s)', (which) => {
  const transport = () => (which === 'wire' ? wire : local);

  it('a handler slower than timeoutMs: DeadlineExceeded on time, and its signal is aborted', async () => {
    const r = await call(transport(), 'hang', { timeoutMs: 150 });
    expect(r.error?.code).toBe(Code.DeadlineExceeded);
    expect(r.ms).toBeGreaterThanOrEqual(140);
    expect(r.ms).toBeLessThan(1_500);
    expect(seen.get(r.id)?.timeoutMs).toBeGreaterThan(0);
    expect(seen.get(r.id)?.timeoutMs).toBeLessThanOrEqual(150);
    await expect(within(seen.get(r.id)!.aborted, 1_000)).resolves.toBeDefined();
  });

  it('a caller that gives up: Canceled at once, and the handler is told through its signal', async () => {
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 100);
    const r = await call(transport(), 'hang', { signal: ac.signal });
    expect(r.error?.code).toBe(Code.Canceled);
    expect(r.ms).toBeLessThan(1_500);
    await expect(within(seen.get(r.id)!.aborted, 1_000)).resolves.toBeDefined();
  });

  it('a caller that gave up before: Canceled, and the handler never runs', async () => {
    const r = await call(transport(), 'ok', { signal: AbortSignal.abort() });
    expect(r.error?.code).toBe(Code.Canceled);
    expect(seen.has(r.id)).toBe(false);
  });

  it('a call that ends: its handler signal is aborted afterwards (the call is over)', async () => {
    const r = await call(transport(), 'ok', { timeoutMs: 5_000 });
    expect(r.error).toBeUndefined();
    await expect(within(seen.get(r.id)!.aborted, 1_000)).resolves.toBeDefined();
  });
});

describe('methods the server does not serve', () => {
  /** An unary method by service and name, called through `transport` with no deadline. */
  const unknown = async (transport: Transport, method: DescMethodUnary) => {
    const started = performance.now();
    try {
      await transport.unary(method, undefined, undefined, undefined, create(method.input), undefined);
      return { ok: true };
    } catch (err) {
      const e = ConnectError.from(err);
      return { code: e.code, ms: performance.now() - started };
    }
  };

  it('a service not registered here: Unimplemented, as over the port, and at once', async () => {
    const method = commerce.ProductService.method.getProduct as DescMethodUnary;
    const [a, b] = [await unknown(wire, method), await unknown(local, method)];
    expect(a).toMatchObject({ code: Code.Unimplemented });
    expect(b).toMatchObject({ code: a.code });
    expect((b as { ms: number }).ms).toBeLessThan(500);
  });

  it('a method of a registered service without an implementation: the same Unimplemented', async () => {
    const method = commerce.OrderService.method.getOrder as DescMethodUnary;
    const [a, b] = [await unknown(wire, method), await unknown(local, method)];
    expect(a).toMatchObject({ code: Code.Unimplemented });
    expect(b).toMatchObject({ code: a.code });
  });
});

describe('changedByWire: requests the hop encodes and decodes, as a port would deliver them', () => {
  it('not a request as the gateway builds it (no copy on the common path)', () => {
    expect(changedByWire(commerce.CreateOrderRequestSchema, order('Ada'))).toBe(false);
    expect(changedByWire(commerce.CreateOrderRequestSchema, create(commerce.CreateOrderRequestSchema))).toBe(
      false,
    );
  });

  it('a lone surrogate anywhere: a field, a list item, a map key, a oneof', () => {
    const bad = order('Ada');
    bad.items[1]!.name = 'T\udfffea';
    expect(changedByWire(commerce.CreateOrderRequestSchema, bad)).toBe(true);
    const struct = (fields: object) => create(StructSchema, { fields: fields as never });
    expect(
      changedByWire(StructSchema, struct({ ok: { kind: { case: 'stringValue', value: 'fine' } } })),
    ).toBe(false);
    expect(
      changedByWire(StructSchema, struct({ '\ud800': { kind: { case: 'boolValue', value: true } } })),
    ).toBe(true);
    expect(
      changedByWire(StructSchema, struct({ ok: { kind: { case: 'stringValue', value: '\ud800' } } })),
    ).toBe(true);
  });

  it('a float that 32 bits cannot hold, a 64-bit integer given as a number', () => {
    expect(changedByWire(FloatValueSchema, create(FloatValueSchema, { value: 0.5 }))).toBe(false);
    expect(changedByWire(FloatValueSchema, create(FloatValueSchema, { value: 0.1 }))).toBe(true);
    expect(changedByWire(Int64ValueSchema, create(Int64ValueSchema, { value: 5n }))).toBe(false);
    expect(changedByWire(Int64ValueSchema, create(Int64ValueSchema, { value: 5 as never }))).toBe(true);
  });
});

/** Resolves as `p` does, or rejects after `ms`. */
function within<T>(p: Promise<T>, ms: number): Promise<T> {
  return Promise.race([
    p,
    new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`not within ${ms} ms`)), ms).unref()),
  ]);
}
