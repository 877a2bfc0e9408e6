// The load generator's own process (forked by load.ts): runs one load from the spec it is sent
// and answers with a summary. In a process of its own, its CPU (about a core at full speed)
// never stalls the receivers' clocks in the runner, and the runner can kill it.
//
// Closed loop: autocannon. Fixed rate: a paced open-loop sender on an undici Pool, because
// autocannon's overallRate gives each connection a per-second quota that it sends back to back
// at the start of every second (bursts at many times the nominal rate), while a latency
// benchmark needs evenly spaced arrivals. Its latencies count from each request's scheduled time,
// so a stalled server is not hidden (coordinated omission).
import { randomUUID } from 'node:crypto';
import autocannon from 'autocannon';
import { Pool } from 'undici';
import type { LoadSpec, LoadSummary, WorkerMessage } from './load.ts';

function send(msg: WorkerMessage): void {
  process.send?.(msg);
}

let stopRequested = false;
let stopAutocannon: (() => void) | null = null;
process.on('message', (m: unknown) => {
  if (m === 'stop') {
    stopRequested = true;
    stopAutocannon?.();
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
let started = false;

function run(spec: LoadSpec): Promise<LoadSummary> {
  return spec.overallRate ? paced(spec, spec.overallRate) : closedLoop(spec);
}

function closedLoop(spec: LoadSpec): Promise<LoadSummary> {
  const okByTag: Record<string, number> = {};
  const countOk = (tag: string | undefined) => (status: number) => {
    if (tag !== undefined && status >= 200 && status < 300) okByTag[tag] = (okByTag[tag] ?? 0) + 1;
  };
  const requests = spec.requests?.map((r) => ({
    method: spec.method,
    ...(r.body === undefined ? {} : { body: r.body }),
    ...(r.headers === undefined ? {} : { headers: r.headers }),
    onResponse: countOk(r.tag),
  }));
  const startedAt = Date.now();
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url: spec.url,
        method: spec.method,
        connections: spec.connections,
        duration: spec.durationSec,
        timeout: spec.timeoutSec ?? 10,
        idReplacement: spec.idReplacement ?? false,
        ...(spec.body === undefined ? {} : { body: spec.body }),
        ...(spec.headers === undefined ? {} : { headers: spec.headers }),
        ...(requests ? { requests } : {}),
      },
      (err, res) => {
        if (err) return reject(err);
        const durationSec = res.duration;
        resolve({
          title: spec.title,
          generator: 'autocannon (closed loop)',
          startedAt,
          endedAt: Date.now(),
          durationSec,
          connections: spec.connections,
          overallRate: null,
          requests: res.requests.total,
          ok: res['2xx'],
          non2xx: res.non2xx,
          errors: res.errors,
          timeouts: res.timeouts,
          okPerSec: res['2xx'] / durationSec,
          reqPerSec: res.requests.total / durationSec,
          latencyMs: {
            p50: res.latency.p50,
            p90: res.latency.p90,
            p99: res.latency.p99,
            max: res.latency.max,
            mean: res.latency.average,
          },
          statusCodes: Object.fromEntries(
            Object.entries(res.statusCodeStats ?? {}).map(([code, v]) => [
              code,
              (v as { count: number }).count,
            ]),
          ),
          okByTag,
        });
      },
    );
    stopAutocannon = () => instance.stop();
    send({ kind: 'started', at: startedAt });
  });
}

function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

async function paced(spec: LoadSpec, rate: number): Promise<LoadSummary> {
  const url = new URL(spec.url);
  const pool = new Pool(url.origin, {
    connections: spec.connections,
    pipelining: 1,
    keepAliveTimeout: 60_000,
    headersTimeout: (spec.timeoutSec ?? 10) * 1000,
    bodyTimeout: (spec.timeoutSec ?? 10) * 1000,
  });
  const cycle = spec.requests ?? [{ body: spec.body, headers: spec.headers }];
  const total = Math.round(rate * spec.durationSec);
  const interval = 1000 / rate;
  const latencies: number[] = [];
  const statusCodes: Record<string, number> = {};
  const okByTag: Record<string, number> = {};
  let ok = 0;
  let non2xx = 0;
  let errors = 0;
  let sent = 0;
  let finished = 0;
  const startedAt = Date.now();
  const t0 = performance.now();
  send({ kind: 'started', at: startedAt });

  await new Promise<void>((resolve) => {
    const settle = () => {
      finished++;
      if (finished === sent && (sent === total || stopRequested)) resolve();
    };
    const fire = (i: number, scheduled: number) => {
      const r = cycle[i % cycle.length]!;
      const id = spec.idReplacement ? randomUUID() : '';
      const fill = (s: string) => (spec.idReplacement ? s.replaceAll('[<id>]', id) : s);
      const headers = Object.fromEntries(
        Object.entries(r.headers ?? spec.headers ?? {}).map(([k, v]) => [k, fill(v)]),
      );
      const body = r.body ?? spec.body;
      pool
        .request({
          path: url.pathname + url.search,
          method: spec.method,
          headers,
          ...(body === undefined ? {} : { body: fill(body) }),
        })
        .then(async (res) => {
          await res.body.dump();
          latencies.push(performance.now() - scheduled);
          statusCodes[res.statusCode] = (statusCodes[res.statusCode] ?? 0) + 1;
          if (res.statusCode >= 200 && res.statusCode < 300) {
            ok++;
            if (r.tag !== undefined) okByTag[r.tag] = (okByTag[r.tag] ?? 0) + 1;
          } else non2xx++;
        })
        .catch(() => {
          errors++;
        })
        .finally(settle);
    };
    const tick = () => {
      const t = performance.now();
      while (sent < total && !stopRequested && t0 + sent * interval <= t) {
        fire(sent, t0 + sent * interval);
        sent++;
      }
      if (sent < total && !stopRequested)
        setTimeout(tick, Math.max(0, t0 + sent * interval - performance.now()));
      else if (finished === sent) resolve();
    };
    tick();
  });
  const durationSec = (performance.now() - t0) / 1000;
  await pool.close();
  latencies.sort((a, b) => a - b);
  const r1 = (v: number) => Math.round(v * 10) / 10;
  return {
    title: spec.title,
    generator: 'paced open loop (undici)',
    startedAt,
    endedAt: Date.now(),
    durationSec,
    connections: spec.connections,
    overallRate: rate,
    requests: sent,
    ok,
    non2xx,
    errors,
    timeouts: 0,
    okPerSec: ok / durationSec,
    reqPerSec: sent / durationSec,
    latencyMs: {
      p50: r1(quantile(latencies, 0.5)),
      p90: r1(quantile(latencies, 0.9)),
      p99: r1(quantile(latencies, 0.99)),
      max: r1(latencies.at(-1) ?? 0),
      mean: r1(latencies.reduce((a, b) => a + b, 0) / (latencies.length || 1)),
    },
    statusCodes,
    okByTag,
  };
}
