// The gateway's lean unary transport (transport.ts) against a real service port: each case is
// called through it and through connect-node's HTTP/2 transport, and both must see the same
// thing — message, headers, trailers, error codes, messages, metadata and error details (the
// gateway renders the spec's errors from those details). A service that is down or dies
// mid-call is `unavailable` at once, never a hang.

import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import http2 from 'node:http2';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { create } from '@bufbuild/protobuf';
import { Code, ConnectError, type ConnectRouter, createClient, type Transport } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { apiError, renderConnectError } from '@mcs/errors';
import { type ServerHandle, startConnectServer } from '@mcs/kit/server';
import { commerce } from '@mcs/proto';
import { canSilenceLinks, type SilentLink, silentLink } from '@mcs/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createUnaryTransport } from './transport.ts';

const seenAbort: Promise<unknown>[] = [];

function routes(router: ConnectRouter) {
  router.service(commerce.OrderService, {
    async createOrder(req, ctx) {
      seenAbort.push(new Promise((r) => ctx.signal.addEventListener('abort', () => r(ctx.signal.reason))));
      ctx.responseHeader.set('mcs-idempotent-replayed', 'true');
      ctx.responseTrailer.set('x-trailer', 'bye');
      switch (req.customer?.name) {
        case 'refuse':
          throw apiError('resource_missing', { message: 'No such order: ord_x.' });
        case 'limit': {
          const e = apiError('rate_limited');
          e.metadata.set('retry-after', '7');
          throw e;
        }
        case 'crash':
          throw new Error('a bug');
        case 'hang':
          await new Promise((r) => setTimeout(r, 3_000));
          return {};
        default:
          return { id: 'ord_1', customer: req.customer, total: 700n, currency: req.currency };
      }
    },
  });
}

let server: ServerHandle;
let baseUrl: string;
beforeAll(async () => {
  server = await startConnectServer({ routes, port: 0 });
  baseUrl = `http://127.0.0.1:${server.port}`;
});
afterAll(() => server.close());

const order = (name: string) =>
  create(commerce.CreateOrderRequestSchema, {
    customer: { name, phone: '+15550001111' },
    currency: 'usd',
    items: [{ name: 'Tea', unitAmount: 350n, quantity: 2n }],
  });

async function call(
  transport: Transport,
  name: string,
  opts: { signal?: AbortSignal; timeoutMs?: number } = {},
) {
  const client = createClient(commerce.OrderService, transport);
  let header: Record<string, string> = {};
  let trailer: Record<string, string> = {};
  const started = performance.now();
  try {
    const message = await client.createOrder(order(name), {
      headers: { 'mcs-account': 'acct_1' },
      onHeader: (h) => {
        header = Object.fromEntries(h);
      },
      onTrailer: (t) => {
        trailer = Object.fromEntries(t);
      },
      ...opts,
    });
    return { message, header: header['mcs-idempotent-replayed'], trailer: trailer['x-trailer'] };
  } catch (err) {
    const e = ConnectError.from(err);
    return {
      code: e.code,
      message: e.rawMessage,
      retryAfter: e.metadata.get('retry-after'),
      rendered: renderConnectError(e, 'http://docs').body.error,
      ms: performance.now() - started,
    };
  }
}

describe.each(['1.1', '2'] as const)('the lean unary transport over HTTP/%s', (httpVersion) => {
  const lean = () =>
    createUnaryTransport(baseUrl, createConnectTransport({ baseUrl, httpVersion: '2' }), { httpVersion });
  const stock = () => createConnectTransport({ baseUrl, httpVersion: '2', useBinaryFormat: true });

  it('a success: the same message, header and trailer as connect-node', async () => {
    const [a, b] = [await call(lean(), 'ok'), await call(stock(), 'ok')];
    expect(a).toEqual(b);
    expect(a).toMatchObject({ message: { id: 'ord_1', total: 700n }, header: 'true', trailer: 'bye' });
  });

  for (const name of ['refuse', 'limit', 'crash']) {
    it(`an error (${name}): the same code, message, metadata and rendered API error`, async () => {
      const a = await call(lean(), name);
      const b = await call(stock(), name);
      expect({ ...a, ms: 0 }).toEqual({ ...b, ms: 0 });
      if (name === 'refuse')
        expect(a).toMatchObject({ code: Code.NotFound, rendered: { code: 'resource_missing' } });
      if (name === 'limit') expect(a).toMatchObject({ retryAfter: '7', rendered: { code: 'rate_limited' } });
      if (name === 'crash') expect(a).toMatchObject({ code: Code.Internal, rendered: { type: 'api_error' } });
    });
  }

  it('many calls at once all come back', async () => {
    const t = lean();
    const all = await Promise.all(Array.from({ length: 200 }, () => call(t, 'ok')));
    expect(all.every((r) => 'message' in r && (r.message as commerce.Order).id === 'ord_1')).toBe(true);
  });

  it('a deadline: DeadlineExceeded, and the service is told', async () => {
    const before = seenAbort.length;
    const a = await call(lean(), 'hang', { timeoutMs: 150 });
    expect(a).toMatchObject({ code: Code.DeadlineExceeded });
    await expect(seenAbort[before]).resolves.toBeDefined();
  });

  it('a caller that gives up: Canceled', async () => {
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 100);
    expect(await call(lean(), 'hang', { signal: ac.signal })).toMatchObject({ code: Code.Canceled });
  });

  it('a service that is down: unavailable (503) at once, and again on the next call', async () => {
    const port = await closedPort();
    const url = `http://127.0.0.1:${port}`;
    const t = createUnaryTransport(url, createConnectTransport({ baseUrl: url, httpVersion: '2' }), {
      httpVersion,
    });
    for (let i = 0; i < 2; i++) {
      const a = await call(t, 'ok');
      expect(a).toMatchObject({ code: Code.Unavailable, rendered: { code: 'service_unavailable' } });
      expect((a as { ms: number }).ms).toBeLessThan(1_000);
    }
  });

  it('a service whose connection breaks mid-call: unavailable at once, and the next call reconnects', async () => {
    // A service that reads the call, then its connection drops, as when its process is killed.
    let calls = 0;
    const server =
      httpVersion === '2'
        ? http2.createServer().on('stream', (stream) => {
            calls++;
            stream.on('data', () => {});
            setTimeout(() => stream.session?.socket.destroy(), 50);
          })
        : http.createServer((req) => {
            calls++;
            req.on('data', () => {});
            setTimeout(() => req.socket.destroy(), 50);
          });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
    const t = createUnaryTransport(url, createConnectTransport({ baseUrl: url, httpVersion: '2' }), {
      httpVersion,
    });
    try {
      for (let i = 1; i <= 2; i++) {
        const a = await call(t, 'ok', { timeoutMs: 10_000 });
        expect(a).toMatchObject({ code: Code.Unavailable, rendered: { code: 'service_unavailable' } });
        expect((a as { ms: number }).ms).toBeLessThan(1_000);
        expect(calls).toBe(i);
      }
    } finally {
      await new Promise((r) => server.close(r));
    }
  });
});

describe.skipIf(!canSilenceLinks).each(['1.1', '2'] as const)(
  'connections to a service whose host vanishes without a word, HTTP/%s',
  (httpVersion) => {
    let link: SilentLink;
    beforeAll(async () => {
      link = await silentLink();
    });
    afterAll(() => link?.close());

    it('are closed within seconds, so that calls after it go over new ones', {
      timeout: 60_000,
    }, async () => {
      const route = await link.route('127.0.0.1', server.port);
      const url = `http://${route.host}:${route.port}`;
      const t = createUnaryTransport(url, createConnectTransport({ baseUrl: url, httpVersion: '2' }), {
        httpVersion,
        keepAliveMs: 1_000,
      });
      // Several connections in the pool (HTTP/1.1), one multiplexed (HTTP/2).
      const first = await Promise.all(Array.from({ length: 4 }, () => call(t, 'ok')));
      expect(first.every((r) => 'message' in r)).toBe(true);
      link.silence();
      expect(await call(t, 'ok', { timeoutMs: 300 })).toMatchObject({ code: Code.DeadlineExceeded });
      // HTTP/1.1: the idle ones' keep-alive probes go unanswered (1 s, then ten a second apart);
      // HTTP/2: the given-up call's PING goes unanswered (H2_PING_TIMEOUT_MS).
      await new Promise((r) => setTimeout(r, 13_000));
      // The host comes back, knowing nothing of those connections: a packet on one is reset.
      await link.reboot();
      await untilConnects(route.host, route.port);
      const after = await Promise.all(Array.from({ length: 4 }, () => call(t, 'ok', { timeoutMs: 3_000 })));
      expect(after).toEqual(first);
    });
  },
);

/** Resolves once a TCP connection to host:port opens (a link just restored takes a moment). */
async function untilConnects(host: string, port: number): Promise<void> {
  for (let tries = 0; ; tries++) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, host, () => {
        s.destroy();
        resolve(true);
      });
      s.on('error', () => resolve(false));
    });
    if (ok) return;
    if (tries > 40) throw new Error(`${host}:${port} did not answer`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

describe.each(['1.1', '2'] as const)(
  'the lean unary transport over a Unix domain socket, HTTP/%s',
  (httpVersion) => {
    let dir: string;
    let local: ServerHandle;
    let socketPath: string;
    /** A TCP port nothing listens on: a call that answers came over the socket. */
    let deadUrl: string;
    beforeAll(async () => {
      dir = await mkdtemp(join(tmpdir(), 'mcs-transport-'));
      socketPath = join(dir, 'commerce.sock');
      local = await startConnectServer({ routes, port: 0, socketPath });
      deadUrl = `http://127.0.0.1:${await closedPort()}`;
    });
    afterAll(async () => {
      await local.close();
      await rm(dir, { recursive: true, force: true });
    });
    const over = (path: string) =>
      createUnaryTransport(deadUrl, createConnectTransport({ baseUrl: deadUrl, httpVersion: '2' }), {
        httpVersion,
        socketPath: path,
      });

    it('a success and an error: the same as connect-node over TCP', async () => {
      const stock = createConnectTransport({ baseUrl, httpVersion: '2', useBinaryFormat: true });
      expect(await call(over(socketPath), 'ok')).toEqual(await call(stock, 'ok'));
      const [a, b] = [await call(over(socketPath), 'refuse'), await call(stock, 'refuse')];
      expect({ ...a, ms: 0 }).toEqual({ ...b, ms: 0 });
      const t = over(socketPath);
      const all = await Promise.all(Array.from({ length: 100 }, () => call(t, 'ok')));
      expect(all.every((r) => 'message' in r)).toBe(true);
    });

    it('no socket file (the service is not running): unavailable at once', async () => {
      const a = await call(over(join(dir, 'nobody.sock')), 'ok');
      expect(a).toMatchObject({ code: Code.Unavailable, rendered: { code: 'service_unavailable' } });
      expect((a as { ms: number }).ms).toBeLessThan(1_000);
    });
  },
);

/** A loopback port that was free a moment ago. */
function closedPort(): Promise<number> {
  return new Promise<number>((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(p));
    });
  });
}
