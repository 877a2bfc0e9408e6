// The gateway → service hop alone: which transport carries a unary call for the least time and
// CPU on Node. Not part of `pnpm bench` nor `pnpm test`; run it by hand when choosing:
//
//   flock /tmp/mcs-bench.lock pnpm exec node test/bench/transport.ts [--seconds 5] [--rounds 1]
//                                                                   [--only connect-h1,grpc-js]
//
// For each transport a fresh service process (packages/kit startConnectServer, the same server
// code every service runs, with the services' error interceptor) serves
// mcs.commerce.v1.OrderService/CreateOrder, answering a realistic Order built in memory (no
// database), and a fresh client process calls it with a realistic CreateOrderRequest and the
// metadata the gateway sends, at concurrency 1 and 64 (after a warm-up at each). Reported per
// cell: calls/s, latency p50/p99, and CPU ms per call of the client and of the server process
// (process.cpuUsage over the measured window). With --rounds N every cell is the median of N.
import { fork } from 'node:child_process';
import http from 'node:http';
import http2 from 'node:http2';
import { create, fromBinary, type Message, toBinary } from '@bufbuild/protobuf';
import { timestampNow } from '@bufbuild/protobuf/wkt';
import { type ConnectRouter, createClient, type HandlerContext, type Transport } from '@connectrpc/connect';
import {
  connectNodeAdapter,
  createConnectTransport,
  createGrpcTransport,
  createGrpcWebTransport,
} from '@connectrpc/connect-node';
import * as grpc from '@grpc/grpc-js';
import { newId } from '@mcs/kit/ids';
import { createLogger } from '@mcs/kit/log';
import { errorLogger, startConnectServer } from '@mcs/kit/server';
import { commerce } from '@mcs/proto';
import { createUnaryTransport, type UnaryTransportOptions } from '../../gateway/src/transport.ts';

// ---------------------------------------------------------------------------------------------
// The call: what the gateway sends for POST /v1/orders, and what commerce answers.

const REQUEST = create(commerce.CreateOrderRequestSchema, {
  customer: { name: 'Ada Lovelace', phone: '+447700900123' },
  currency: 'eur',
  items: [
    { product: 'prod_01JD6Q3Z8Y2C7W5N4M3K2H1G0F', quantity: 2n },
    { name: 'Gift wrapping', unitAmount: 350n, quantity: 1n },
  ],
});

const ACCOUNT = 'acct_01JD6Q2X7V1B6T4R3P2N1M0L9K';
let requestCounter = 0;
/** The gateway's metadata for a keyed create (kit/caller): account, mode, key and fingerprint, request id. */
function gatewayHeaders(): Record<string, string> {
  const n = ++requestCounter;
  return {
    'mcs-account': ACCOUNT,
    'mcs-livemode': 'false',
    'mcs-idempotency-key': `bench-${process.pid}-${n}`,
    'mcs-idempotency-fingerprint': '9f2c4e1b7a3d5f60c8e2b4a6d8f0e2c4a6b8d0f2e4c6a8b0d2f4e6c8a0b2d4f6',
    'request-id': `req_${process.pid.toString(36)}${n.toString(36).padStart(8, '0')}`,
  };
}

const CATALOG = new Map([
  ['prod_01JD6Q3Z8Y2C7W5N4M3K2H1G0F', { name: 'Single-origin coffee, 250 g', price: 1_450n }],
]);

function createOrder(req: commerce.CreateOrderRequest, ctx: HandlerContext): commerce.Order {
  const account = ctx.requestHeader.get('mcs-account');
  if (!account) throw new Error('missing mcs-account');
  const now = timestampNow();
  const items = req.items.map((i) => {
    const product = i.product ? CATALOG.get(i.product) : undefined;
    const unitAmount = product?.price ?? i.unitAmount ?? 0n;
    return {
      product: i.product,
      name: product?.name ?? i.name ?? '',
      unitAmount,
      quantity: i.quantity,
      amount: unitAmount * i.quantity,
    };
  });
  return create(commerce.OrderSchema, {
    id: newId('ord'),
    status: commerce.OrderStatus.PENDING,
    customer: req.customer,
    total: items.reduce((sum, i) => sum + i.amount, 0n),
    currency: req.currency,
    items,
    livemode: ctx.requestHeader.get('mcs-livemode') === 'true',
    createdAt: now,
    updatedAt: now,
  });
}

const routes = (router: ConnectRouter) => router.rpc(commerce.OrderService.method.createOrder, createOrder);

// ---------------------------------------------------------------------------------------------
// The transports under test

interface Caller {
  call(): Promise<unknown>;
  close(): void;
}

interface Candidate {
  name: string;
  label: string;
  /** 'kit': the services' server (one port, HTTP/2 + HTTP/1.1); 'bare-h2': http2.createServer alone. */
  server: 'kit' | 'bare-h2';
  client(port: number): Caller;
}

/** What the gateway passes on every call (gateway/src/http.ts). */
const TIMEOUT_MS = 30_000;

function connectCaller(transport: Transport, close = () => {}): Caller {
  const client = createClient(commerce.OrderService, transport);
  return {
    call: () => client.createOrder(REQUEST, { headers: gatewayHeaders(), timeoutMs: TIMEOUT_MS }),
    close,
  };
}

/** The gateway's lean unary transport (gateway/src/transport.ts) to the service at `port`. */
function leanCaller(port: number, opts: UnaryTransportOptions): Caller {
  const baseUrl = `http://127.0.0.1:${port}`;
  return connectCaller(
    createUnaryTransport(baseUrl, createConnectTransport({ baseUrl, httpVersion: '2' }), opts),
  );
}

/** The Unix domain socket the kit server also listens on, named by its port. */
const socketPathOf = (port: number) => `/tmp/mcs-transport-bench-${port}.sock`;

const keepAliveAgent = () => new http.Agent({ keepAlive: true, maxSockets: 256 });

const CANDIDATES: Candidate[] = [
  {
    name: 'connect-h2',
    label: 'Connect, HTTP/2, connect-node',
    server: 'kit',
    client: (port) =>
      connectCaller(
        createConnectTransport({
          baseUrl: `http://127.0.0.1:${port}`,
          httpVersion: '2',
          useBinaryFormat: true,
        }),
      ),
  },
  {
    name: 'connect-h2-bare',
    label: 'Connect, HTTP/2, bare http2 server',
    server: 'bare-h2',
    client: (port) =>
      connectCaller(
        createConnectTransport({
          baseUrl: `http://127.0.0.1:${port}`,
          httpVersion: '2',
          useBinaryFormat: true,
        }),
      ),
  },
  {
    name: 'lean-h2',
    label: "Connect, HTTP/2, the gateway's lean unary transport",
    server: 'kit',
    client: (port) => leanCaller(port, { httpVersion: '2' }),
  },
  {
    name: 'lean-h1',
    label: "Connect, HTTP/1.1 keep-alive (undici), the gateway's lean unary transport",
    server: 'kit',
    client: (port) => leanCaller(port, { httpVersion: '1.1' }),
  },
  {
    name: 'lean-h1-uds',
    label:
      "Connect, HTTP/1.1 keep-alive (undici) over a Unix domain socket, the gateway's lean unary transport",
    server: 'kit',
    client: (port) => leanCaller(port, { httpVersion: '1.1', socketPath: socketPathOf(port) }),
  },
  {
    name: 'connect-h1',
    label: 'Connect, HTTP/1.1 keep-alive',
    server: 'kit',
    client: (port) => {
      const agent = keepAliveAgent();
      return connectCaller(
        createConnectTransport({
          baseUrl: `http://127.0.0.1:${port}`,
          httpVersion: '1.1',
          useBinaryFormat: true,
          nodeOptions: { agent },
        }),
        () => agent.destroy(),
      );
    },
  },
  {
    name: 'grpcweb-h1',
    label: 'gRPC-Web (connect-node), HTTP/1.1',
    server: 'kit',
    client: (port) => {
      const agent = keepAliveAgent();
      return connectCaller(
        createGrpcWebTransport({
          baseUrl: `http://127.0.0.1:${port}`,
          httpVersion: '1.1',
          nodeOptions: { agent },
        }),
        () => agent.destroy(),
      );
    },
  },
  {
    name: 'grpc-connect',
    label: 'gRPC (connect-node), HTTP/2',
    server: 'kit',
    client: (port) => connectCaller(createGrpcTransport({ baseUrl: `http://127.0.0.1:${port}` })),
  },
  {
    name: 'grpc-js',
    label: 'gRPC (@grpc/grpc-js), HTTP/2',
    server: 'kit',
    client: (port) => {
      const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
      const path = `/${commerce.OrderService.typeName}/${commerce.OrderService.method.createOrder.name}`;
      const serialize = (m: Message) => Buffer.from(toBinary(commerce.CreateOrderRequestSchema, m as never));
      const deserialize = (b: Buffer) => fromBinary(commerce.OrderSchema, b);
      return {
        call: () =>
          new Promise((resolve, reject) => {
            const md = new grpc.Metadata();
            for (const [k, v] of Object.entries(gatewayHeaders())) md.set(k, v);
            client.makeUnaryRequest<Message, commerce.Order>(
              path,
              serialize,
              deserialize,
              REQUEST,
              md,
              { deadline: Date.now() + TIMEOUT_MS },
              (err, res) => (err ? reject(err) : resolve(res)),
            );
          }),
        close: () => client.close(),
      };
    },
  },
];

// ---------------------------------------------------------------------------------------------
// The service process

type ToServer = { type: 'cpu' } | { type: 'stop' };
type FromServer = { type: 'ready'; port: number } | { type: 'cpu'; cpu: NodeJS.CpuUsage };

async function serve(kind: Candidate['server']): Promise<void> {
  const interceptors = [errorLogger(createLogger('bench-service', 'warn'))];
  let port: number;
  let close: () => Promise<void>;
  // A port below the ephemeral range (PERF-NOTES.md: loopback clients can self-connect there).
  for (let attempt = 0; ; attempt++) {
    port = 10_000 + Math.floor(Math.random() * 2_000);
    try {
      if (kind === 'kit') {
        close = (await startConnectServer({ routes, port, interceptors, socketPath: socketPathOf(port) }))
          .close;
      } else {
        const server = http2.createServer(connectNodeAdapter({ routes, interceptors }));
        await new Promise<void>((resolve, reject) => {
          server.once('error', reject);
          server.listen(port, '127.0.0.1', resolve);
        });
        close = () => new Promise((resolve) => server.close(() => resolve()));
      }
      break;
    } catch (err) {
      if (attempt > 50) throw err;
    }
  }
  const send = (m: FromServer) => process.send!(m);
  process.on('message', (m: ToServer) => {
    if (m.type === 'cpu') send({ type: 'cpu', cpu: process.cpuUsage() });
    else if (m.type === 'stop') void close().finally(() => process.exit(0));
  });
  send({ type: 'ready', port });
}

// ---------------------------------------------------------------------------------------------
// The client process

type ToClient = { type: 'run'; concurrency: number; warmupMs: number; measureMs: number } | { type: 'go' };
interface Measured {
  calls: number;
  errors: number;
  firstError?: string;
  seconds: number;
  latenciesMs: number[];
  cpuMs: number;
}
type FromClient = { type: 'ready' } | { type: 'warm' } | { type: 'result'; result: Measured };

async function load(caller: Caller, concurrency: number, ms: number, record: boolean) {
  const latencies: number[] = [];
  let calls = 0;
  let errors = 0;
  let firstError: string | undefined;
  const end = performance.now() + ms;
  const worker = async () => {
    while (performance.now() < end) {
      const t0 = performance.now();
      try {
        await caller.call();
        calls++;
        if (record) latencies.push(performance.now() - t0);
      } catch (err) {
        errors++;
        firstError ??= (err as Error).message;
      }
    }
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { calls, errors, firstError, seconds: (performance.now() - t0) / 1_000, latenciesMs: latencies };
}

async function callAs(name: string, port: number): Promise<void> {
  const candidate = CANDIDATES.find((c) => c.name === name)!;
  const caller = candidate.client(port);
  const send = (m: FromClient) => process.send!(m);
  let go: () => void = () => {};
  process.on('message', (m: ToClient) => {
    if (m.type === 'go') go();
    else
      void (async () => {
        await load(caller, m.concurrency, m.warmupMs, false);
        const started = new Promise<void>((resolve) => {
          go = resolve;
        });
        send({ type: 'warm' });
        await started;
        const cpu0 = process.cpuUsage();
        const r = await load(caller, m.concurrency, m.measureMs, true);
        const cpu = process.cpuUsage(cpu0);
        send({ type: 'result', result: { ...r, cpuMs: (cpu.user + cpu.system) / 1_000 } });
      })();
  });
  process.on('disconnect', () => {
    caller.close();
    process.exit(0);
  });
  send({ type: 'ready' });
}

// ---------------------------------------------------------------------------------------------
// The runner

interface Cell {
  transport: string;
  concurrency: number;
  callsPerSec: number;
  p50: number;
  p99: number;
  clientCpuMs: number;
  serverCpuMs: number;
  errors: number;
}

function child<In, Out extends { type: string }>(args: string[]) {
  const proc = fork(import.meta.filename, args, { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const waiting: Array<{ type: string; resolve: (m: Out) => void }> = [];
  proc.on('message', (m: Out) => {
    const i = waiting.findIndex((w) => w.type === m.type);
    if (i >= 0) waiting.splice(i, 1)[0]!.resolve(m);
  });
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  return {
    next<T extends Out['type']>(type: T): Promise<Extract<Out, { type: T }>> {
      return new Promise((resolve, reject) => {
        waiting.push({ type, resolve: resolve as (m: Out) => void });
        proc.once('exit', (code) => reject(new Error(`${args.join(' ')} exited (${code}) awaiting ${type}`)));
      });
    },
    send: (m: In) => proc.send(m as object),
    async stop() {
      if (proc.exitCode === null) proc.disconnect();
      await exited;
    },
    /** Waits up to `ms` for the process to exit, then kills it. */
    async reap(ms: number) {
      const t = setTimeout(() => proc.kill('SIGKILL'), ms);
      await exited;
      clearTimeout(t);
    },
  };
}

const cpuMsOf = (c: NodeJS.CpuUsage) => (c.user + c.system) / 1_000;

async function measure(
  candidate: Candidate,
  levels: number[],
  warmupMs: number,
  measureMs: number,
): Promise<Cell[]> {
  const server = child<ToServer, FromServer>(['serve', candidate.server]);
  const { port } = await server.next('ready');
  const client = child<ToClient, FromClient>(['call', candidate.name, String(port)]);
  const cells: Cell[] = [];
  try {
    await client.next('ready');
    for (const concurrency of levels) {
      client.send({ type: 'run', concurrency, warmupMs, measureMs });
      await client.next('warm');
      server.send({ type: 'cpu' });
      const before = (await server.next('cpu')).cpu;
      client.send({ type: 'go' });
      const { result } = await client.next('result');
      server.send({ type: 'cpu' });
      const after = (await server.next('cpu')).cpu;
      const sorted = result.latenciesMs.sort((a, b) => a - b);
      const at = (p: number) =>
        sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)] ?? Number.NaN;
      if (result.errors > 0) {
        process.stderr.write(
          `  ${candidate.name} c=${concurrency}: ${result.errors} errors, first: ${result.firstError}\n`,
        );
      }
      cells.push({
        transport: candidate.name,
        concurrency,
        callsPerSec: result.calls / result.seconds,
        p50: at(0.5),
        p99: at(0.99),
        clientCpuMs: result.cpuMs / result.calls,
        serverCpuMs: (cpuMsOf(after) - cpuMsOf(before)) / result.calls,
        errors: result.errors,
      });
    }
  } finally {
    await client.stop();
    server.send({ type: 'stop' });
    await server.reap(5_000);
  }
  return cells;
}

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

async function main(): Promise<void> {
  const seconds = Number(arg('seconds') ?? 5);
  const rounds = Number(arg('rounds') ?? 1);
  const only = arg('only')?.split(',');
  const levels = (arg('concurrency') ?? '1,64').split(',').map(Number);
  const candidates = only ? CANDIDATES.filter((c) => only.includes(c.name)) : CANDIDATES;
  const all: Cell[] = [];
  for (let round = 1; round <= rounds; round++) {
    for (const c of candidates) {
      process.stderr.write(`[transport] round ${round}/${rounds}: ${c.label}\n`);
      all.push(...(await measure(c, levels, 1_000, seconds * 1_000)));
    }
  }
  const f = (v: number, digits: number) =>
    Number.isFinite(v)
      ? v.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })
      : '–';
  const header = [
    'transport',
    'conc.',
    'calls/s',
    'p50 ms',
    'p99 ms',
    'client CPU ms/call',
    'server CPU ms/call',
  ];
  const rows: string[][] = [];
  for (const concurrency of levels) {
    for (const c of candidates) {
      const cells = all.filter((x) => x.transport === c.name && x.concurrency === concurrency);
      const m = (k: keyof Cell) => median(cells.map((x) => x[k] as number));
      const errors = cells.reduce((n, x) => n + x.errors, 0);
      rows.push([
        `${c.label}${errors ? ` (${errors} errors)` : ''}`,
        String(concurrency),
        f(m('callsPerSec'), 0),
        f(m('p50'), 2),
        f(m('p99'), 2),
        f(m('clientCpuMs'), 3),
        f(m('serverCpuMs'), 3),
      ]);
    }
  }
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: string[]) =>
    `| ${r.map((v, i) => (i < 1 ? v.padEnd(widths[i]!) : v.padStart(widths[i]!))).join(' | ')} |`;
  const out = [
    `Transport, one unary CreateOrder call (Node ${process.version}, ${seconds} s per cell, median of ${rounds} round(s))`,
    line(header),
    `|${widths.map((w, i) => (i < 1 ? `${'-'.repeat(w + 1)}-` : `${'-'.repeat(w + 1)}:`)).join('|')}|`,
    ...rows.map(line),
  ];
  process.stdout.write(`${out.join('\n')}\n`);
}

const [mode, a1, a2] = process.argv.slice(2);
if (mode === 'serve') await serve(a1 as Candidate['server']);
else if (mode === 'call') await callAs(a1!, Number(a2));
else await main();
