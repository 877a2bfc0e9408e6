// Memory soak (issue 9, target 7): keyed orders paced at a steady moderate rate for 5 minutes with
// one endpoint on `*` receiving every event; the RSS of every process of the stack (gateway, each
// service) and of nats-server is sampled every 5 s. Target: each flat, the last minute's median
// within ±10 % of the first minute's. PostgreSQL backends of the benchmark's database are shown
// (summed) but not judged: their RSS grows as they touch shared buffers. The rate is 300/s, or
// half the project's keyed maximum when that is lower (the ingest scenario's median, or a quick
// probe when run alone), so the soak measures memory, not an overload's queues. A count check
// (every order delivered) makes a lossy soak void.
import {
  type CpuReport,
  cpuPerUnitTable,
  cpuTable,
  natsServerPid,
  ONE_PROCESS_PART,
  postgresBackendsRssMiB,
  rssMiB,
  stackCpuWindow,
  stackPids,
} from './cpu.ts';
import { CONNECTIONS, type IngestData, keyedMax } from './ingest.ts';
import {
  type Benchmark,
  type Check,
  complaintNotes,
  createAccounts,
  createEndpoint,
  databaseName,
  median,
  ONE_PROCESS,
  orderBody,
  orderHeaders,
  ordersCommitted,
  round,
  sleep,
  stackComplaints,
  startBenchStack,
  summarize,
  type Table,
  waitUntil,
} from './lib.ts';
import { type LoadSpec, runLoad } from './load.ts';
import { EventLog, startReceivers } from './receiver.ts';

const SOAK_SEC = Number(process.env.BENCH_SOAK_SEC ?? 300);
const WARM_SEC = 20;
const SAMPLE_SEC = 5;
const MAX_RATE = Number(process.env.BENCH_SOAK_RATE ?? 300);
const TARGET = 0.1;
const PARTS = ONE_PROCESS
  ? [ONE_PROCESS_PART, 'webhooks']
  : ['gateway', 'accounts', 'commerce', 'messaging', 'webhooks'];

interface Sample {
  t: number;
  mib: Record<string, number | null>;
}

export const memorySoak: Benchmark = {
  name: 'memory-soak',
  target: 7,
  title: `Memory soak: RSS of every process over ${SOAK_SEC} s of ingest + delivery`,
  budgetMs: (SOAK_SEC + 150) * 1000,
  expectedSec: SOAK_SEC + 45,
  async run(ctx) {
    const [receiver] = await startReceivers(1, 'ok', ctx.defer);
    const stack = await startBenchStack(ctx);
    const [account] = await createAccounts(stack, 1);
    await createEndpoint(stack, account!, receiver!.url, 'soak: everything', ['*']);
    const log = new EventLog(receiver!);
    const spec = (marker: string, sec: number, rate?: number): LoadSpec => ({
      title: marker,
      url: `${stack.baseUrl}/v1/orders`,
      method: 'POST',
      connections: CONNECTIONS,
      durationSec: sec,
      ...(rate ? { overallRate: rate } : {}),
      body: orderBody(marker),
      headers: orderHeaders(account!.secretKey, true),
      idReplacement: true,
    });

    const fromIngest = ctx.shared.get('ingest') as IngestData | undefined;
    let max = fromIngest ? keyedMax(fromIngest) : null;
    if (!max && !process.env.BENCH_SOAK_RATE) {
      ctx.log('memory-soak: measuring the keyed maximum, 2 + 4 s');
      await runLoad(spec('probe', 2), { signal: ctx.signal });
      max = (await runLoad(spec('probe', 4), { signal: ctx.signal })).okPerSec;
    }
    const rate = Math.max(1, Math.round(Math.min(MAX_RATE, max ? max / 2 : MAX_RATE)));
    ctx.log(`memory-soak: warm-up, ${WARM_SEC} s at ${rate}/s`);
    await runLoad(spec('warmup', WARM_SEC, rate), { signal: ctx.signal });

    const pids: Record<string, number | null> = {};
    const found = stackPids(stack);
    for (const p of PARTS) pids[p] = found[p] ?? null;
    pids['nats-server'] = natsServerPid(stack.nats.url);
    const database = databaseName(stack.db.url);
    const samples: Sample[] = [];
    let sampling = true;
    const start = performance.now();
    const sampler = (async () => {
      for (let i = 0; sampling; i++) {
        const mib: Sample['mib'] = {};
        for (const [name, pid] of Object.entries(pids)) mib[name] = pid ? rssMiB(pid) : null;
        mib['postgres backends (sum)'] = postgresBackendsRssMiB(database);
        samples.push({ t: round((performance.now() - start) / 1000, 1)!, mib });
        const wait = start + (i + 1) * SAMPLE_SEC * 1000 - performance.now();
        await sleep(Math.max(0, wait), ctx.signal).catch(() => {});
      }
    })();

    ctx.log(`memory-soak: ${SOAK_SEC} s at ${rate}/s, sampling RSS every ${SAMPLE_SEC} s`);
    let cpu: ReturnType<typeof stackCpuWindow> | undefined;
    let cpuReport: CpuReport | null = null;
    let load: Awaited<ReturnType<typeof runLoad>>;
    try {
      load = await runLoad(spec('soak', SOAK_SEC, rate), {
        signal: ctx.signal,
        onStart: () => {
          cpu = stackCpuWindow(stack);
        },
        onEnd: () => {
          cpuReport = cpu?.end() ?? null;
        },
      });
    } finally {
      sampling = false;
      await sampler;
    }
    const seconds = samples.at(-1)?.t ?? 0;
    const committed = await ordersCommitted(stack.db.url, account!.id, 'soak');
    await waitUntil(() => log.count('soak') >= committed, 20_000, ctx.signal);
    const delivered = log.count('soak');
    const latency = summarize(log.events('soak').map((e) => e.firstByteAt - e.createdAt));

    const edge = Math.min(60, SOAK_SEC / 5);
    const names = [...PARTS, 'nats-server', 'postgres backends (sum)'];
    const stats = names.map((name) => {
      const values = samples.map((s) => ({ t: s.t, v: s.mib[name] ?? null }));
      const first = median(values.filter((x) => x.t < edge).map((x) => x.v));
      const last = median(values.filter((x) => x.t >= seconds - edge).map((x) => x.v));
      const max = Math.max(0, ...values.map((x) => x.v ?? 0));
      return { name, first, last, max, change: first && last ? last / first - 1 : null };
    });
    const lost = committed - delivered;
    const failures = load.non2xx + load.errors + load.timeouts;
    const shortened = SOAK_SEC < 300;
    const voidNote = [
      lost !== 0 ? `${committed} orders, ${delivered} delivered` : '',
      shortened ? `soak shortened to ${SOAK_SEC} s (BENCH_SOAK_SEC): not the 5 minutes of the target` : '',
    ]
      .filter(Boolean)
      .join('; ');
    const checks: Check[] = stats
      .filter((s) => s.name !== 'postgres backends (sum)')
      .map((s, i) => ({
        label: `RSS ${s.name}, MiB`,
        project: round(s.last),
        baseline: round(s.first),
        ratio: s.change === null ? null : 1 + s.change,
        target: `±${TARGET * 100} %`,
        pass: voidNote || s.change === null ? null : Math.abs(s.change) <= TARGET,
        ...(s.change === null ? { note: `no RSS for ${s.name} (process not found)` } : {}),
        ...(i === 0
          ? {
              note: `project: last minute's median, baseline: first minute's${voidNote ? `; void: ${voidNote}` : ''}`,
            }
          : {}),
      }));
    checks.push({
      label: `orders (${rate}/s) = deliveries`,
      project: `${delivered} of ${committed}`,
      baseline: null,
      ratio: null,
      target: 'equal',
      pass: committed > 0 && lost === 0,
      ...(failures ? { note: `${failures} orders answered non-2xx or failed` } : {}),
    });
    const step = Math.max(1, Math.round(30 / SAMPLE_SEC));
    const tables: Table[] = [
      {
        title: `Memory soak: keyed orders paced at ${rate}/s for ${SOAK_SEC} s (after ${WARM_SEC} s warm-up), 1 endpoint on "*"; RSS in MiB`,
        columns: ['process', 'pid', 'first minute median', 'last minute median', 'max', 'change'],
        rows: stats.map((s) => [
          s.name,
          pids[s.name] ?? null,
          round(s.first),
          round(s.last),
          round(s.max),
          s.change === null ? null : `${s.change >= 0 ? '+' : ''}${(s.change * 100).toFixed(1)} %`,
        ]),
        notes: [
          `orders: ${load.ok} 2xx of ${load.requests} sent (${round(load.okPerSec, 0)}/s, POST p50 ${load.latencyMs.p50} ms, p99 ${load.latencyMs.p99} ms); ` +
            `created ${committed}, delivered ${delivered}; order → receiver p50 ${round(latency.p50)} ms, p99 ${round(latency.p99)} ms`,
          `rate: ${rate}/s = min(${MAX_RATE}, half the keyed maximum ${max ? Math.round(max) : '–'})`,
          'nats-server serves the whole machine (other test runs too); postgres backends are not judged',
          ...complaintNotes(stack),
        ],
      },
      {
        title: 'RSS over the soak (MiB), every 30 s',
        columns: ['t s', ...names],
        rows: samples
          .filter((_, i) => i % step === 0 || i === samples.length - 1)
          .map((s) => [s.t, ...names.map((n) => round(s.mib[n]))]),
      },
      cpuTable([{ name: 'soak', cpu: cpuReport }], 'CPU during the soak'),
      cpuPerUnitTable([{ name: 'soak', cpu: cpuReport, units: load.ok }], 'order'),
    ];
    return {
      checks,
      tables,
      data: {
        stackLog: stackComplaints(stack),
        rate,
        seconds,
        load,
        committed,
        delivered,
        latency,
        stats,
        samples,
      },
    };
  },
};
