// What each part's garbage collector does per request: young-generation bytes allocated, bytes
// promoted to the old generation by scavenges, bytes allocated in the old generation at once,
// and the number of scavenges and full collections, by part, over a paced run. Old-generation
// growth is what brings the full collections that set scenario 2's latency tail
// (docs/performance.md); this is the tool that measures it for one change at a time.
//
//   node test/bench/gc-per-request.ts                 keyed POST /v1/orders, one endpoint on "*"
//   node test/bench/gc-per-request.ts --get           GET /v1/orders/{id} of one order
//   node test/bench/gc-per-request.ts --no-key --no-endpoint
//   GC_RATE=1500 GC_SEC=10 node test/bench/gc-per-request.ts
//
// A fresh stack (as `pnpm bench` starts it), a 10-second closed-loop warm-up, 3 s at the rate,
// then the measured run. Every part loads gc-counters.mjs (`--import`); BENCH_NODE_OPTIONS is
// added after it. Not a benchmark with a target: it prints numbers to compare, and runs alone
// on a quiet machine like `pnpm bench`.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startStack } from '@mcs/testkit';
import { BENCH_ENV, createAccounts, createEndpoint, orderBody, orderHeaders } from './lib.ts';
import { type LoadSpec, runLoad } from './load.ts';
import { startReceivers } from './receiver.ts';

const RATE = Number(process.env.GC_RATE ?? 1500);
const SEC = Number(process.env.GC_SEC ?? 10);
const args = new Set(process.argv.slice(2));
const PARTS = ['gateway', 'commerce', 'webhooks'] as const;

interface Totals {
  young: number;
  promoted: number;
  direct: number;
  scavenges: number;
  full: number;
}

const dir = mkdtempSync(path.join(os.tmpdir(), 'mcs-gc-'));
const preload = new URL('./gc-counters.mjs', import.meta.url).pathname;
const cleanups: Array<() => unknown> = [];
const signal = new AbortController().signal;
const settle = () => new Promise((r) => setTimeout(r, 1_200)); // two counter writes
const read = (): Record<string, Totals> =>
  Object.fromEntries(PARTS.map((p) => [p, JSON.parse(readFileSync(path.join(dir, `${p}.json`), 'utf8'))]));

try {
  const [receiver] = await startReceivers(1, 'ok', (_label, fn) => cleanups.push(fn));
  const nodeOptions = [`--import ${preload}`, process.env.BENCH_NODE_OPTIONS ?? ''].join(' ').trim();
  const stack = await startStack({
    env: { ...BENCH_ENV, NODE_OPTIONS: nodeOptions, MCS_GC_COUNTERS_DIR: dir },
  });
  cleanups.unshift(() => stack.stop());
  const [account] = await createAccounts(stack, 1);
  if (!args.has('--no-endpoint')) await createEndpoint(stack, account!, receiver!.url, 'gc', ['*']);
  let url = `${stack.baseUrl}/v1/orders`;
  let method: 'GET' | 'POST' = 'POST';
  if (args.has('--get')) {
    const res = await fetch(url, {
      method: 'POST',
      headers: orderHeaders(account!.secretKey, false),
      body: orderBody('gc'),
    });
    if (res.status !== 200) throw new Error(`creating the order answered ${res.status}`);
    url = `${url}/${((await res.json()) as { id: string }).id}`;
    method = 'GET';
  }
  const spec = (durationSec: number, overallRate?: number): LoadSpec => ({
    title: 'gc',
    url,
    method,
    connections: 32,
    durationSec,
    ...(overallRate ? { overallRate } : {}),
    ...(method === 'POST' ? { body: orderBody('gc'), idReplacement: true } : {}),
    headers: orderHeaders(account!.secretKey, method === 'POST' && !args.has('--no-key')),
  });
  await runLoad(spec(10), { signal });
  await runLoad(spec(3, RATE), { signal });
  await settle();
  const before = read();
  const run = await runLoad(spec(SEC, RATE), { signal });
  await settle();
  const after = read();
  const n = run.ok + run.non2xx;
  console.log(
    `${method} ${new URL(url).pathname} at ${RATE}/s for ${SEC} s: ${run.ok} 2xx, ${run.non2xx} other; ` +
      `p50 ${run.latencyMs.p50} ms, p99 ${run.latencyMs.p99} ms`,
  );
  console.log('part       young KB/req  promoted B/req  direct B/req  scavenges  full');
  for (const p of PARTS) {
    const d = (k: keyof Totals) => after[p]![k] - before[p]![k];
    console.log(
      `${p.padEnd(9)} ${(d('young') / n / 1024).toFixed(1).padStart(13)} ${(d('promoted') / n).toFixed(0).padStart(15)}` +
        ` ${(d('direct') / n).toFixed(0).padStart(13)} ${String(d('scavenges')).padStart(10)} ${String(d('full')).padStart(5)}`,
    );
  }
} finally {
  for (const fn of cleanups) await fn();
  rmSync(dir, { recursive: true, force: true });
}
