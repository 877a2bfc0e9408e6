// The load generator's own process (forked by load.ts): runs one load from the spec it is sent
// and answers with a summary. In a process of its own, its CPU (about a core at full speed)
// never stalls the receivers' clocks in the runner, and the runner can kill it.
//
// Closed loop: N workers on an undici Pool of N connections, each sending its next request when
// the last one is answered. At the end it stops sending and waits for the answers in flight, so
// the 2xx count is exactly what the server committed (autocannon drops those, which made "orders
// in the database = 2xx answers" impossible to check). Fixed rate: a paced open-loop sender on
// the same kind of pool, because autocannon's overallRate gives each connection a per-second
// quota that it sends back to back at the start of every second (bursts at many times the
// nominal rate), while a latency benchmark needs evenly spaced arrivals. Its latencies count
// from each request's scheduled time, so a stalled server is not hidden (coordinated omission).
// Both modes start their clock only once the pool's connections are open and the request path
// has run (warmUp): what is measured is the server, not this process starting.
import { randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Pool } from 'undici';
import type { LoadRequest, LoadSpec, LoadSummary, WorkerMessage } from './load.ts';

function send(msg: WorkerMessage): void {
  process.send?.(msg);
}

let stopRequested = false;
let started = false;
process.on('message', (m: unknown) => {
  if (m === 'stop') {
    stopRequested = true;
  } else if (typeof m === 'object' && m !== null && !started) {
    started = true;
    run(m as LoadSpec).then(
      (summary) => {
        // The runner reads this process's CPU time before it ends it (load.ts); exit alone if it does not.
        send({ kind: 'done', summary });
        setTimeout(() => process.exit(0), 5_000).unref();
      },
      (err: unknown) => {
        send({ kind: 'error', message: err instanceof Error ? err.message : String(err) });
        setTimeout(() => process.exit(1), 1_000).unref();
      },
    );
  }
});

function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

/**
 * BENCH_TIMELINE_DIR (an experiment knob, run.ts): each load writes `<dir>/<title>-<start>.txt`,
 * one line per answered request, `<scheduled send, epoch ms> <latency ms>`, after a header line
 * `# <CLOCK_MONOTONIC ms minus performance.now()> <performance.timeOrigin>` that lines it up
 * with `perf sched record -k CLOCK_MONOTONIC` and with the parts' own timestamps. With it the
 * slow requests of a paced run showed as clusters of 50–150, each at a full collection in one
 * part or a burst of dirty-page write-back (docs/performance.md).
 */
const TIMELINE_DIR = process.env.BENCH_TIMELINE_DIR;

/** Counters shared by both modes. */
class Tally {
  latencies: number[] = [];
  /** Scheduled send time and latency of each answered request, flat, when TIMELINE_DIR is set. */
  timeline: number[] | undefined = TIMELINE_DIR ? [] : undefined;
  statusCodes: Record<string, number> = {};
  okByTag: Record<string, number> = {};
  ok = 0;
  non2xx = 0;
  errors = 0;
  timeouts = 0;
  unexpected = 0;
  unexpectedSample: string[] = [];
  sent = 0;
}

/** One request through the pool's dispatcher: no stream per answer, just status, headers, body. */
function dispatch(
  pool: Pool,
  opts: { path: string; method: string; headers: Record<string, string>; body?: string },
  keepBody: boolean,
): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  return new Promise((resolve, reject) => {
    let status = 0;
    let headers: Record<string, unknown> = {};
    const chunks: Buffer[] = [];
    pool.dispatch({ ...opts, method: opts.method as 'POST' }, {
      onRequestStart() {},
      onResponseStart(_c: unknown, statusCode: number, h: Record<string, unknown>) {
        status = statusCode;
        headers = h;
      },
      onResponseData(_c: unknown, chunk: Buffer) {
        if (keepBody) chunks.push(chunk);
      },
      onResponseEnd() {
        resolve({ status, headers, body: keepBody ? Buffer.concat(chunks).toString('utf8') : '' });
      },
      onResponseError(_c: unknown, err: Error) {
        reject(err);
      },
    } as unknown as Parameters<Pool['dispatch']>[1]);
  });
}

/** Prepared requests: the headers with the id placeholder, found once. */
interface Prepared {
  tag: string | undefined;
  headers: Record<string, string>;
  /** Header names whose values hold `[<id>]`. */
  idHeaders: string[];
  body: string | undefined;
  bodyHasId: boolean;
}

function prepare(spec: LoadSpec): Prepared[] {
  const cycle: LoadRequest[] = spec.requests ?? [{ body: spec.body, headers: spec.headers }];
  return cycle.map((r) => {
    const headers = { ...(r.headers ?? spec.headers ?? {}) };
    const body = r.body ?? spec.body;
    return {
      tag: r.tag,
      headers,
      idHeaders: spec.idReplacement ? Object.keys(headers).filter((k) => headers[k]!.includes('[<id>]')) : [],
      body,
      bodyHasId: !!spec.idReplacement && !!body?.includes('[<id>]'),
    };
  });
}

/** Sends request number `i` of the cycle and records its answer in `t`. */
async function one(
  pool: Pool,
  spec: LoadSpec,
  cycle: Prepared[],
  path: string,
  i: number,
  from: number,
  t: Tally,
): Promise<void> {
  const r = cycle[i % cycle.length]!;
  let headers = r.headers;
  let body = r.body;
  if (r.idHeaders.length > 0 || r.bodyHasId) {
    const id = randomUUID();
    headers = withId(headers, r.idHeaders, id);
    if (r.bodyHasId) body = body!.replaceAll('[<id>]', id);
  }
  const ex = spec.expect;
  try {
    const res = await dispatch(
      pool,
      { path, method: spec.method, headers, ...(body === undefined ? {} : { body }) },
      ex !== undefined,
    );
    t.latencies.push(performance.now() - from);
    t.timeline?.push(from, performance.now() - from);
    t.statusCodes[res.status] = (t.statusCodes[res.status] ?? 0) + 1;
    if (res.status >= 200 && res.status < 300) {
      t.ok++;
      if (r.tag !== undefined) t.okByTag[r.tag] = (t.okByTag[r.tag] ?? 0) + 1;
    } else t.non2xx++;
    if (ex) {
      const got = ex.header ? res.headers[ex.header[0].toLowerCase()] : undefined;
      const bad =
        (ex.status !== undefined && res.status !== ex.status) || (ex.header && got !== ex.header[1]);
      if (bad) {
        t.unexpected++;
        if (t.unexpectedSample.length < 3)
          t.unexpectedSample.push(
            `${res.status}${ex.header ? ` ${ex.header[0]}: ${String(got)}` : ''} ${res.body.slice(0, 200)}`,
          );
      }
    }
  } catch (err) {
    const code = (err as { code?: string }).code ?? '';
    if (code.includes('TIMEOUT')) t.timeouts++;
    else t.errors++;
  }
}

function writeTimeline(spec: LoadSpec, t: Tally, startedAt: number): void {
  if (!TIMELINE_DIR || !t.timeline) return;
  const origin = performance.timeOrigin;
  const lines = [`# ${(Number(process.hrtime.bigint()) / 1e6 - performance.now()).toFixed(3)} ${origin}`];
  for (let i = 0; i < t.timeline.length; i += 2)
    lines.push(`${(origin + t.timeline[i]!).toFixed(2)} ${t.timeline[i + 1]!.toFixed(2)}`);
  mkdirSync(TIMELINE_DIR, { recursive: true });
  const name = `${spec.title.replace(/[^\w.-]+/g, '_')}-${startedAt}.txt`;
  writeFileSync(path.join(TIMELINE_DIR, name), `${lines.join('\n')}\n`);
}

function summary(
  spec: LoadSpec,
  t: Tally,
  generator: string,
  startedAt: number,
  durationSec: number,
): LoadSummary {
  writeTimeline(spec, t, startedAt);
  const latencies = t.latencies.sort((a, b) => a - b);
  const r1 = (v: number) => Math.round(v * 10) / 10;
  return {
    title: spec.title,
    generator,
    startedAt,
    endedAt: Date.now(),
    durationSec,
    connections: spec.connections,
    overallRate: spec.overallRate ?? null,
    requests: t.sent,
    ok: t.ok,
    non2xx: t.non2xx,
    errors: t.errors,
    timeouts: t.timeouts,
    okPerSec: t.ok / durationSec,
    reqPerSec: t.sent / durationSec,
    latencyMs: {
      p50: r1(quantile(latencies, 0.5)),
      p90: r1(quantile(latencies, 0.9)),
      p99: r1(quantile(latencies, 0.99)),
      max: r1(latencies.at(-1) ?? 0),
      mean: r1(latencies.reduce((a, b) => a + b, 0) / (latencies.length || 1)),
    },
    statusCodes: t.statusCodes,
    okByTag: t.okByTag,
    unexpected: t.unexpected,
    unexpectedSample: t.unexpectedSample,
    generatorCpuMs: Math.round((process.cpuUsage().user + process.cpuUsage().system) / 1000),
  };
}

function poolFor(spec: LoadSpec): { pool: Pool; path: string } {
  const url = new URL(spec.url);
  const pool = new Pool(url.origin, {
    connections: spec.connections,
    pipelining: 1,
    keepAliveTimeout: 60_000,
    headersTimeout: (spec.timeoutSec ?? 10) * 1000,
    bodyTimeout: (spec.timeoutSec ?? 10) * 1000,
  });
  return { pool, path: url.pathname + url.search };
}

/**
 * Before the clock starts: opens the pool's connections and runs this process's request path
 * until it is compiled, with OPTIONS requests (the run's headers, no body), which any server
 * answers at once without writing anything (the gateway 405, the bare server 400). The measured
 * window then starts as a long-lived client would be, instead of with N handshakes and this
 * process's first, unoptimized requests competing with the server for the CPU: on the 2-core
 * machine, at a paced 900/s, the generator used 0.8 of a core in the first 100 ms of a run
 * (0.2 after), and the first half second held up to half of a 6-second run's slowest 1 %.
 */
const WARM_PASSES = 20;

async function warmUp(pool: Pool, path: string, spec: LoadSpec, cycle: Prepared[]): Promise<void> {
  for (let pass = 0; pass < WARM_PASSES; pass++) {
    await Promise.all(
      Array.from({ length: spec.connections }, (_, i) => {
        const r = cycle[i % cycle.length]!;
        const headers = r.idHeaders.length > 0 ? withId(r.headers, r.idHeaders, randomUUID()) : r.headers;
        return dispatch(pool, { path, method: 'OPTIONS', headers }, false).catch(() => {});
      }),
    );
  }
}

/** The headers with the id placeholder of `idHeaders` replaced by `id`. */
function withId(headers: Record<string, string>, idHeaders: string[], id: string): Record<string, string> {
  const out = { ...headers };
  for (const k of idHeaders) out[k] = out[k]!.replaceAll('[<id>]', id);
  return out;
}

async function run(spec: LoadSpec): Promise<LoadSummary> {
  const target = poolFor(spec);
  const cycle = prepare(spec);
  await warmUp(target.pool, target.path, spec, cycle);
  return spec.overallRate ? paced(spec, spec.overallRate, target, cycle) : closedLoop(spec, target, cycle);
}

async function closedLoop(
  spec: LoadSpec,
  { pool, path }: ReturnType<typeof poolFor>,
  cycle: Prepared[],
): Promise<LoadSummary> {
  const amount = spec.amount ?? Number.POSITIVE_INFINITY;
  const t = new Tally();
  const startedAt = Date.now();
  const t0 = performance.now();
  const deadline = t0 + spec.durationSec * 1000;
  send({ kind: 'started', at: startedAt });
  const worker = async () => {
    while (!stopRequested && t.sent < amount && performance.now() < deadline) {
      const i = t.sent++;
      await one(pool, spec, cycle, path, i, performance.now(), t);
    }
  };
  await Promise.all(Array.from({ length: spec.connections }, worker));
  const durationSec = (performance.now() - t0) / 1000;
  await pool.close();
  return summary(spec, t, 'closed loop (undici)', startedAt, durationSec);
}

async function paced(
  spec: LoadSpec,
  rate: number,
  { pool, path }: ReturnType<typeof poolFor>,
  cycle: Prepared[],
): Promise<LoadSummary> {
  const total = Math.round(rate * spec.durationSec);
  const interval = 1000 / rate;
  const t = new Tally();
  let finished = 0;
  const startedAt = Date.now();
  const t0 = performance.now();
  send({ kind: 'started', at: startedAt });

  await new Promise<void>((resolve) => {
    const settle = () => {
      finished++;
      if (finished === t.sent && (t.sent === total || stopRequested)) resolve();
    };
    const tick = () => {
      const now = performance.now();
      while (t.sent < total && !stopRequested && t0 + t.sent * interval <= now) {
        const i = t.sent++;
        one(pool, spec, cycle, path, i, t0 + i * interval, t).finally(settle);
      }
      if (t.sent < total && !stopRequested)
        setTimeout(tick, Math.max(0, t0 + t.sent * interval - performance.now()));
      else if (finished === t.sent) resolve();
    };
    tick();
  });
  const durationSec = (performance.now() - t0) / 1000;
  await pool.close();
  return summary(spec, t, 'paced open loop (undici)', startedAt, durationSec);
}
