// One service port, every protocol: Connect over HTTP/1.1 and HTTP/2, gRPC-Web over HTTP/1.1,
// gRPC from connect-node and from a stock @grpc/grpc-js client; and a graceful close on both
// HTTP versions (in-flight calls finish, idle connections end).

import { spawn } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import http2 from 'node:http2';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { create, fromBinary, type Message, toBinary } from '@bufbuild/protobuf';
import {
  type CallOptions,
  type Client,
  type ConnectRouter,
  createClient,
  type Transport,
} from '@connectrpc/connect';
import {
  createConnectTransport,
  createGrpcTransport,
  createGrpcWebTransport,
} from '@connectrpc/connect-node';
import * as grpc from '@grpc/grpc-js';
import { commerce } from '@mcs/proto';
import { afterEach, describe, expect, it } from 'vitest';
import { callerOf } from './caller.ts';
import { closingResponse, type ServerHandle, startConnectServer } from './server.ts';

const REQUEST = create(commerce.CreateOrderRequestSchema, {
  customer: { name: 'Ada', phone: '+15550001111' },
  currency: 'usd',
  items: [{ name: 'Tea', unitAmount: 350n, quantity: 2n }],
});
const META = { 'mcs-account': 'acct_1', 'mcs-livemode': 'true' };

/** An OrderService whose CreateOrder echoes the caller; `gate`, when set, holds each call until released. */
function routes(state: { gate?: Promise<void>; started?: () => void }) {
  return (router: ConnectRouter) =>
    router.rpc(commerce.OrderService.method.createOrder, async (req, ctx) => {
      const caller = callerOf(ctx);
      state.started?.();
      if (state.gate) await state.gate;
      ctx.responseHeader.set('mcs-test-echo', caller.accountId);
      const total = req.items.reduce((sum, i) => sum + (i.unitAmount ?? 0n) * i.quantity, 0n);
      return create(commerce.OrderSchema, {
        id: 'ord_1',
        customer: req.customer,
        currency: req.currency,
        total,
        livemode: caller.livemode,
      });
    });
}

let server: ServerHandle | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

const agents: http.Agent[] = [];
afterEach(() => {
  for (const a of agents.splice(0)) a.destroy();
});
function keepAliveAgent() {
  const agent = new http.Agent({ keepAlive: true });
  agents.push(agent);
  return agent;
}

const transports: Record<string, (url: string) => Transport> = {
  'Connect over HTTP/1.1': (baseUrl) =>
    createConnectTransport({
      baseUrl,
      httpVersion: '1.1',
      useBinaryFormat: true,
      nodeOptions: { agent: keepAliveAgent() },
    }),
  'Connect JSON over HTTP/1.1': (baseUrl) =>
    createConnectTransport({ baseUrl, httpVersion: '1.1', nodeOptions: { agent: keepAliveAgent() } }),
  'Connect over HTTP/2': (baseUrl) =>
    createConnectTransport({ baseUrl, httpVersion: '2', useBinaryFormat: true }),
  'gRPC-Web over HTTP/1.1': (baseUrl) =>
    createGrpcWebTransport({ baseUrl, httpVersion: '1.1', nodeOptions: { agent: keepAliveAgent() } }),
  'gRPC-Web over HTTP/2': (baseUrl) => createGrpcWebTransport({ baseUrl, httpVersion: '2' }),
  'gRPC (connect-node) over HTTP/2': (baseUrl) => createGrpcTransport({ baseUrl }),
};

async function start(state: Parameters<typeof routes>[0] = {}) {
  server = await startConnectServer({ routes: routes(state), port: 0 });
  return `http://127.0.0.1:${server.port}`;
}

describe('one port answers every protocol', () => {
  for (const [name, make] of Object.entries(transports)) {
    it(name, async () => {
      const client = createClient(commerce.OrderService, make(await start()));
      let echoed: string | null = null;
      // Twice, so the second call reuses the kept-alive connection.
      for (let i = 0; i < 2; i++) {
        const order = await client.createOrder(REQUEST, {
          headers: META,
          timeoutMs: 5_000,
          onHeader: (h) => {
            echoed = h.get('mcs-test-echo');
          },
        });
        expect(order).toMatchObject({ id: 'ord_1', currency: 'usd', total: 700n, livemode: true });
        expect(order.customer?.name).toBe('Ada');
        expect(echoed).toBe('acct_1');
      }
    });
  }

  it('a stock @grpc/grpc-js client, with metadata both ways', async () => {
    const url = await start();
    const client = new grpc.Client(url.slice('http://'.length), grpc.credentials.createInsecure());
    try {
      const md = new grpc.Metadata();
      for (const [k, v] of Object.entries(META)) md.set(k, v);
      let echoed: grpc.MetadataValue[] = [];
      const order = await new Promise<commerce.Order>((resolve, reject) => {
        const call = client.makeUnaryRequest<Message, commerce.Order>(
          '/mcs.commerce.v1.OrderService/CreateOrder',
          (m) => Buffer.from(toBinary(commerce.CreateOrderRequestSchema, m as commerce.CreateOrderRequest)),
          (b) => fromBinary(commerce.OrderSchema, b),
          REQUEST,
          md,
          (err, res) => (err || !res ? reject(err) : resolve(res)),
        );
        call.on('metadata', (m) => {
          echoed = m.get('mcs-test-echo');
        });
      });
      expect(order).toMatchObject({ id: 'ord_1', total: 700n, livemode: true });
      expect(echoed).toEqual(['acct_1']);
    } finally {
      client.close();
    }
  });

  it('an HTTP/1.1 request written one byte at a time (POST shares its first letter with the h2 preface)', async () => {
    const url = new URL(await start());
    const body = JSON.stringify({
      customer: { name: 'Ada', phone: '+15550001111' },
      currency: 'usd',
      items: [],
    });
    const raw =
      'POST /mcs.commerce.v1.OrderService/CreateOrder HTTP/1.1\r\n' +
      `Host: ${url.host}\r\nContent-Type: application/json\r\nMcs-Account: acct_1\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;
    const socket = net.connect(Number(url.port), url.hostname);
    let answer = '';
    socket.setEncoding('utf8');
    socket.on('data', (d) => {
      answer += d;
    });
    const ended = new Promise((resolve) => socket.on('close', resolve));
    for (const ch of raw) {
      socket.write(ch);
      await new Promise((r) => setTimeout(r, 1));
    }
    await ended;
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(answer).toContain('"id":"ord_1"');
  });

  it('a connection that sends nothing and leaves does not disturb the server', async () => {
    const url = new URL(await start());
    const socket = net.connect(Number(url.port), url.hostname);
    await new Promise((r) => socket.on('connect', r));
    socket.destroy();
    const client = createClient(commerce.OrderService, transports['Connect over HTTP/1.1']!(url.origin));
    expect((await client.createOrder(REQUEST, { headers: META })).id).toBe('ord_1');
  });
});

describe('graceful close', () => {
  /** Starts a server whose calls wait for `release()`; `started` resolves when `n` calls are in. */
  async function gatedServer(n: number) {
    let release!: () => void;
    let count = 0;
    let allIn!: () => void;
    const started = new Promise<void>((r) => {
      allIn = r;
    });
    const state = {
      gate: new Promise<void>((r) => {
        release = r;
      }),
      started: () => {
        if (++count === n) allIn();
      },
    };
    const url = await start(state);
    return { url, release, started };
  }

  it('lets in-flight calls on HTTP/1.1 and HTTP/2 finish, then closes every connection', async () => {
    const { url, release, started } = await gatedServer(2);
    const h1 = createClient(commerce.OrderService, transports['Connect over HTTP/1.1']!(url));
    const h2 = createClient(commerce.OrderService, transports['Connect over HTTP/2']!(url));
    const opts: CallOptions = { headers: META };
    const calls = [h1.createOrder(REQUEST, opts), h2.createOrder(REQUEST, opts)];
    await started;
    let closed = false;
    const closing = server!.close().then(() => {
      closed = true;
    });
    server = undefined;
    await new Promise((r) => setTimeout(r, 100));
    expect(closed).toBe(false);
    release();
    const answers = await Promise.all(calls);
    expect(answers.map((a) => a.id)).toEqual(['ord_1', 'ord_1']);
    await closing;
    // The port no longer accepts connections.
    await expect(h1.createOrder(REQUEST, opts)).rejects.toThrow();
  });

  it('closes idle kept-alive HTTP/1.1 sockets and idle HTTP/2 sessions at once', async () => {
    const url = await start();
    const clients: Client<typeof commerce.OrderService>[] = [
      createClient(commerce.OrderService, transports['Connect over HTTP/1.1']!(url)),
      createClient(commerce.OrderService, transports['Connect over HTTP/2']!(url)),
    ];
    for (const c of clients) await c.createOrder(REQUEST, { headers: META });
    // A raw HTTP/2 session and a raw socket that never sent a byte stay open too.
    const session = http2.connect(url);
    await new Promise((r) => session.once('connect', r));
    const silent = net.connect(Number(new URL(url).port), '127.0.0.1');
    await new Promise((r) => silent.once('connect', r));
    const t0 = performance.now();
    await server!.close();
    server = undefined;
    expect(performance.now() - t0).toBeLessThan(2_000);
    session.destroy();
    silent.destroy();
  });
});

describe('a Unix domain socket beside the port', () => {
  const dirs: string[] = [];
  afterEach(async () => {
    for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
  });
  async function socketPath() {
    const dir = await mkdtemp(join(tmpdir(), 'mcs-server-'));
    dirs.push(dir);
    return join(dir, 'run', 'svc.sock');
  }
  /** One HTTP/1.1 Connect call (JSON, so it reads plainly) over the socket at `path`. */
  function callOver(path: string): Promise<{ status: number; body: string }> {
    return new Promise((resolve, reject) => {
      const req = http.request(
        {
          socketPath: path,
          method: 'POST',
          path: '/mcs.commerce.v1.OrderService/CreateOrder',
          headers: { 'content-type': 'application/json', 'mcs-account': 'acct_1' },
        },
        (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (d) => {
            body += d;
          });
          res.on('end', () => resolve({ status: res.statusCode!, body }));
        },
      );
      req.on('error', reject);
      req.end(JSON.stringify({ customer: { name: 'Ada', phone: '+15550001111' }, currency: 'usd' }));
    });
  }

  it('answers HTTP/1.1 and HTTP/2 there as on the port, over a file left by a killed process, and removes it on close', async () => {
    const path = await socketPath();
    // What kill -9 leaves: the socket file of a listener that is gone.
    await mkdir(dirname(path), { recursive: true });
    const killed = spawn(process.execPath, [
      '-e',
      `require('node:net').createServer().listen(${JSON.stringify(path)}, () => console.log('up'))`,
    ]);
    await new Promise((r) => killed.stdout.once('data', r));
    killed.kill('SIGKILL');
    await new Promise((r) => killed.once('exit', r));
    expect(existsSync(path)).toBe(true);

    server = await startConnectServer({ routes: routes({}), port: 0, socketPath: path });
    const h1 = await callOver(path);
    expect(h1.status).toBe(200);
    expect(JSON.parse(h1.body)).toMatchObject({ id: 'ord_1', currency: 'usd' });

    const client = createClient(
      commerce.OrderService,
      createConnectTransport({
        baseUrl: 'http://localhost',
        httpVersion: '2',
        useBinaryFormat: true,
        nodeOptions: { createConnection: () => net.connect(path) },
      }),
    );
    expect((await client.createOrder(REQUEST, { headers: META })).id).toBe('ord_1');

    await server.close();
    server = undefined;
    expect(existsSync(path)).toBe(false);
  });

  it("leaves a live server's socket alone when its port is taken", async () => {
    const path = await socketPath();
    server = await startConnectServer({ routes: routes({}), port: 0, socketPath: path });
    // A directory it made is its own: other users of the machine cannot reach the socket.
    expect((statSync(dirname(path)).mode & 0o777).toString(8)).toBe('700');
    await expect(
      startConnectServer({ routes: routes({}), port: server.port, socketPath: path }),
    ).rejects.toThrow(/EADDRINUSE/);
    expect((await callOver(path)).status).toBe(200);
  });
});

describe('closingResponse', () => {
  it('says Connection: close in every head written once the server is stopping, and only then', async () => {
    let closing = false;
    const server = http.createServer({ ServerResponse: closingResponse(() => closing) }, (req, res) => {
      // Both ways a head is written: writeHead with headers, and implicitly by end().
      if (req.url === '/explicit') res.writeHead(200, { 'content-type': 'text/plain' }).end('a');
      else res.end('b');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as net.AddressInfo).port;
    const agent = new http.Agent({ keepAlive: true });
    const get = (path: string) =>
      new Promise<{ connection: string | undefined; body: string }>((resolve, reject) => {
        http
          .get({ port, host: '127.0.0.1', path, agent }, (res) => {
            let body = '';
            res.on('data', (c: Buffer) => (body += c));
            res.on('end', () => resolve({ connection: res.headers.connection, body }));
          })
          .on('error', reject);
      });
    try {
      expect(await get('/explicit')).toEqual({ connection: 'keep-alive', body: 'a' });
      expect(await get('/implicit')).toEqual({ connection: 'keep-alive', body: 'b' });
      closing = true;
      expect(await get('/explicit')).toEqual({ connection: 'close', body: 'a' });
      expect(await get('/implicit')).toEqual({ connection: 'close', body: 'b' });
    } finally {
      agent.destroy();
      server.close();
    }
  });
});

describe('a metrics port beside the service port (SERVICE_METRICS_PORT)', () => {
  const get = (port: number, path: string, method = 'GET') =>
    fetch(`http://127.0.0.1:${port}${path}`, { method }).then(async (r) => ({
      status: r.status,
      body: await r.text(),
    }));

  it('serves GET /metrics alone there, keeps it on the service port, and closes it with the server', async () => {
    const free = net.createServer();
    await new Promise<void>((r) => free.listen(0, '127.0.0.1', r));
    const metricsPort = (free.address() as net.AddressInfo).port;
    await new Promise<void>((r) => free.close(() => r()));

    server = await startConnectServer({ routes: routes({}), port: 0, host: '127.0.0.1', metricsPort });
    const metrics = await get(metricsPort, '/metrics');
    expect(metrics.status).toBe(200);
    expect(metrics.body).toContain('# TYPE');
    // Nothing else there: not the RPCs a network policy keeps the scraper from.
    expect((await get(metricsPort, '/mcs.commerce.v1.OrderService/CreateOrder', 'POST')).status).toBe(404);
    expect((await get(server.port, '/metrics')).status).toBe(200);

    await server.close();
    server = undefined;
    await expect(get(metricsPort, '/metrics')).rejects.toThrow();
  });
});
