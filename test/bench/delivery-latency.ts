// Delivery latency end to end (issue 9, target 3): one endpoint subscribed to order.created,
// keyed orders paced at 200/s for 60 s, and for each event the time from the order's created_at
// (in the delivered envelope; taken before the order's insert, so the order transaction counts
// too) to the receiver's first byte (its request event). Targets: p50 ≤ 10 ms, p99 ≤ 50 ms, and a
// count check: every order created is delivered (distinct events); a run failing it is void and
// FAILS. Where the time goes comes from the webhooks service's own rows (read-only): when the
// consumer took the event (delivery created_at) and when the first attempt started (attempts.at);
// that breakdown is best effort (shown as – if those tables change).
import type { Stack } from '@mcs/testkit';
import { type CpuReport, cpuPerUnitTable, cpuTable, stackCpuWindow } from './cpu.ts';
import {
  type Account,
  type BenchContext,
  type Benchmark,
  type Check,
  complaintNotes,
  createAccounts,
  createEndpoint,
  orderBody,
  orderHeaders,
  ordersCommitted,
  queryDb,
  round,
  type Summary,
  stackComplaints,
  startBenchStack,
  summarize,
  type Table,
  waitUntil,
} from './lib.ts';
import { type LoadSummary, runLoad } from './load.ts';
import { type Delivered, EventLog, startReceivers } from './receiver.ts';

const RATE = Number(process.env.BENCH_DELIVERY_RATE ?? 200);
const MEASURE_SEC = Number(process.env.BENCH_DELIVERY_SEC ?? 60);
const DRAIN_MS = 15_000;
const TARGET_P50_MS = 10;
const TARGET_P99_MS = 50;

export interface Stages {
  /** created_at → the webhooks consumer has the event (order commit, relay, JetStream). */
  toConsumer: Summary;
  /** consumer → first attempt starts (event + deliveries recorded, ack, queue). */
  toAttempt: Summary;
  /** attempt start → the receiver's first byte (claim, sign, HTTP). */
  toReceiver: Summary;
}

/** The webhooks service's timestamps of the given events, read from its schema. */
export async function stages(stack: Stack, delivered: Delivered[]): Promise<Stages | null> {
  try {
    const rows = await queryDb<{ id: string; created: number; recorded: number; attempt: number | null }>(
      stack.db.url,
      `select e.id,
              extract(epoch from e.created_at) * 1000 as created,
              extract(epoch from d.created_at) * 1000 as recorded,
              extract(epoch from a.at) * 1000 as attempt
         from webhooks.events e
         join webhooks.deliveries d on d.event_id = e.id
         left join webhooks.attempts a on a.delivery_id = d.id and a.number = 1
        where e.id = any($1)`,
      [delivered.map((d) => d.eventId)],
    );
    const arrival = new Map(delivered.map((d) => [d.eventId, d.firstByteAt]));
    const toConsumer: number[] = [];
    const toAttempt: number[] = [];
    const toReceiver: number[] = [];
    for (const r of rows) {
      const created = Number(r.created);
      const recorded = Number(r.recorded);
      toConsumer.push(recorded - created);
      if (r.attempt !== null) {
        toAttempt.push(Number(r.attempt) - recorded);
        toReceiver.push(arrival.get(r.id)! - Number(r.attempt));
      }
    }
    return {
      toConsumer: summarize(toConsumer),
      toAttempt: summarize(toAttempt),
      toReceiver: summarize(toReceiver),
    };
  } catch (err) {
    process.stderr.write(`latency stages unavailable: ${(err as Error).message}\n`);
    return null;
  }
}

interface Phase {
  name: string;
  /** Nominal length of the load (its last answers may come later). */
  seconds: number;
  load: LoadSummary;
  committed: number;
  delivered: number;
  repeats: number;
  /** Whether every committed order's event arrived within DRAIN_MS of the load's end. */
  drained: boolean;
  /** Last arrival minus the load generator's last answer (negative: all were in before it). */
  lastArrivalAfterLoadMs: number | null;
  /** created_at → the receiver's first byte. */
  latency: Summary;
  /** created_at → the whole request had arrived. */
  latencyWhole: Summary;
  stages: Stages | null;
  cpu: CpuReport | null;
}

/** Sends orders marked `marker`, waits for their deliveries, and measures them. */
export async function latencyPhase(
  ctx: BenchContext,
  stack: Stack,
  account: Account,
  log: EventLog,
  opts: { name: string; marker: string; rate: number; seconds: number; connections: number },
): Promise<Phase> {
  let cpu: ReturnType<typeof stackCpuWindow> | undefined;
  let cpuReport: CpuReport | null = null;
  const load = await runLoad(
    {
      title: opts.name,
      url: `${stack.baseUrl}/v1/orders`,
      method: 'POST',
      connections: opts.connections,
      durationSec: opts.seconds,
      overallRate: opts.rate,
      body: orderBody(opts.marker),
      headers: orderHeaders(account.secretKey, true),
      idReplacement: true,
    },
    {
      signal: ctx.signal,
      onStart: () => {
        cpu = stackCpuWindow(stack);
      },
      onEnd: () => {
        cpuReport = cpu?.end() ?? null;
      },
    },
  );
  const committed = await ordersCommitted(stack.db.url, account.id, opts.marker);
  const drained = await waitUntil(() => log.count(opts.marker) >= committed, DRAIN_MS, ctx.signal);
  const events = log.events(opts.marker);
  return {
    name: opts.name,
    seconds: opts.seconds,
    load,
    committed,
    delivered: events.length,
    repeats: log.repeats,
    drained,
    lastArrivalAfterLoadMs: events.length
      ? round(Math.max(...events.map((e) => e.at)) - load.endedAt, 0)
      : null,
    latency: summarize(events.map((e) => e.firstByteAt - e.createdAt)),
    latencyWhole: summarize(events.map((e) => e.at - e.createdAt)),
    stages: await stages(stack, events),
    cpu: cpuReport,
  };
}

function phaseTable(phase: Phase): Table {
  const l = phase.latency;
  const st = phase.stages;
  const row = (name: string, s: Summary | undefined) => [
    name,
    round(s?.p50),
    round(s?.p95),
    round(s?.p99),
    round(s?.max),
    s?.count ?? null,
  ];
  return {
    title: `Delivery latency at ${phase.name} for ${phase.seconds} s (paced), 1 endpoint, Idempotency-Key on each order`,
    columns: ['measure', 'p50 ms', 'p95 ms', 'p99 ms', 'max ms', 'count'],
    rows: [
      row('created_at → receiver first byte (total)', l),
      row('created_at → whole request received', phase.latencyWhole),
      row('  created_at → consumer has event', st?.toConsumer),
      row('  consumer → attempt starts', st?.toAttempt),
      row('  attempt → receiver', st?.toReceiver),
      [
        'POST /v1/orders answer (client)',
        phase.load.latencyMs.p50,
        null,
        phase.load.latencyMs.p99,
        phase.load.latencyMs.max,
        phase.load.ok,
      ],
    ],
    notes: [
      `orders committed ${phase.committed} (2xx ${phase.load.ok}, non-2xx ${phase.load.non2xx}, errors ${phase.load.errors}), ` +
        `delivered ${phase.delivered}${phase.repeats ? `, repeats ${phase.repeats}` : ''}; ` +
        (phase.drained
          ? (phase.lastArrivalAfterLoadMs ?? 0) > 0
            ? `the last arrived ${phase.lastArrivalAfterLoadMs} ms after the last answer`
            : 'all had arrived by the last answer'
          : `NOT all delivered within ${DRAIN_MS / 1000} s`),
      ...(phase.load.durationSec > phase.seconds * 1.1
        ? [
            `the last answer came ${round(phase.load.durationSec - phase.seconds)} s after the schedule ended: ingest could not ` +
              'keep up with this rate, so these latencies are mostly queueing',
          ]
        : []),
    ],
  };
}

export const deliveryLatency: Benchmark = {
  name: 'delivery-latency',
  target: 3,
  title: `Delivery latency end to end: order committed → receiver's first byte at ${RATE} orders/s`,
  budgetMs: (MEASURE_SEC + 75) * 1000,
  expectedSec: MEASURE_SEC + 20,
  async run(ctx) {
    const [receiver] = await startReceivers(1, 'ok', ctx.defer);
    const stack = await startBenchStack(ctx);
    const [account] = await createAccounts(stack, 1);
    await createEndpoint(stack, account!, receiver!.url, 'latency');
    const log = new EventLog(receiver!);

    ctx.log('delivery-latency: warm-up, 3 s at 100 orders/s');
    await latencyPhase(ctx, stack, account!, log, {
      name: 'warm-up',
      marker: 'warmup',
      rate: 100,
      seconds: 3,
      connections: 16,
    });
    ctx.log(`delivery-latency: ${MEASURE_SEC} s at ${RATE} orders/s`);
    const main = await latencyPhase(ctx, stack, account!, log, {
      name: `${RATE} orders/s`,
      marker: `latency-${RATE}`,
      rate: RATE,
      seconds: MEASURE_SEC,
      connections: 32,
    });
    const counted = main.committed > 0 && main.delivered === main.committed;
    const voidNote = counted
      ? undefined
      : `void: ${main.committed} orders created, ${main.delivered} delivered within ${DRAIN_MS / 1000} s`;
    const l = main.latency;
    const checks: Check[] = [
      {
        label: `order → receiver p50 ms at ${RATE}/s`,
        project: round(l.p50),
        baseline: null,
        ratio: null,
        target: `≤ ${TARGET_P50_MS} ms`,
        pass: !counted || l.p50 === null ? null : l.p50 <= TARGET_P50_MS,
        ...(voidNote ? { note: voidNote } : {}),
      },
      {
        label: `order → receiver p99 ms at ${RATE}/s`,
        project: round(l.p99),
        baseline: null,
        ratio: null,
        target: `≤ ${TARGET_P99_MS} ms`,
        pass: !counted || l.p99 === null ? null : l.p99 <= TARGET_P99_MS,
      },
      {
        label: 'orders created = delivered',
        project: `${main.delivered} of ${main.committed}`,
        baseline: null,
        ratio: null,
        target: 'equal',
        pass: counted,
      },
    ];
    const table = phaseTable(main);
    table.notes!.push(
      'created_at is taken before the order is inserted, so the total includes the order transaction itself',
      ...complaintNotes(stack),
    );
    return {
      checks,
      tables: [
        table,
        cpuTable([{ name: `${RATE} orders/s`, cpu: main.cpu }], 'CPU'),
        cpuPerUnitTable([{ name: `${RATE} orders/s`, cpu: main.cpu, units: main.load.ok }], 'order'),
      ],
      data: {
        stackLog: stackComplaints(stack),
        rate: RATE,
        seconds: MEASURE_SEC,
        targetP50Ms: TARGET_P50_MS,
        targetP99Ms: TARGET_P99_MS,
        phase: main,
      },
    };
  },
};
