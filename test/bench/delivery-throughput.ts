// Delivery throughput: N endpoints (one receiver each) subscribed to order.created in one
// account; orders as fast as ingest allows for 10 s, then the backlog drains. Deliveries/s while
// the orders come in, and while the backlog drains with no ingest competing for the CPU.
// DESIGN.md target: ≥ 0.5 × a bare JetStream → sign → undici POST → ack pipeline (PERF-NOTES.md
// saw it saturate below 2,700 events/s on this box; not measured here).
import { type CpuReport, cpuTable, cpuWindow } from './cpu.ts';
import {
  type Benchmark,
  complaintNotes,
  createAccounts,
  createEndpoint,
  databaseName,
  now,
  orderBody,
  orderHeaders,
  ordersCommitted,
  round,
  stackComplaints,
  startBenchStack,
  type Table,
  waitUntil,
} from './lib.ts';
import { type LoadSummary, runLoad } from './load.ts';
import { EventLog, startReceivers } from './receiver.ts';

const ENDPOINTS = Number(process.env.BENCH_ENDPOINTS ?? 4);
const MEASURE_SEC = 10;
const CONNECTIONS = 32;
const DRAIN_MS = 25_000;
/** PERF-NOTES.md: the bare pipeline saturated somewhere below this many events/s. */
const NOTES_BARE_PIPELINE = 2_700;

export const deliveryThroughput: Benchmark = {
  name: 'delivery-throughput',
  title: `Delivery throughput: ${ENDPOINTS} endpoints`,
  budgetMs: 75_000,
  async run(ctx) {
    const receivers = await startReceivers(ENDPOINTS, 'ok', ctx.defer);
    const stack = await startBenchStack(ctx);
    const [account] = await createAccounts(stack, 1);
    for (const [i, r] of receivers.entries()) await createEndpoint(stack, account!, r.url, `throughput ${i}`);
    const logs = receivers.map((r) => new EventLog(r));
    const total = (marker: string) => logs.reduce((s, l) => s + l.count(marker), 0);

    // Warm the whole path at a modest rate, and let it drain before measuring.
    ctx.log(`delivery-throughput: warm-up, 2 s at 100 orders/s`);
    const warm = await runLoad(
      {
        title: 'warm-up',
        url: `${stack.baseUrl}/v1/orders`,
        method: 'POST',
        connections: 16,
        durationSec: 2,
        overallRate: 100,
        body: orderBody('warmup'),
        headers: orderHeaders(account!.secretKey, false),
      },
      { signal: ctx.signal },
    );
    await waitUntil(() => total('warmup') >= warm.ok * ENDPOINTS, 10_000, ctx.signal);

    ctx.log(`delivery-throughput: ${MEASURE_SEC} s of orders on ${CONNECTIONS} connections, then drain`);
    let loadStart = 0;
    let loadEnd = 0;
    let cpu: ReturnType<typeof cpuWindow> | undefined;
    let cpuLoad: CpuReport | null = null;
    const load: LoadSummary = await runLoad(
      {
        title: 'orders',
        url: `${stack.baseUrl}/v1/orders`,
        method: 'POST',
        connections: CONNECTIONS,
        durationSec: MEASURE_SEC,
        body: orderBody('tput'),
        headers: orderHeaders(account!.secretKey, false),
      },
      {
        signal: ctx.signal,
        onStart: () => {
          loadStart = now();
          cpu = cpuWindow(databaseName(stack.db.url));
        },
        onEnd: () => {
          loadEnd = now();
          cpuLoad = cpu?.end() ?? null;
        },
      },
    );
    const committed = await ordersCommitted(stack.db.url, account!.id, 'tput');
    const expected = committed * ENDPOINTS;
    const atLoadEnd = total('tput');
    const drainCpu = cpuWindow(databaseName(stack.db.url));
    const drained = await waitUntil(() => total('tput') >= expected, DRAIN_MS, ctx.signal);
    const cpuDrain = drainCpu.end();

    const arrivals = logs.flatMap((l) => l.events('tput').map((e) => e.at)).sort((a, b) => a - b);
    const last = arrivals.at(-1) ?? loadEnd;
    const inWindow = arrivals.filter((t) => t >= loadStart && t <= loadEnd).length;
    const afterWindow = arrivals.length - inWindow;
    const windowSec = (loadEnd - loadStart) / 1000;
    const drainSec = Math.max(0.001, (last - loadEnd) / 1000);
    const whileLoading = inWindow / windowSec;
    const whileDraining = afterWindow > 0 ? afterWindow / drainSec : null;
    const overall = arrivals.length / ((last - loadStart) / 1000);
    // The best 1-second stretch: the pipeline's ceiling, whichever phase it was in.
    let peak = 0;
    for (let i = 0, j = 0; i < arrivals.length; i++) {
      while (arrivals[i]! - arrivals[j]! > 1000) j++;
      peak = Math.max(peak, i - j + 1);
    }
    const perReceiver = logs.map((l) => l.count('tput'));
    const repeats = logs.reduce((s, l) => s + l.repeats, 0);

    const tables: Table[] = [
      {
        title: `Delivery throughput: ${ENDPOINTS} endpoints × order.created, orders closed loop on ${CONNECTIONS} connections for ${MEASURE_SEC} s`,
        columns: ['measure', 'value'],
        rows: [
          ['orders committed', committed],
          ['orders/s while loading', round(load.okPerSec, 0)],
          ['deliveries expected', expected],
          ['deliveries received', arrivals.length],
          ['  of which during the load window', inWindow],
          ['  backlog at the end of the load', expected - atLoadEnd],
          ['deliveries/s while loading', round(whileLoading, 0)],
          ['deliveries/s while draining (no ingest)', round(whileDraining, 0)],
          ['deliveries/s overall (load start → last)', round(overall, 0)],
          ['deliveries/s, best 1-s stretch', peak],
          ['time from load end to last delivery, s', round(drainSec, 2)],
        ],
        notes: [
          drained
            ? `all ${expected} deliveries arrived (per receiver: ${perReceiver.join(', ')}${repeats ? `; repeats ${repeats}` : ''})`
            : `NOT all delivered within ${DRAIN_MS / 1000} s of the load's end: ${arrivals.length} of ${expected}`,
          `reference: PERF-NOTES bare pipeline saturates below ~${NOTES_BARE_PIPELINE.toLocaleString('en-US')} events/s ` +
            `(target ≥ 0.5 × that ≈ ${(NOTES_BARE_PIPELINE / 2).toLocaleString('en-US')}/s; a different run, so indicative only)`,
          ...complaintNotes(stack),
        ],
      },
      cpuTable(
        [
          { name: 'while loading', cpu: cpuLoad },
          { name: 'while draining', cpu: cpuDrain },
        ],
        'CPU',
      ),
    ];
    return {
      tables,
      data: {
        stackLog: stackComplaints(stack),
        endpoints: ENDPOINTS,
        measureSec: MEASURE_SEC,
        load,
        ordersCommitted: committed,
        expected,
        received: arrivals.length,
        receivedDuringLoad: inWindow,
        backlogAtLoadEnd: expected - atLoadEnd,
        deliveriesPerSecWhileLoading: whileLoading,
        deliveriesPerSecWhileDraining: whileDraining,
        deliveriesPerSecOverall: overall,
        deliveriesPerSecPeak1s: peak,
        drainSec,
        allDelivered: drained,
        perReceiver,
        repeats,
        cpu: { loading: cpuLoad, draining: cpuDrain },
      },
    };
  },
};
