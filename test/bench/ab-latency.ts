// A/B of scenario 2's tail for one change at a time: two stacks up side by side (A and B, each
// with its own extra environment), the bare one-statement server beside them, and paced keyed
// runs alternated round by round — bare, A, bare, B, then B first in the next round. On this VM
// the machine's speed drifts within minutes (the bare server's own p99 ranged 5–144 ms between
// 6-second rounds of one afternoon), so separate `pnpm bench ingest-latency` runs of each arm
// compare minutes more than changes; here both arms share every minute (docs/performance.md).
//
//   AB_A="" AB_B="WEBHOOK_NICE=0" node test/bench/ab-latency.ts
//   AB_B="NODE_OPTIONS=--v8-pool-size=1" AB_RATE=850 AB_ROUNDS=10 node test/bench/ab-latency.ts
//
// AB_A / AB_B: `K=V;K2=V2` for every part of that stack (on top of BENCH_STACK_ENV). AB_RATE:
// keyed orders/s (default 1000; set it to half the keyed maximum of the day). One webhook
// endpoint on "*" per stack, as in scenario 2. AB_PIN_A / AB_PIN_B: `part=cpus;…` pins those
// parts of that stack (every thread) with taskset, e.g. AB_PIN_B="gateway=0;commerce=0". Prints
// each round and the medians; not a benchmark with a target. Run it alone on a quiet machine,
// like `pnpm bench`.
import { execFileSync } from 'node:child_process';
import type { Part } from '@mcs/testkit';
import { startBare } from './ingest.ts';
import {
  type BenchContext,
  createAccounts,
  createEndpoint,
  median,
  orderBody,
  orderHeaders,
  ratioOf,
  settleDisk,
  sleep,
  startBenchStack,
  waitUntil,
} from './lib.ts';
import { type LoadSpec, runLoad } from './load.ts';
import { startReceivers } from './receiver.ts';

const RATE = Number(process.env.AB_RATE ?? 1000);
const SEC = Number(process.env.AB_SEC ?? 6);
const ROUNDS = Number(process.env.AB_ROUNDS ?? 8);

/** `K=V;K2=V2` → an environment. */
function envOf(spec: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const pair of spec.split(';')) {
    const i = pair.indexOf('=');
    if (i > 0) env[pair.slice(0, i).trim()] = pair.slice(i + 1).trim();
  }
  return env;
}

const cleanups: Array<() => unknown> = [];
const ctx: BenchContext = {
  signal: new AbortController().signal,
  defer: (_label, fn) => cleanups.push(fn),
  log: (message) => console.error(message),
  selected: new Set(),
  shared: new Map(),
  ready() {},
};

const keyed = (url: string, key: string, title: string, sec: number, rate?: number): LoadSpec => ({
  title,
  url: `${url}/v1/orders`,
  method: 'POST',
  connections: 32,
  durationSec: sec,
  ...(rate ? { overallRate: rate } : {}),
  body: orderBody(title),
  headers: orderHeaders(key, true),
  idReplacement: true,
});

try {
  const [receiver] = await startReceivers(1, 'ok', ctx.defer);
  const arms: Array<{ name: string; url: string; key: string; db: string }> = [];
  for (const [name, spec] of [
    ['A', process.env.AB_A ?? ''],
    ['B', process.env.AB_B ?? ''],
  ] as const) {
    const stack = await startBenchStack(ctx, envOf(spec));
    const [account] = await createAccounts(stack, 1);
    await createEndpoint(stack, account!, receiver!.url, `ab-latency ${name}`, ['*']);
    arms.push({ name, url: stack.baseUrl, key: account!.secretKey, db: stack.db.url });
    for (const [part, cpus] of Object.entries(envOf(process.env[`AB_PIN_${name}`] ?? ''))) {
      const pid = stack.pid(part as Part);
      if (pid) execFileSync('taskset', ['-a', '-p', '-c', cpus, String(pid)], { stdio: 'ignore' });
      ctx.log(`${name}: ${part} (${pid}) on CPU ${cpus}`);
    }
    ctx.log(`${name}: ${spec || '(as committed)'}`);
  }
  // Warm both the way scenario 2 does: closed loop, then briefly at the rate.
  for (const a of arms) await runLoad(keyed(a.url, a.key, 'warm-up', 15), { signal: ctx.signal });
  await settleDisk(arms[0]!.db); // the warm-up's dirty pages now, not 30 s later in a round
  const bare = await startBare(ctx, arms[0]!.db);
  await runLoad(keyed(bare.url, 'unused', 'bare warm-up', 3, RATE), { signal: ctx.signal });
  for (const a of arms) await runLoad(keyed(a.url, a.key, 'warm-up', 2, RATE), { signal: ctx.signal });
  await sleep(3_000); // the warm-ups' last deliveries

  const p99: Record<string, number[]> = { A: [], B: [] };
  const ratios: Record<string, Array<number | null>> = { A: [], B: [] };
  for (let r = 1; r <= ROUNDS; r++) {
    for (const a of r % 2 ? arms : [...arms].reverse()) {
      await sleep(1_500);
      const b = await runLoad(keyed(bare.url, 'unused', `bare r${r}`, SEC, RATE), { signal: ctx.signal });
      await sleep(1_500);
      receiver!.arrivals.length = 0; // the bodies are not looked at: none piles up in this heap
      const p = await runLoad(keyed(a.url, a.key, `${a.name} r${r}`, SEC, RATE), { signal: ctx.signal });
      // The next bare round starts once this run's deliveries are in, as in scenario 2.
      const delivered = await waitUntil(() => receiver!.arrivals.length >= p.ok, 15_000, ctx.signal);
      const ratio = ratioOf(p.latencyMs.p99, b.latencyMs.p99);
      p99[a.name]!.push(p.latencyMs.p99);
      ratios[a.name]!.push(ratio);
      const failed = p.non2xx + p.errors + p.timeouts;
      console.log(
        `round ${r} ${a.name}: p50 ${p.latencyMs.p50} p99 ${p.latencyMs.p99} ms` +
          ` | bare p50 ${b.latencyMs.p50} p99 ${b.latencyMs.p99} ms | ratio ${ratio?.toFixed(2)}` +
          (failed ? ` | ${failed} failed` : '') +
          (delivered ? '' : ` | ${receiver!.arrivals.length} of ${p.ok} delivered after 15 s`),
      );
    }
  }
  for (const name of ['A', 'B'])
    console.log(
      `${name}: p99 median ${median(p99[name]!)} ms, ratio median ${median(ratios[name]!)?.toFixed(2)}` +
        ` (rounds ${ratios[name]!.map((x) => x?.toFixed(2)).join(', ')})`,
    );
} finally {
  for (const fn of cleanups.reverse()) await fn();
}
