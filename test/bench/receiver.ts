// Webhook receivers for the benchmarks: plain HTTP on 127.0.0.1, like testkit's startReceiver,
// but on a port below the ephemeral range (PERF-NOTES.md: listeners inside 32768–60999 can
// self-connect under load) and lean: an `ok` receiver keeps each body with its arrival time
// (sub-millisecond); `fail` answers 500 and `hang` never answers, both only count.
import http from 'node:http';
import type { Socket } from 'node:net';
import { now } from './lib.ts';

export type ReceiverMode = 'ok' | 'fail' | 'hang';

export interface Arrival {
  /** Epoch milliseconds, fractional, when the whole request had arrived. */
  at: number;
  /** When its head had arrived (the server's request event): the receiver's "first byte". */
  firstByteAt: number;
  body: string;
}

export interface BenchReceiver {
  url: string;
  mode: ReceiverMode;
  /** `ok` receivers only: what arrived since an EventLog last took them (EventLog.update). */
  arrivals: Arrival[];
  /** Requests seen, in every mode. */
  count: number;
  close(): Promise<void>;
}

const PORT_LOW = 12_000;
const PORT_HIGH = 19_999;

async function listenLowPort(server: http.Server): Promise<number> {
  for (let i = 0; i < 100; i++) {
    const port = PORT_LOW + Math.floor(Math.random() * (PORT_HIGH - PORT_LOW));
    const ok = await new Promise<boolean>((resolve) => {
      const onError = () => resolve(false);
      server.once('error', onError);
      server.listen(port, '127.0.0.1', () => {
        server.off('error', onError);
        resolve(true);
      });
    });
    if (ok) return port;
  }
  throw new Error(`no free port between ${PORT_LOW} and ${PORT_HIGH}`);
}

export async function startBenchReceiver(mode: ReceiverMode, path = '/hooks'): Promise<BenchReceiver> {
  const sockets = new Set<Socket>();
  const receiver: BenchReceiver = {
    url: '',
    mode,
    arrivals: [],
    count: 0,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
  const server = http.createServer({ keepAliveTimeout: 60_000 }, (req, res) => {
    const firstByteAt = now();
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const at = now();
      receiver.count++;
      if (mode === 'hang') return; // the sender's time-out ends it
      if (mode === 'ok')
        receiver.arrivals.push({ at, firstByteAt, body: Buffer.concat(chunks).toString('utf8') });
      const status = mode === 'ok' ? 200 : 500;
      res.writeHead(status, { 'content-type': 'text/plain', 'content-length': 2 });
      res.end(mode === 'ok' ? 'ok' : 'no');
    });
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  const port = await listenLowPort(server);
  receiver.url = `http://127.0.0.1:${port}${path}`;
  return receiver;
}

/** Starts `n` receivers and registers their closing. */
export async function startReceivers(
  n: number,
  mode: ReceiverMode,
  defer: (label: string, fn: () => unknown) => void,
): Promise<BenchReceiver[]> {
  const out: BenchReceiver[] = [];
  defer(`close ${n} ${mode} receivers`, () => Promise.all(out.map((r) => r.close())));
  for (let i = 0; i < n; i++) out.push(await startBenchReceiver(mode));
  return out;
}

export interface Delivered {
  eventId: string;
  marker: string;
  createdAt: number;
  at: number;
  firstByteAt: number;
}

/**
 * The distinct events an `ok` receiver got (first arrival wins; repeats are counted apart), with
 * the order's created_at and the marker (customer name) its order carried. Incremental: each
 * call parses the arrivals since the last and takes them off the receiver, so polling it while
 * waiting stays cheap and the bodies do not pile up in the runner's heap. They did: 100 MB of
 * them by the end of `pnpm bench ingest-latency`, and the runner's mark-compacts of that heap
 * (30-80 ms of CPU each, `--trace-gc`) fell in the project's rounds, which are the ones that
 * deliver, on the same two cores as the system under test.
 */
export class EventLog {
  readonly byId = new Map<string, Delivered>();
  readonly countByMarker = new Map<string, number>();
  repeats = 0;
  unreadable = 0;
  /** The first body parsed, kept as a sample of what the receiver gets. */
  sampleBody: string | undefined;
  private readonly receiver: BenchReceiver;

  constructor(receiver: BenchReceiver) {
    this.receiver = receiver;
  }

  update(): this {
    const arrivals = this.receiver.arrivals.splice(0);
    this.sampleBody ??= arrivals[0]?.body;
    for (const a of arrivals) {
      try {
        const env = JSON.parse(a.body) as {
          id: string;
          data: { created_at: string; customer?: { name?: string } };
        };
        if (this.byId.has(env.id)) {
          this.repeats++;
          continue;
        }
        const marker = env.data.customer?.name ?? '';
        this.byId.set(env.id, {
          eventId: env.id,
          marker,
          createdAt: Date.parse(env.data.created_at),
          at: a.at,
          firstByteAt: a.firstByteAt,
        });
        this.countByMarker.set(marker, (this.countByMarker.get(marker) ?? 0) + 1);
      } catch {
        this.unreadable++;
      }
    }
    return this;
  }

  count(marker: string): number {
    return this.update().countByMarker.get(marker) ?? 0;
  }

  events(marker: string): Delivered[] {
    return [...this.update().byId.values()].filter((e) => e.marker === marker);
  }
}
