// Isolation: does a healthy endpoint keep its throughput and latency while 20 endpoints hang
// (never answer; WEBHOOK_TIMEOUT=2s ends each attempt) and 20 answer 500? 41 accounts, one
// endpoint each. Every phase sends the same order mix, closed loop: half to the healthy account,
// half spread over the 40 others. Phase A: the 40 have no endpoints; phase B: they have the bad
// ones; phase A′: those deleted again (a check on drift between phases). docs/design.md target: bad
// endpoints cost the healthy one ≤ 10 % throughput.
import type { Stack } from '@mcs/testkit';
import { type CpuReport, cpuTable, cpuWindow } from './cpu.ts';
import { type Stages, stages } from './delivery-latency.ts';
import {
  type Account,
  api,
  type BenchContext,
  type Benchmark,
  complaintNotes,
  createAccounts,
  createEndpoint,
  databaseName,
  now,
  orderBody,
  orderHeaders,
  ordersCommitted,
  pct,
  poolSampler,
  round,
  type Summary,
  stackComplaints,
  startBenchStack,
  summarize,
  type Table,
  waitUntil,
} from './lib.ts';
import { type LoadRequest, type LoadSummary, runLoad } from './load.ts';
import { type BenchReceiver, EventLog, startReceivers } from './receiver.ts';

const HANGING = 20;
const FAILING = 20;
const MEASURE_SEC = 10;
const WARMUP_SEC = 5;
const CONNECTIONS = 32;
const DRAIN_MS = 15_000;
const TARGET_COST = 0.1;

interface Phase {
  name: string;
  load: LoadSummary;
  healthyOrders: number;
  healthyDelivered: number;
  /** Healthy deliveries that arrived while the orders came in, per second. */
  healthyPerSecWhileLoading: number;
  /** All healthy deliveries of the phase over load start → last arrival. */
  healthyPerSecOverall: number;
  drained: boolean;
  latency: Summary;
  stages: Stages | null;
  badAttempts: { hanging: number; failing: number };
  cpu: CpuReport | null;
  /** The webhooks service's database sessions during the load. */
  webhooksPool: Record<string, number>;
}

function mix(healthy: Account, others: Account[], marker: string): LoadRequest[] {
  // Each connection walks this cycle: healthy, other 1, healthy, other 2, …
  return others.flatMap((o) => [
    { body: orderBody(marker), headers: orderHeaders(healthy.secretKey, false), tag: 'healthy' },
    { body: orderBody(marker), headers: orderHeaders(o.secretKey, false), tag: 'other' },
  ]);
}

async function phase(
  ctx: BenchContext,
  stack: Stack,
  healthy: Account,
  others: Account[],
  log: EventLog,
  bad: BenchReceiver[],
  name: string,
  marker: string,
  seconds: number,
): Promise<Phase> {
  const badCount = (mode: 'hang' | 'fail') =>
    bad.filter((r) => r.mode === mode).reduce((s, r) => s + r.count, 0);
  const before = { hanging: badCount('hang'), failing: badCount('fail') };
  let loadStart = 0;
  let loadEnd = 0;
  let cpu: ReturnType<typeof cpuWindow> | undefined;
  let cpuReport: CpuReport | null = null;
  const sampler = await poolSampler(stack.db.url);
  const load = await runLoad(
    {
      title: name,
      url: `${stack.baseUrl}/v1/orders`,
      method: 'POST',
      connections: CONNECTIONS,
      durationSec: seconds,
      requests: mix(healthy, others, marker),
    },
    {
      signal: ctx.signal,
      onStart: () => {
        loadStart = now();
        cpu = cpuWindow(databaseName(stack.db.url));
      },
      onEnd: () => {
        loadEnd = now();
        cpuReport = cpu?.end() ?? null;
      },
    },
  );
  const pool = await sampler.stop();
  const healthyOrders = await ordersCommitted(stack.db.url, healthy.id, marker);
  const drained = await waitUntil(() => log.count(marker) >= healthyOrders, DRAIN_MS, ctx.signal);
  const events = log.events(marker);
  const arrivals = events.map((e) => e.at).sort((a, b) => a - b);
  const inWindow = arrivals.filter((t) => t >= loadStart && t <= loadEnd).length;
  const last = arrivals.at(-1) ?? loadEnd;
  return {
    name,
    load,
    healthyOrders,
    healthyDelivered: events.length,
    healthyPerSecWhileLoading: inWindow / ((loadEnd - loadStart) / 1000),
    healthyPerSecOverall: arrivals.length / ((last - loadStart) / 1000),
    drained,
    latency: summarize(events.map((e) => e.at - e.createdAt)),
    stages: await stages(stack, events),
    badAttempts: { hanging: badCount('hang') - before.hanging, failing: badCount('fail') - before.failing },
    cpu: cpuReport,
    webhooksPool: pool.byApp['mcs-webhooks'] ?? {},
  };
}

/** Mean sessions of the webhooks pool by state, one row per state seen. */
function poolRows(phases: Phase[]): Array<Array<string | number | null>> {
  const states = [...new Set(phases.flatMap((p) => Object.keys(p.webhooksPool)))].sort();
  return states.map((s) => [`webhooks db sessions: ${s}`, ...phases.map((p) => p.webhooksPool[s] ?? 0)]);
}

export const isolation: Benchmark = {
  name: 'isolation',
  title: `Isolation: ${HANGING} hanging + ${FAILING} failing endpoints vs 1 healthy`,
  budgetMs: 90_000,
  expectedSec: 60,
  async run(ctx) {
    const [healthyReceiver] = await startReceivers(1, 'ok', ctx.defer);
    const hanging = await startReceivers(HANGING, 'hang', ctx.defer);
    const failing = await startReceivers(FAILING, 'fail', ctx.defer);
    const bad = [...hanging, ...failing];
    const stack = await startBenchStack(ctx, { WEBHOOK_TIMEOUT: '2s' });
    const accounts = await createAccounts(stack, 1 + bad.length);
    const [healthy, ...others] = accounts as [Account, ...Account[]];
    await createEndpoint(stack, healthy, healthyReceiver!.url, 'healthy');
    const log = new EventLog(healthyReceiver!);

    ctx.log(`isolation: warm-up, ${WARMUP_SEC} s`);
    await phase(ctx, stack, healthy, others, log, bad, 'warm-up', 'warmup', WARMUP_SEC);
    const phases: Phase[] = [];
    ctx.log(`isolation: phase A, no bad endpoints, ${MEASURE_SEC} s`);
    phases.push(await phase(ctx, stack, healthy, others, log, bad, 'A: healthy only', 'phaseA', MEASURE_SEC));

    const badIds = await Promise.all(
      bad.map((r, i) => createEndpoint(stack, others[i]!, r.url, `${r.mode} ${i}`)),
    );
    ctx.log(`isolation: phase B, with ${HANGING} hanging and ${FAILING} failing endpoints, ${MEASURE_SEC} s`);
    phases.push(
      await phase(ctx, stack, healthy, others, log, bad, 'B: + bad endpoints', 'phaseB', MEASURE_SEC),
    );

    await Promise.all(
      badIds.map(async (id, i) => {
        const res = await api(stack, others[i]!.secretKey, 'DELETE', `/v1/webhooks/${id}`);
        if (res.status !== 200) ctx.log(`could not delete ${id}: ${res.status} ${res.text}`);
      }),
    );
    ctx.log(`isolation: phase A′, bad endpoints deleted, ${MEASURE_SEC} s`);
    phases.push(
      await phase(ctx, stack, healthy, others, log, bad, 'A′: deleted again', 'phaseA2', MEASURE_SEC),
    );

    const [a, b, a2] = phases as [Phase, Phase, Phase];
    const baseline = (a.healthyPerSecWhileLoading + a2.healthyPerSecWhileLoading) / 2;
    const ratio = baseline > 0 ? b.healthyPerSecWhileLoading / baseline : null;
    const cost = ratio === null ? null : 1 - ratio;
    const met = cost !== null && cost <= TARGET_COST;
    const drift =
      a.healthyPerSecWhileLoading > 0 ? a2.healthyPerSecWhileLoading / a.healthyPerSecWhileLoading - 1 : null;

    const tables: Table[] = [
      {
        title: `Isolation: 1 healthy endpoint; ${HANGING} hanging + ${FAILING} failing endpoints in phase B (WEBHOOK_TIMEOUT=2s); orders closed loop on ${CONNECTIONS} connections, ${MEASURE_SEC} s per phase, half to the healthy account`,
        columns: ['measure', ...phases.map((p) => p.name)],
        rows: [
          ['orders/s, all accounts (2xx)', ...phases.map((p) => round(p.load.okPerSec, 0))],
          ['healthy orders committed', ...phases.map((p) => p.healthyOrders)],
          ['healthy deliveries', ...phases.map((p) => p.healthyDelivered)],
          ['healthy deliveries/s while loading', ...phases.map((p) => round(p.healthyPerSecWhileLoading, 0))],
          ['healthy deliveries/s, start → last', ...phases.map((p) => round(p.healthyPerSecOverall, 0))],
          ['healthy latency p50 ms', ...phases.map((p) => round(p.latency.p50))],
          ['healthy latency p95 ms', ...phases.map((p) => round(p.latency.p95))],
          ['healthy latency p99 ms', ...phases.map((p) => round(p.latency.p99))],
          ['  p50: created_at → consumer has event', ...phases.map((p) => round(p.stages?.toConsumer.p50))],
          ['  p50: consumer → attempt starts', ...phases.map((p) => round(p.stages?.toAttempt.p50))],
          ['  p50: attempt → receiver', ...phases.map((p) => round(p.stages?.toReceiver.p50))],
          ['POST /v1/orders p50 ms', ...phases.map((p) => p.load.latencyMs.p50)],
          ...poolRows(phases),
          ['attempts at hanging receivers', ...phases.map((p) => p.badAttempts.hanging)],
          ['attempts at failing receivers', ...phases.map((p) => p.badAttempts.failing)],
        ],
        notes: [
          `healthy throughput with bad endpoints: ${pct(ratio)} of the mean of A and A′ → cost ${pct(cost)}; ` +
            `target cost ≤ ${pct(TARGET_COST)}: ${met ? 'MET' : 'MISSED'}`,
          `drift between A and A′: ${pct(drift)} (the noise floor of this comparison)`,
          ...phases
            .filter((p) => !p.drained)
            .map((p) => `${p.name}: NOT all healthy deliveries arrived within ${DRAIN_MS / 1000} s`),
          ...complaintNotes(stack),
        ],
      },
      cpuTable(phases, 'CPU'),
    ];
    return {
      checks: [
        {
          label: 'healthy endpoint throughput lost to bad endpoints (docs/design.md)',
          project: round(b.healthyPerSecWhileLoading, 0),
          baseline: round(baseline, 0),
          ratio,
          target: `cost ≤ ${pct(TARGET_COST)}`,
          pass: cost === null ? null : met,
        },
      ],
      tables,
      data: {
        stackLog: stackComplaints(stack),
        hanging: HANGING,
        failing: FAILING,
        measureSec: MEASURE_SEC,
        connections: CONNECTIONS,
        phases,
        healthyThroughputRatio: ratio,
        cost,
        targetCost: TARGET_COST,
        targetMet: met,
        driftAtoA2: drift,
      },
    };
  },
};
