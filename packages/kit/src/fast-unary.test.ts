// The short path for binary Connect unary calls over HTTP/2 and HTTP/1.1 (kit/fast-unary) answers
// exactly as connectNodeAdapter does: same messages, headers, trailers, error codes, messages and
// metadata, same signal on a client that gives up. Each case runs through the short path (Connect
// binary over HTTP/2, and over HTTP/1.1 keep-alive as the gateway calls) and through the adapter
// (Connect JSON over HTTP/2), and the handler tells which path ran it from the reason its context
// was aborted with at the end.
import http from 'node:http';
import { create } from '@bufbuild/protobuf';
import { Code, ConnectError, type ConnectRouter, createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { commerce } from '@mcs/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ServerHandle, startConnectServer } from './server.ts';

const ORDER = create(commerce.CreateOrderRequestSchema, {
  customer: { name: 'Ada', phone: '+15550001111' },
  currency: 'usd',
  items: [{ name: 'Tea', unitAmount: 350n, quantity: 2n }],
});

/** The reason each call's context was aborted with once it ended, by the call's `x-case` header. */
const endReasons = new Map<string, unknown>();
const aborted = new Map<string, Promise<unknown>>();

function routes(router: ConnectRouter) {
  router.service(commerce.OrderService, {
    async createOrder(req, ctx) {
      const id = ctx.requestHeader.get('x-case') ?? '';
      ctx.signal.addEventListener('abort', () => endReasons.set(id, ctx.signal.reason), { once: true });
      aborted.set(id, new Promise((r) => ctx.signal.addEventListener('abort', () => r(ctx.signal.reason))));
      ctx.responseHeader.set('x-echo', ctx.requestHeader.get('mcs-account') ?? '');
      ctx.responseTrailer.set('x-trailer', 'bye');
      switch (req.customer?.name) {
        case 'refuse':
          throw new ConnectError('no such thing', Code.NotFound, { 'x-why': 'gone' });
        case 'crash':
          throw new Error('a bug, not for the client');
        case 'hang':
          await new Promise((r) => setTimeout(r, 5_000));
          return {};
        default:
          return { id: 'ord_1', customer: req.customer, total: 700n, currency: req.currency };
      }
    },
  });
}

let server: ServerHandle;
let agent: http.Agent;
const clients: Record<string, ReturnType<typeof createClient<typeof commerce.OrderService>>> = {};
beforeAll(async () => {
  server = await startConnectServer({ routes, port: 0 });
  const baseUrl = `http://127.0.0.1:${server.port}`;
  agent = new http.Agent({ keepAlive: true });
  clients.fast = createClient(
    commerce.OrderService,
    createConnectTransport({ baseUrl, httpVersion: '2', useBinaryFormat: true }),
  );
  clients.fast1 = createClient(
    commerce.OrderService,
    createConnectTransport({ baseUrl, httpVersion: '1.1', useBinaryFormat: true, nodeOptions: { agent } }),
  );
  clients.adapter = createClient(
    commerce.OrderService,
    createConnectTransport({ baseUrl, httpVersion: '2', useBinaryFormat: false }),
  );
});
afterAll(async () => {
  agent.destroy();
  await server.close();
});

/** Calls through one path; returns what the client saw. */
async function call(
  path: 'fast' | 'fast1' | 'adapter',
  name: string,
  opts: { signal?: AbortSignal; timeoutMs?: number } = {},
) {
  const id = `${path}-${name}-${Math.random()}`;
  const header: Record<string, string> = {};
  const trailer: Record<string, string> = {};
  try {
    const order = await clients[path]!.createOrder(
      create(commerce.CreateOrderRequestSchema, {
        currency: ORDER.currency,
        items: ORDER.items,
        customer: { name, phone: '+15550001111' },
      }),
      {
        headers: { 'mcs-account': 'acct_9', 'x-case': id },
        onHeader: (h) => Object.assign(header, Object.fromEntries(h)),
        onTrailer: (t) => Object.assign(trailer, Object.fromEntries(t)),
        ...opts,
      },
    );
    return { id, order, header, trailer };
  } catch (err) {
    const e = ConnectError.from(err);
    return {
      id,
      error: { code: e.code, message: e.rawMessage, why: e.metadata.get('x-why') },
      header,
      trailer,
    };
  }
}

describe.each(['fast', 'fast1'] as const)(
  'binary Connect unary (%s: HTTP/2, HTTP/1.1) takes the short path and answers as the adapter does',
  (fast) => {
    it('runs on the short path (its own end reason), the adapter on its (a DOMException)', async () => {
      const short = await call(fast, 'ok');
      const slow = await call('adapter', 'ok');
      expect((endReasons.get(short.id) as Error).message).toContain('the call finished');
      expect(endReasons.get(slow.id)).toBeInstanceOf(DOMException);
    });

    it('a success: same message, header and trailer', async () => {
      const [a, b] = [await call(fast, 'ok'), await call('adapter', 'ok')];
      expect(a.order).toEqual(b.order);
      expect(a.order).toMatchObject({ id: 'ord_1', total: 700n, currency: 'usd' });
      expect(a.header['x-echo']).toBe('acct_9');
      expect(a.trailer['x-trailer']).toBe('bye');
      expect(b.trailer['x-trailer']).toBe('bye');
    });

    it('a ConnectError: same code, message and metadata', async () => {
      const [a, b] = [await call(fast, 'refuse'), await call('adapter', 'refuse')];
      expect(a.error).toEqual({ code: Code.NotFound, message: 'no such thing', why: 'gone' });
      expect(a.error).toEqual(b.error);
    });

    it('any other error: internal, its message hidden', async () => {
      const [a, b] = [await call(fast, 'crash'), await call('adapter', 'crash')];
      expect(a.error).toMatchObject({ code: Code.Internal, message: 'internal error' });
      expect(a.error).toEqual(b.error);
    });

    it('a client that gives up: the implementation is told through its signal', async () => {
      const ac = new AbortController();
      setTimeout(() => ac.abort(), 100);
      const a = await call(fast, 'hang', { signal: ac.signal });
      expect(a.error?.code).toBe(Code.Canceled);
      await expect(aborted.get(a.id)).resolves.toBeDefined();
    });

    it('a deadline: DeadlineExceeded', async () => {
      const a = await call(fast, 'hang', { timeoutMs: 100 });
      expect(a.error?.code).toBe(Code.DeadlineExceeded);
    });
  },
);
