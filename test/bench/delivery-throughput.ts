// Delivery throughput with a standing backlog (issue 9, target 4): 4 fast endpoints (one receiver
// each) on order.created in one account. In each round the webhooks process is frozen (SIGSTOP),
// N orders are created (their events wait in JetStream), and the process is thawed: the rate at
// which the 4 × N deliveries then arrive is the project's drain rate. In the same round the bare
// pipeline (bare-pipeline.ts: JetStream → HMAC → undici POST → ack) publishes N events of the
// same envelope to a private stream and drains them to the same 4 receivers. Target: project ≥
// 0.5 × bare, medians of the rounds' ratios. Rate = the deliveries between the 5th and the 95th
// percentile arrival over the time between them (the steady part of the drain); the time from
// thaw (or the bare consumer's start) to the last arrival is shown too.
import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { streamNames } from '@mcs/kit/nats';
import type { Stack } from '@mcs/testkit';
import { connect } from 'nats';
import type { BarePipelineConfig, BarePipelineMessage } from './bare-pipeline.ts';
import { type CpuReport, cpuPerUnitTable, cpuTable, pooledCpu, stackCpuWindow } from './cpu.ts';
import {
  type Account,
  type BenchContext,
  type Benchmark,
  type Check,
  complaintNotes,
  createAccounts,
  createEndpoint,
  median,
  now,
  orderBody,
  orderHeaders,
  ordersCommitted,
  ratioOf,
  round,
  sleep,
  stackComplaints,
  startBenchStack,
  type Table,
  waitUntil,
} from './lib.ts';
import { runLoad } from './load.ts';
import { type BenchReceiver, EventLog, startReceivers } from './receiver.ts';

const ENDPOINTS = 4;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
/** Orders per round: 4 × this many deliveries of backlog. */
const BACKLOG = Number(process.env.BENCH_BACKLOG_ORDERS ?? 4_000);
const DRAIN_MS = 60_000;
const TARGET = 0.5;
/** The project's defaults, given to the bare pipeline too (see bare-pipeline.ts). */
const BARE_INFLIGHT = 32;
const BARE_PER_ENDPOINT = 8;

interface Drain {
  kind: 'project' | 'bare';
  round: number;
  expected: number;
  received: number;
  repeats: number;
  /** Deliveries/s between the 5th and 95th percentile arrival. */
  steadyPerSec: number | null;
  /** Deliveries / (last arrival − start). */
  overallPerSec: number | null;
  /** Start (thaw, or the bare consumer's start) → last arrival. */
  seconds: number | null;
  /** Backlog creation: orders/s (project) or publish ms (bare). */
  createdPerSec?: number;
  publishMs?: number;
  /** Whether the events were all in JetStream before the thaw (project). */
  settled?: string;
  cpu: CpuReport | null;
}

function rates(arrivals: number[], startAt: number) {
  const a = [...arrivals].sort((x, y) => x - y);
  const n = a.length;
  if (n < 20) return { steady: null, overall: null, seconds: null };
  const lo = Math.floor(n * 0.05);
  const hi = Math.ceil(n * 0.95) - 1;
  const span = (a[hi]! - a[lo]!) / 1000;
  const seconds = (a[n - 1]! - startAt) / 1000;
  return {
    steady: span > 0 ? (hi - lo) / span : null,
    overall: seconds > 0 ? n / seconds : null,
    seconds,
  };
}

/** Waits until the stack's stream stops growing (the relay has published the backlog). */
async function streamSettled(stack: Stack, signal: AbortSignal): Promise<string> {
  let nc: Awaited<ReturnType<typeof connect>> | undefined;
  try {
    nc = await connect({ servers: stack.nats.url });
    const jsm = await nc.jetstreamManager();
    const name = streamNames(stack.nats.prefix).stream;
    let last = -1;
    let stableSince = Date.now();
    const deadline = Date.now() + 15_000;
    while (Date.now() < deadline) {
      const seq = (await jsm.streams.info(name)).state.last_seq;
      if (seq !== last) {
        last = seq;
        stableSince = Date.now();
      } else if (Date.now() - stableSince >= 500) return `stream stable at seq ${seq}`;
      await sleep(100, signal);
    }
    return 'stream still growing after 15 s';
  } catch (err) {
    await sleep(2_000, signal);
    return `stream not readable (${(err as Error).message}); waited 2 s`;
  } finally {
    await nc?.close().catch(() => {});
  }
}

async function projectRound(
  ctx: BenchContext,
  stack: Stack,
  account: Account,
  logs: EventLog[],
  round: number,
): Promise<Drain> {
  const marker = `tput-r${round}`;
  const total = () => logs.reduce((s, l) => s + l.count(marker), 0);
  ctx.log(`delivery-throughput: round ${round}: project: webhooks frozen, ${BACKLOG} orders`);
  stack.signal('webhooks', 'SIGSTOP');
  ctx.defer('thaw webhooks', () => stack.signal('webhooks', 'SIGCONT'));
  let settled: string;
  let createdPerSec: number;
  try {
    const load = await runLoad(
      {
        title: `backlog r${round}`,
        url: `${stack.baseUrl}/v1/orders`,
        method: 'POST',
        connections: 32,
        durationSec: 20,
        amount: BACKLOG,
        body: orderBody(marker),
        headers: orderHeaders(account.secretKey, false),
      },
      { signal: ctx.signal },
    );
    createdPerSec = load.okPerSec;
    settled = await streamSettled(stack, ctx.signal);
  } finally {
    stack.signal('webhooks', 'SIGCONT');
  }
  const startAt = now();
  const cpu = stackCpuWindow(stack);
  const committed = await ordersCommitted(stack.db.url, account.id, marker);
  const expected = committed * ENDPOINTS;
  await waitUntil(() => total() >= expected, DRAIN_MS, ctx.signal);
  const cpuReport = cpu.end();
  const arrivals = logs.flatMap((l) => l.events(marker).map((e) => e.at));
  const r = rates(arrivals, startAt);
  return {
    kind: 'project',
    round,
    expected,
    received: arrivals.length,
    repeats: logs.reduce((s, l) => s + l.repeats, 0),
    steadyPerSec: r.steady,
    overallPerSec: r.overall,
    seconds: r.seconds,
    createdPerSec,
    settled,
    cpu: cpuReport,
  };
}

const BARE = fileURLToPath(new URL('./bare-pipeline.ts', import.meta.url));

async function bareRound(
  ctx: BenchContext,
  stack: Stack,
  receivers: BenchReceiver[],
  logs: EventLog[],
  template: string,
  round: number,
): Promise<Drain> {
  const marker = `bare-r${round}`;
  ctx.log(`delivery-throughput: round ${round}: bare pipeline, ${BACKLOG} events`);
  const stream = `benchbare_${randomBytes(5).toString('hex')}`;
  const cfg: BarePipelineConfig = {
    natsUrl: stack.nats.url,
    stream,
    receivers: receivers.map((r) => r.url),
    count: BACKLOG,
    template,
    marker,
    idPrefix: `evt_bare_${round}_${randomBytes(3).toString('hex')}_`,
    inflight: BARE_INFLIGHT,
    perEndpoint: BARE_PER_ENDPOINT,
    secret: randomBytes(24).toString('base64'),
  };
  const child = fork(BARE, [], {
    execPath: process.execPath,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  ctx.defer(`bare pipeline r${round}`, async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    const nc = await connect({ servers: stack.nats.url });
    await (await nc.jetstreamManager()).streams.delete(stream).catch(() => {});
    await nc.close();
  });
  let startAt = 0;
  let publishMs = 0;
  let cpu: ReturnType<typeof stackCpuWindow> | undefined;
  let cpuReport: CpuReport | null = null;
  await new Promise<void>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('the bare pipeline took over 60 s')), DRAIN_MS);
    const onAbort = () => {
      clearTimeout(t);
      reject(ctx.signal.reason);
    };
    ctx.signal.addEventListener('abort', onAbort, { once: true });
    child.on('message', (m: BarePipelineMessage) => {
      if (m.kind === 'published') publishMs = m.ms;
      else if (m.kind === 'consuming') {
        startAt = m.at;
        cpu = stackCpuWindow(stack);
      } else if (m.kind === 'done') {
        cpuReport = cpu?.end() ?? null;
        clearTimeout(t);
        ctx.signal.removeEventListener('abort', onAbort);
        if (m.failedPosts > 0) ctx.log(`bare pipeline: ${m.failedPosts} failed POSTs (retried)`);
        resolve();
      } else {
        clearTimeout(t);
        reject(new Error(`bare pipeline: ${m.message}`));
      }
    });
    child.once('exit', (code) => {
      clearTimeout(t);
      reject(new Error(`bare pipeline exited (${code}) before it was done`));
    });
    child.send(cfg);
  });
  const expected = BACKLOG * ENDPOINTS;
  await waitUntil(() => logs.reduce((s, l) => s + l.count(marker), 0) >= expected, 5_000, ctx.signal);
  const arrivals = logs.flatMap((l) => l.events(marker).map((e) => e.at));
  const r = rates(arrivals, startAt);
  return {
    kind: 'bare',
    round,
    expected,
    received: arrivals.length,
    repeats: logs.reduce((s, l) => s + l.repeats, 0),
    steadyPerSec: r.steady,
    overallPerSec: r.overall,
    seconds: r.seconds,
    publishMs,
    cpu: cpuReport,
  };
}

export const deliveryThroughput: Benchmark = {
  name: 'delivery-throughput',
  target: 4,
  title: `Delivery throughput: ${ENDPOINTS} endpoints draining a standing backlog vs the bare pipeline`,
  budgetMs: 240_000,
  expectedSec: 75,
  async run(ctx) {
    const receivers = await startReceivers(ENDPOINTS, 'ok', ctx.defer);
    const stack = await startBenchStack(ctx);
    const [account] = await createAccounts(stack, 1);
    for (const [i, r] of receivers.entries()) await createEndpoint(stack, account!, r.url, `throughput ${i}`);
    const logs = receivers.map((r) => new EventLog(r));

    ctx.log('delivery-throughput: warm-up, 3 s at 150 orders/s');
    const warm = await runLoad(
      {
        title: 'warm-up',
        url: `${stack.baseUrl}/v1/orders`,
        method: 'POST',
        connections: 16,
        durationSec: 3,
        overallRate: 150,
        body: orderBody('warmup'),
        headers: orderHeaders(account!.secretKey, false),
      },
      { signal: ctx.signal },
    );
    await waitUntil(
      () => logs.reduce((s, l) => s + l.count('warmup'), 0) >= warm.ok * ENDPOINTS,
      15_000,
      ctx.signal,
    );
    const template = logs[0]!.sampleBody;
    if (!template) throw new Error('no delivery arrived during the warm-up: nothing to drain');

    const drains: Drain[] = [];
    for (let r = 1; r <= ROUNDS; r++) {
      if (r % 2 === 1) {
        drains.push(await projectRound(ctx, stack, account!, logs, r));
        drains.push(await bareRound(ctx, stack, receivers, logs, template, r));
      } else {
        drains.push(await bareRound(ctx, stack, receivers, logs, template, r));
        drains.push(await projectRound(ctx, stack, account!, logs, r));
      }
    }
    const of = (kind: Drain['kind']) => drains.filter((d) => d.kind === kind);
    const ratios = Array.from({ length: ROUNDS }, (_, i) =>
      ratioOf(
        drains.find((d) => d.kind === 'project' && d.round === i + 1)?.steadyPerSec,
        drains.find((d) => d.kind === 'bare' && d.round === i + 1)?.steadyPerSec,
      ),
    );
    const ratio = median(ratios);
    const lost = drains.filter((d) => d.received < d.expected);
    const voidNote = lost.length
      ? `void: not all delivered: ${lost.map((d) => `r${d.round} ${d.kind} ${d.received}/${d.expected}`).join(', ')}`
      : undefined;
    const checks: Check[] = [
      {
        label: `drain deliveries/s (${ENDPOINTS} endpoints) vs bare pipeline`,
        project: round(median(of('project').map((d) => d.steadyPerSec)), 0),
        baseline: round(median(of('bare').map((d) => d.steadyPerSec)), 0),
        ratio,
        target: `≥ ${TARGET}`,
        pass: voidNote || ratio === null ? null : ratio >= TARGET,
        ...(voidNote ? { note: voidNote } : {}),
      },
    ];
    const tables: Table[] = [
      {
        title: `Delivery throughput: ${ENDPOINTS} endpoints × order.created, a backlog of ${BACKLOG} events (${BACKLOG * ENDPOINTS} deliveries) per round`,
        columns: [
          'round',
          'pipeline',
          'delivered',
          'expected',
          'steady deliveries/s',
          'start → last, s',
          'deliveries/s start → last',
          'backlog made',
        ],
        rows: drains.map((d) => [
          d.round,
          d.kind === 'project' ? 'project (thawed webhooks)' : 'bare JetStream → HMAC → undici → ack',
          d.received,
          d.expected,
          round(d.steadyPerSec, 0),
          round(d.seconds, 2),
          round(d.overallPerSec, 0),
          d.kind === 'project'
            ? `${round(d.createdPerSec, 0)} orders/s; ${d.settled}`
            : `published in ${round(d.publishMs, 0)} ms`,
        ]),
        notes: [
          `ratio per round: ${ratios.map((v) => round(v, 2) ?? '–').join(', ')} → median ${round(ratio, 2) ?? '–'}`,
          `bare pipeline: ${BARE_INFLIGHT} messages in flight, ${BARE_PER_ENDPOINT} connections per receiver (the project's defaults)`,
          `repeats (an event delivered twice to one receiver): ${Math.max(0, ...drains.map((d) => d.repeats))}`,
          ...complaintNotes(stack),
        ],
      },
      cpuTable(
        [
          { name: 'project drain', cpu: pooledCpu(of('project').map((d) => d.cpu)) },
          { name: 'bare drain', cpu: pooledCpu(of('bare').map((d) => d.cpu)) },
        ],
        'CPU during the drains, mean over the rounds',
      ),
      cpuPerUnitTable(
        [
          {
            name: 'project drain',
            cpu: pooledCpu(of('project').map((d) => d.cpu)),
            units: of('project').reduce((s, d) => s + d.received, 0),
          },
          {
            name: 'bare drain',
            cpu: pooledCpu(of('bare').map((d) => d.cpu)),
            units: of('bare').reduce((s, d) => s + d.received, 0),
          },
        ],
        'delivery',
        'CPU ms per delivery during the drains, by process group, pooled over the rounds',
      ),
    ];
    return {
      checks,
      tables,
      data: {
        stackLog: stackComplaints(stack),
        endpoints: ENDPOINTS,
        backlog: BACKLOG,
        drains,
        ratios,
        ratio,
      },
    };
  },
};
